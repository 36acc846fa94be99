"""Admin for the scheduled jobs: their schedule (django-celery-beat's periodic tasks, which beat
reads from the database) and their runs (read-only: proof the schedule ran). Both offer "Run now",
which sends the task beat would send; the run is recorded with trigger `admin`.

Both lists are written for reading at a glance: a run's counts as one line of words (the JSON
only on its page), intervals in words ("every day", not "every 86400 seconds"), and a task's last
run taken from the JobRun records, which see every run (beat's `last_run_at` sees only beat's)."""

import json
from datetime import timedelta

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.contrib.humanize.templatetags.humanize import naturaltime
from django.db import connection
from django.db.models import OuterRef, QuerySet, Subquery
from django.db.models.functions import Substr
from django.http import HttpRequest
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.http import urlencode
from django.utils.translation import ngettext
from django_celery_beat.admin import IntervalScheduleAdmin, PeriodicTaskAdmin, PeriodicTaskForm
from django_celery_beat.models import IntervalSchedule, PeriodicTask

from governance.jobs.models import JobRun
from governance.jobs.registry import TASK_PREFIX, job_of_task, task_name
from governance.jobs.schedule import enqueue_job
from governance.readonly_admin import ReadOnlyAdminMixin
from memory.engine import current

ADMIN_TRIGGER = "admin"
ERROR_PREVIEW_CHARS = 60


def run_jobs_now(model_admin: admin.ModelAdmin, request: HttpRequest, jobs: list[str]) -> None:
    for job in jobs:
        enqueue_job(job, trigger=ADMIN_TRIGGER)
    model_admin.message_user(
        request,
        ngettext(
            "Sent %(jobs)s to the worker; its run appears under Job runs (trigger admin).",
            "Sent %(jobs)s to the worker; their runs appear under Job runs (trigger admin).",
            len(jobs),
        )
        % {"jobs": ", ".join(jobs)},
        messages.SUCCESS,
    )


def counts_summary(counts: dict) -> str:
    """The non-zero counts of a run in words, in the job's own order: "records: 7, duplicate
    proposals: 1". Empty when every count is zero."""
    return ", ".join(f"{key.replace('_', ' ')}: {value}" for key, value in (counts or {}).items() if value)


class ActivityFilter(admin.SimpleListFilter):
    """Idle runs (a job that found nothing to do) are most rows of a quiet deployment: this lets an
    admin look past them without hiding them (the unfiltered list shows every run)."""

    title = "activity"
    parameter_name = "activity"

    def lookups(self, request, model_admin):
        return [("some", "did something (a count above 0)"), ("none", "nothing to do (every count 0)"), ("errors", "with errors")]

    def queryset(self, request, queryset: QuerySet) -> QuerySet:
        if self.value() == "errors":
            return queryset.exclude(errors=[])
        if self.value() in ("some", "none"):
            # The keys differ per job (18 for propagate_forgets), so the JSON object's values are
            # read by the database's own JSON functions.
            did = queryset.alias(did_something=current().ops.json_has_nonzero_value(connection, JobRun, "counts"))
            return did.filter(did_something=self.value() == "some")
        return queryset


@admin.register(JobRun)
class JobRunAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["job", "status", "trigger", "started", "duration", "summary", "error_summary"]
    list_filter = [ActivityFilter, "job", "status", "trigger"]
    date_hierarchy = "started_at"
    ordering = ["-started_at"]
    actions = ["run_now"]
    fields = readonly_fields = ("job", "status", "trigger", "started_at", "finished_at", "duration", "counts_json", "errors_list")

    @admin.display(description="started", ordering="started_at")
    def started(self, run: JobRun) -> str:
        """Date over time: two short lines leave the width to the counts and errors."""
        at = timezone.localtime(run.started_at)
        return format_html("{}<br>{}", at.strftime("%Y-%m-%d"), at.strftime("%H:%M:%S"))

    @admin.display(description="duration")
    def duration(self, run: JobRun) -> str:
        if run.finished_at is None:
            return "-"
        return f"{(run.finished_at - run.started_at).total_seconds():.2f} s"

    @admin.display(description="counts")
    def summary(self, run: JobRun) -> str:
        if run.status == JobRun.Status.RUNNING:
            return "running…"
        if text := counts_summary(run.counts):
            return text
        # Quiet: most runs of an idle deployment; "nothing" is the honest word for a run with no counts.
        return format_html(
            '<span class="quiet">{}</span>', "nothing to do" if run.status == JobRun.Status.SUCCEEDED else "nothing"
        )

    @admin.display(description="errors")
    def error_summary(self, run: JobRun) -> str:
        if not run.errors:
            return "-"
        first = str(run.errors[0])
        shown = first if len(first) <= ERROR_PREVIEW_CHARS else first[: ERROR_PREVIEW_CHARS - 1] + "…"
        more = f" (+{len(run.errors) - 1} more)" if len(run.errors) > 1 else ""
        return format_html('<span title="{}">{}</span>{}', first, shown, more)

    @admin.display(description="counts")
    def counts_json(self, run: JobRun) -> str:
        return format_html('<pre class="json">{}</pre>', json.dumps(run.counts, indent=2))

    @admin.display(description="errors")
    def errors_list(self, run: JobRun) -> str:
        if not run.errors:
            return "none"
        return format_html('<pre class="json">{}</pre>', "\n".join(str(error) for error in run.errors))

    @admin.action(description="Run the selected runs' jobs again now", permissions=["run"])
    def run_now(self, request: HttpRequest, queryset) -> None:
        names = set(queryset.values_list("job", flat=True).distinct())
        jobs = sorted(name for name in names if job_of_task(task_name(name)))
        if names - set(jobs):
            self.message_user(
                request,
                "Not a scheduled job (run it with its manage.py command): " + ", ".join(sorted(names - set(jobs))),
                messages.WARNING,
            )
        if jobs:
            run_jobs_now(self, request, jobs)

    def has_run_permission(self, request: HttpRequest) -> bool:
        return may_run_jobs(request)


def may_run_jobs(request: HttpRequest) -> bool:
    """Whoever may change the schedule may run a job now."""
    return request.user.has_perm("django_celery_beat.change_periodictask")


# --------------------------------------------------------------------------------------------
# the schedule

TIME_UNITS = [("day", 86400), ("hour", 3600), ("minute", 60), ("second", 1)]


def every_text(seconds: float) -> str:
    """An interval in the largest whole unit: 86400 -> "every day", 300 -> "every 5 minutes",
    90 -> "every 90 seconds"."""
    for unit, size in TIME_UNITS:
        if seconds >= size and seconds % size == 0:
            count = int(seconds // size)
            return f"every {unit}" if count == 1 else f"every {count} {unit}s"
    return f"every {seconds:g} seconds"


def interval_text(interval: IntervalSchedule) -> str:
    return every_text(timedelta(**{interval.period: interval.every}).total_seconds())


def schedule_text(task: PeriodicTask) -> str:
    """A periodic task's schedule in words, whichever of the four kinds it has."""
    if task.interval:
        text = interval_text(task.interval)
    elif task.crontab:
        text = task.crontab.human_readable
    elif task.solar:
        text = str(task.solar)
    elif task.clocked:
        text = f"at {task.clocked}"
    else:
        return "no schedule"
    return f"once, {text}" if task.one_off else text


class JobScheduleForm(PeriodicTaskForm):
    """The library's form, with the registered task selected when the row's task is one (it left
    that list blank beside a narrow "custom" box holding the name)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        regtask, task = self.fields["regtask"], self.fields["task"]
        regtask.label, task.label = "Task", "Other task"
        regtask.help_text = "A task the worker knows; a scheduled job's task is governance.tasks.run_ and its name."
        task.help_text = "Only for a task not in the list above (the list wins when both are set)."
        task.widget.attrs["class"] = "vTextField vTaskField"
        current = self.instance.task if self.instance.pk else ""
        if current and current in {value for value, _ in regtask.widget.choices}:
            self.initial["regtask"], self.initial["task"] = current, ""


admin.site.unregister(PeriodicTask)


@admin.register(PeriodicTask)
class JobScheduleAdmin(PeriodicTaskAdmin):
    """The library's periodic task admin, reading in words; its "Run selected tasks" records a job's
    run as `admin`."""

    form = JobScheduleForm
    list_display = ["name", "enabled", "schedule", "last_run"]  # the task is in the name (job-<name>) and the form
    list_filter = ["enabled", "one_off"]
    date_hierarchy = None
    # Beat's own "last run" (set when beat sends a task, not by a run at start or by "Run now") gives
    # way to the job's newest JobRun.
    fieldsets = [
        (name, {**options, "fields": tuple("last_run" if field == "last_run_at" else field for field in options["fields"])})
        for name, options in PeriodicTaskAdmin.fieldsets
    ]
    readonly_fields = ["last_run", "crontab_translation"]

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        # The job's newest JobRun, matched by the job's name in the task name (a task that is no
        # job matches none and falls back to beat's own last_run_at).
        runs = JobRun.objects.filter(job=Substr(OuterRef("task"), len(TASK_PREFIX) + 1)).order_by("-started_at", "-pk")
        return (
            super()
            .get_queryset(request)
            .annotate(
                last_job_run_at=Subquery(runs.values("started_at")[:1]),
                last_job_run_status=Subquery(runs.values("status")[:1]),
            )
        )

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        field = super().formfield_for_foreignkey(db_field, request, **kwargs)
        if db_field.name == "interval":
            field.label_from_instance = interval_text
        return field

    def render_change_form(self, request: HttpRequest, context: dict, *args, obj=None, **kwargs):
        if obj is not None:
            context["subtitle"] = f"{obj.name}: {schedule_text(obj)}"
        return super().render_change_form(request, context, *args, obj=obj, **kwargs)

    def action_checkbox(self, task: PeriodicTask) -> str:
        """The row's checkbox, labelled for screen readers with the schedule in words (the library's
        label is the model's str: "every 86400 seconds")."""
        label = format_html("Select this object for an action - {}: {}", task.name, schedule_text(task))
        return forms.CheckboxInput({"class": "action-select", "aria-label": label}, lambda value: False).render(
            helpers.ACTION_CHECKBOX_NAME, str(task.pk)
        )

    @admin.display(description="schedule")
    def schedule(self, task: PeriodicTask) -> str:
        return schedule_text(task)

    @admin.display(description="last run", ordering="last_job_run_at")
    def last_run(self, task: PeriodicTask) -> str:
        at = getattr(task, "last_job_run_at", None)
        if at is None:
            return f"sent by beat {naturaltime(task.last_run_at)}" if task.last_run_at else "never"
        job = task.task.removeprefix(TASK_PREFIX)
        url = f"{reverse('admin:governance_jobrun_changelist')}?{urlencode({'job': job})}"
        return format_html(
            '<a href="{}" title="{}">{}, {}</a>', url, at.isoformat(timespec="seconds"), task.last_job_run_status, naturaltime(at)
        )

    @admin.action(description="Run selected tasks now", permissions=["run"])
    def run_tasks(self, request: HttpRequest, queryset) -> None:
        jobs = sorted({job for job in map(job_of_task, queryset.values_list("task", flat=True)) if job})
        others = queryset.exclude(task__in=[task_name(job) for job in jobs])
        if jobs:
            run_jobs_now(self, request, jobs)
        if others.exists():
            super().run_tasks(request, others)

    def has_run_permission(self, request: HttpRequest) -> bool:
        return may_run_jobs(request)


admin.site.unregister(IntervalSchedule)


@admin.register(IntervalSchedule)
class IntervalAdmin(IntervalScheduleAdmin):
    """The library's interval list, in words beside the stored number and unit."""

    list_display = ["in_words", "every", "period"]

    @admin.display(description="interval")
    def in_words(self, interval: IntervalSchedule) -> str:
        return interval_text(interval)
