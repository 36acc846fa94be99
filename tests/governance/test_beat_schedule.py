"""The job schedule in the database (django-celery-beat): seeded from the JOB_*_INTERVAL defaults,
edited in the admin and read from there by beat's scheduler, and "Run now" from the admin."""

import importlib
from unittest import mock

import pytest
from django.apps import apps
from django.contrib.auth import get_user_model
from django.db import connection
from django_celery_beat.models import IntervalSchedule, PeriodicTask

from config.celery import app as celery_app
from governance.jobs import JOBS
from governance.jobs.schedule import JobScheduler, ensure_job_schedule, entry_name, scheduled_intervals, task_name
from governance.models import JobRun

pytestmark = pytest.mark.django_db

seed_migration = importlib.import_module("governance.migrations.0006_seed_job_schedule")
later_seed_migration = importlib.import_module("governance.migrations.0010_seed_sweep_indexes_job")
ann_seed_migration = importlib.import_module("governance.migrations.0011_seed_refresh_semantic_ann_job")
webhooks_migration = importlib.import_module("governance.migrations.0013_webhooks")


@pytest.fixture
def admin_client(client):
    admin = get_user_model().objects.create_superuser("root", "root@example.com", "a-long-password")
    client.force_login(admin)
    return client


def schedule_rows() -> dict[str, tuple[str, int, bool]]:
    return {
        row.name: (row.task, row.interval.every if row.interval else None, row.enabled)
        for row in PeriodicTask.objects.select_related("interval")
    }


def test_the_migrations_seed_one_enabled_row_per_job_from_todays_defaults(settings):
    PeriodicTask.objects.all().delete()
    settings.JOB_INTERVALS = dict(settings.JOB_INTERVAL_DEFAULTS)  # no JOB_*_INTERVAL set
    seed_migration.seed(apps, None)
    later_seed_migration.seed(apps, None)
    ann_seed_migration.seed(apps, None)
    webhooks_migration.seed(apps, None)
    assert schedule_rows() == {
        "job-expire": ("governance.tasks.run_expire", 60, True),
        "job-propagate_forgets": ("governance.tasks.run_propagate_forgets", 30, True),
        "job-propose_duplicates": ("governance.tasks.run_propose_duplicates", 3600, True),
        "job-prune": ("governance.tasks.run_prune", 21600, True),
        "job-golden_recall": ("governance.tasks.run_golden_recall", 86400, True),
        "job-disk_rewrite": ("governance.tasks.run_disk_rewrite", 3600, True),
        "job-alerts": ("governance.tasks.run_alerts", 300, True),
        "job-sweep_indexes": ("governance.tasks.run_sweep_indexes", 300, True),
        "job-refresh_semantic_ann": ("governance.tasks.run_refresh_semantic_ann", 600, True),
        "job-deliver_webhooks": ("governance.tasks.run_deliver_webhooks", 30, True),
    }
    assert all(IntervalSchedule.objects.get(every=every).period == "seconds" for _, every, _ in schedule_rows().values())
    assert scheduled_intervals() == {job: float(seconds) for job, seconds in settings.JOB_INTERVAL_DEFAULTS.items()}


def test_the_seed_takes_the_variables_and_leaves_a_schedule_already_there_alone(settings):
    PeriodicTask.objects.all().delete()
    settings.JOB_INTERVALS = {**settings.JOB_INTERVAL_DEFAULTS, "expire": 2.5, "prune": 0}
    seed_migration.seed(apps, None)
    rows = schedule_rows()
    assert rows["job-expire"] == ("governance.tasks.run_expire", 3, True)  # whole seconds, rounded up
    assert rows["job-prune"] == ("governance.tasks.run_prune", 21600, False)  # 0: off, with its default interval
    assert "prune" not in scheduled_intervals()

    settings.JOB_INTERVALS = dict(settings.JOB_INTERVAL_DEFAULTS)
    seed_migration.seed(apps, None)  # e.g. migrating again: an admin's schedule is kept
    assert schedule_rows() == rows


def test_beat_recreates_a_missing_row_and_a_set_variable_pins_its_job(settings):
    expire = PeriodicTask.objects.get(name=entry_name("expire"))
    expire.interval = IntervalSchedule.objects.create(every=900, period="seconds")
    expire.save()
    PeriodicTask.objects.filter(name=entry_name("alerts")).delete()
    settings.JOB_INTERVALS = {**settings.JOB_INTERVAL_DEFAULTS, "expire": 1, "prune": 5}

    assert ensure_job_schedule(pinned={"expire"}) == ["expire", "alerts"]
    rows = schedule_rows()
    assert rows["job-expire"][1:] == (1, True)  # JOB_EXPIRE_INTERVAL set in beat's environment wins
    assert rows["job-prune"][1:] == (21600, True)  # not pinned: the row decides
    assert rows["job-alerts"] == ("governance.tasks.run_alerts", 300, True)  # recreated


def test_a_job_row_an_admin_renamed_stays_the_jobs_row(settings):
    prune = PeriodicTask.objects.get(name=entry_name("prune"))
    prune.name = "Nightly retention purge"
    prune.save()
    settings.JOB_INTERVALS = dict(settings.JOB_INTERVAL_DEFAULTS)

    assert ensure_job_schedule(pinned=set()) == []  # not recreated beside it: the task would be sent twice
    assert PeriodicTask.objects.filter(task="governance.tasks.run_prune").count() == 1
    assert ensure_job_schedule(pinned={"prune"}) == ["prune"]  # a pinned variable writes the renamed row
    assert PeriodicTask.objects.get(task="governance.tasks.run_prune").name == "Nightly retention purge"


def test_beat_reads_the_jobs_with_their_expiry_from_the_database():
    entries = JobScheduler(app=celery_app, lazy=True).all_as_schedule()
    assert set(entries) == {entry_name(job) for job in JOBS}
    expire = entries["job-expire"]
    assert expire.task == task_name("expire") and expire.schedule.run_every.total_seconds() == 60
    # A tick not run before the next is due is dropped, not piled up behind a stopped worker.
    assert expire.options["expires"] == 60


@pytest.mark.django_db(transaction=True)
def test_a_schedule_changed_in_the_admin_reaches_a_running_scheduler(admin_client):
    ensure_job_schedule(pinned=set())
    scheduler = JobScheduler(app=celery_app)  # as beat starts it: reads every row
    assert scheduler.schedule["job-expire"].schedule.run_every.total_seconds() == 60
    assert "job-prune" in scheduler.schedule  # (a tick after the first read: the scheduler now watches for changes)

    row = PeriodicTask.objects.get(name=entry_name("expire"))
    every_5_s = IntervalSchedule.objects.create(every=5, period="seconds")
    form = admin_client.get(f"/admin/django_celery_beat/periodictask/{row.pk}/change/")
    assert form.status_code == 200 and b"job-expire" in form.content
    response = admin_client.post(
        f"/admin/django_celery_beat/periodictask/{row.pk}/change/",
        {
            "name": row.name,
            "regtask": row.task,
            "task": row.task,
            "enabled": "on",
            "description": row.description,
            "interval": every_5_s.pk,
            "args": "[]",
            "kwargs": "{}",
            "headers": "{}",
        },
    )
    assert response.status_code == 302, response.content.decode()[:3000]
    prune = PeriodicTask.objects.get(name=entry_name("prune"))
    admin_client.post("/admin/django_celery_beat/periodictask/", {"action": "disable_tasks", "_selected_action": [prune.pk]})

    entries = scheduler.schedule  # the scheduler notices the change on its next tick
    assert entries["job-expire"].schedule.run_every.total_seconds() == 5
    assert entries["job-expire"].options["expires"] == 5
    assert "job-prune" not in entries
    assert scheduled_intervals()["expire"] == 5 and "prune" not in scheduled_intervals()
    connection.close()  # the scheduler's connection handling must not leak into the flush


def run_now(admin_client, capture_on_commit, url: str, pks: list) -> list[tuple[str, dict]]:
    """Post the admin's "Run now" action; return the (task, kwargs) it sent once its transaction
    committed (the broker itself is replaced: what it delivers is tested with a real worker)."""
    sent = []
    with (
        mock.patch(
            "celery.app.task.Task.apply_async",
            autospec=True,
            side_effect=lambda task, args=None, kwargs=None, **options: sent.append((task.name, kwargs)),
        ),
        capture_on_commit(execute=True),
    ):
        response = admin_client.post(
            url, {"action": "run_tasks" if "periodictask" in url else "run_now", "_selected_action": pks}, follow=True
        )
    assert response.status_code == 200
    return sent


def test_run_now_on_the_schedule_sends_the_task_beat_sends_and_the_run_is_recorded_as_admin(
    admin_client,
    django_capture_on_commit_callbacks,
    make_records,
):
    ids = make_records(2)  # past their expires_at
    expire = PeriodicTask.objects.get(name=entry_name("expire"))
    sent = run_now(admin_client, django_capture_on_commit_callbacks, "/admin/django_celery_beat/periodictask/", [expire.pk])
    assert sent == [("governance.tasks.run_expire", {"trigger": "admin"})]

    # What the worker does with that message: the same task beat's tick runs, under the job's lock.
    celery_app.tasks["governance.tasks.run_expire"](**sent[0][1])
    run = JobRun.objects.get(job="expire")
    assert (run.trigger, run.status) == ("admin", JobRun.Status.SUCCEEDED)
    assert run.counts["expired"] == len(ids)


def test_run_now_on_job_runs_sends_each_selected_job_once(admin_client, django_capture_on_commit_callbacks):
    from governance.jobs import run_job

    runs = [run_job("prune", trigger="run_job"), run_job("prune", trigger="run_job"), run_job("alerts", trigger="run_job")]
    sent = run_now(admin_client, django_capture_on_commit_callbacks, "/admin/governance/jobrun/", [run.pk for run in runs])
    assert sorted(sent) == [
        ("governance.tasks.run_alerts", {"trigger": "admin"}),
        ("governance.tasks.run_prune", {"trigger": "admin"}),
    ]


def test_only_who_may_change_the_schedule_may_run_a_job_now(client, django_capture_on_commit_callbacks):
    from django.contrib.auth.models import Permission

    staff = get_user_model().objects.create_user("viewer", password="a-long-password", is_staff=True)
    staff.user_permissions.add(*Permission.objects.filter(codename__in=["view_jobrun", "view_periodictask"]))
    client.force_login(staff)
    expire = PeriodicTask.objects.get(name=entry_name("expire"))
    assert b"run_tasks" not in client.get("/admin/django_celery_beat/periodictask/").content
    sent = run_now(client, django_capture_on_commit_callbacks, "/admin/django_celery_beat/periodictask/", [expire.pk])
    assert sent == []


def test_a_job_moved_to_a_crontab_counts_for_health_with_the_longest_gap_between_its_runs():
    from django_celery_beat.models import CrontabSchedule

    row = PeriodicTask.objects.get(name=entry_name("prune"))
    row.interval, row.crontab = None, CrontabSchedule.objects.create(minute="0", hour="3")
    row.save()
    weekdays = PeriodicTask.objects.get(name=entry_name("alerts"))
    weekdays.interval = None
    weekdays.crontab = CrontabSchedule.objects.create(minute="0", hour="9-17", day_of_week="1-5")
    weekdays.save()
    hourly_weekdays = PeriodicTask.objects.get(name=entry_name("golden_recall"))  # more runs in a week than a sample
    hourly_weekdays.interval = None
    hourly_weekdays.crontab = CrontabSchedule.objects.create(minute="0", day_of_week="1-5")
    hourly_weekdays.save()
    intervals = scheduled_intervals()
    assert intervals["prune"] == 86400
    assert intervals["alerts"] == (24 + 24 + 16) * 3600  # Friday 17:00 to Monday 09:00
    assert intervals["golden_recall"] == (24 + 24 + 1) * 3600  # Friday 23:00 to Monday 00:00
