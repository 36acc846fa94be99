"""The database schedule through real parts: a running beat picks up a schedule changed in the
admin, and the worker records a run sent with trigger `admin` (the message "Run now" sends)."""

import json
import subprocess
import sys

import pytest
from django.contrib.auth import get_user_model
from django_celery_beat.models import IntervalSchedule, PeriodicTask

from governance.jobs.schedule import entry_name
from governance.models import JobRun
from tests.processes import wait_for

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def test_a_running_beat_follows_the_schedule_an_admin_changes(celery_stack, client):
    admin = get_user_model().objects.create_superuser("root", "root@example.com", "a-long-password")
    client.force_login(admin)
    celery_stack.start_worker()
    celery_stack.start_beat()  # the stack's environment pins every job off (JOB_*_INTERVAL=0)

    def expire_row_written_by_beat() -> bool:
        row = PeriodicTask.objects.filter(name=entry_name("expire")).first()
        return row is not None and not row.enabled

    with celery_stack.explained():
        wait_for(expire_row_written_by_beat, timeout=60, interval=0.25, what="beat to write its pinned schedule")
        row = PeriodicTask.objects.get(name=entry_name("expire"))
        every_second = IntervalSchedule.objects.create(every=1, period="seconds")
        response = client.post(
            f"/admin/django_celery_beat/periodictask/{row.pk}/change/",
            {
                "name": row.name,
                "regtask": row.task,
                "task": row.task,
                "enabled": "on",
                "description": row.description,
                "interval": every_second.pk,
                "args": "[]",
                "kwargs": "{}",
                "headers": "{}",
            },
        )
        assert response.status_code == 302
        wait_for(
            lambda: JobRun.objects.filter(job="expire", trigger="beat", status=JobRun.Status.SUCCEEDED).count() >= 2,
            timeout=60,
            interval=0.25,
            what="beat to run expire on the interval set in the admin",
        )
        assert not JobRun.objects.exclude(job="expire").exists()  # the other jobs stay off


def test_the_worker_records_a_run_sent_as_run_now_with_trigger_admin(celery_stack):
    celery_stack.start_worker()
    # The message the admin's "Run now" sends: the job's own task with trigger "admin".
    subprocess.run(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "config",
            "call",
            "governance.tasks.run_prune",
            "--kwargs",
            json.dumps({"trigger": "admin"}),
        ],
        cwd=celery_stack.directory,
        env=celery_stack.env,
        check=True,
        capture_output=True,
        timeout=60,
    )
    with celery_stack.explained():
        run = wait_for(
            lambda: JobRun.objects.filter(job="prune").exclude(status=JobRun.Status.RUNNING).first(),
            timeout=60,
            interval=0.25,
            what="the worker to run prune",
        )
        assert (run.trigger, run.status) == ("admin", JobRun.Status.SUCCEEDED)
