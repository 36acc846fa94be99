"""Admin for the scheduled jobs: their schedule (django-celery-beat's periodic tasks, which beat
reads from the database) and their runs (read-only: proof the schedule ran). Both offer "Run now",
which sends the task beat would send; the run is recorded with trigger `admin`."""

from django.contrib import admin, messages
from django.http import HttpRequest
from django.utils.translation import ngettext
from django_celery_beat.admin import PeriodicTaskAdmin
from django_celery_beat.models import PeriodicTask

from governance.admin import ReadOnlyAdminMixin
from governance.jobs.schedule import enqueue_job, job_of_task, task_name
from governance.models import JobRun

ADMIN_TRIGGER = "admin"


def run_jobs_now(model_admin: admin.ModelAdmin, request: HttpRequest, jobs: list[str]) -> None:
    for job in jobs:
        enqueue_job(job, trigger=ADMIN_TRIGGER)
    model_admin.message_user(request, ngettext(
        "Sent %(jobs)s to the worker; its run appears under Job runs (trigger admin).",
        "Sent %(jobs)s to the worker; their runs appear under Job runs (trigger admin).", len(jobs),
    ) % {"jobs": ", ".join(jobs)}, messages.SUCCESS)


@admin.register(JobRun)
class JobRunAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["job", "status", "trigger", "started_at", "finished_at", "duration", "counts", "errors"]
    list_filter = ["job", "status", "trigger"]
    date_hierarchy = "started_at"
    ordering = ["-started_at"]
    actions = ["run_now"]

    @admin.display(description="duration")
    def duration(self, run: JobRun) -> str:
        if run.finished_at is None:
            return "-"
        return f"{(run.finished_at - run.started_at).total_seconds():.2f} s"

    @admin.action(description="Run the selected runs' jobs again now", permissions=["run"])
    def run_now(self, request: HttpRequest, queryset) -> None:
        names = set(queryset.values_list("job", flat=True).distinct())
        jobs = sorted(name for name in names if job_of_task(task_name(name)))
        if names - set(jobs):
            self.message_user(request, "Not a scheduled job (run it with its manage.py command): "
                              + ", ".join(sorted(names - set(jobs))), messages.WARNING)
        if jobs:
            run_jobs_now(self, request, jobs)

    def has_run_permission(self, request: HttpRequest) -> bool:
        return may_run_jobs(request)


def may_run_jobs(request: HttpRequest) -> bool:
    """Whoever may change the schedule may run a job now."""
    return request.user.has_perm("django_celery_beat.change_periodictask")


admin.site.unregister(PeriodicTask)


@admin.register(PeriodicTask)
class JobScheduleAdmin(PeriodicTaskAdmin):
    """The library's periodic task admin; its "Run selected tasks" records a job's run as `admin`."""

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
