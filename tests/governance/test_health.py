"""GET /health/: database, broker and the scheduler's last successful run of each job."""

from datetime import timedelta

import pytest
from django.utils import timezone

from governance.jobs.schedule import set_job_intervals
from governance.models import JobRun

pytestmark = pytest.mark.django_db

INTERVALS = {"expire": 60.0, "propagate_forgets": 30.0, "propose_duplicates": 3600.0, "prune": 0}


@pytest.fixture(autouse=True)
def schedule(settings):
    set_job_intervals(INTERVALS)  # the schedule in the database, as an admin would set it
    settings.JOB_STALE_AFTER_FACTOR = 3
    settings.JOB_STALE_GRACE_SECONDS = 120
    settings.HEALTH_STARTUP_GRACE_SECONDS = 0  # long past start, unless a test says otherwise


def succeeded(job: str, ago: timedelta, trigger: str = "beat") -> JobRun:
    at = timezone.now() - ago
    return JobRun.objects.create(job=job, status=JobRun.Status.SUCCEEDED, started_at=at, finished_at=at, trigger=trigger)


def test_healthy_when_database_broker_and_every_scheduled_job_are_fine(client):
    for job in ("expire", "propagate_forgets", "propose_duplicates"):
        succeeded(job, timedelta(seconds=20))
    response = client.get("/health/")
    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["status"] == "ok" and "failing" not in body
    assert body["checks"]["database"]["ok"] and body["checks"]["broker"]["ok"]
    jobs = body["checks"]["scheduler"]["jobs"]
    assert set(jobs) == {"expire", "propagate_forgets", "propose_duplicates"}  # prune is not scheduled here
    assert jobs["expire"]["stale_after_seconds"] == 3 * 60 + 120 and jobs["expire"]["ok"]
    assert response["Cache-Control"].startswith("max-age=0")


def test_a_job_whose_last_success_is_too_old_makes_the_scheduler_check_fail(client):
    succeeded("expire", timedelta(seconds=3 * 60 + 121))
    JobRun.objects.create(job="expire", status=JobRun.Status.FAILED, started_at=timezone.now(), finished_at=timezone.now())
    succeeded("propagate_forgets", timedelta(seconds=5))
    succeeded("propose_duplicates", timedelta(hours=1))
    response = client.get("/health/")
    assert response.status_code == 503
    body = response.json()
    assert (body["status"], body["failing"]) == ("fail", ["scheduler"])
    jobs = body["checks"]["scheduler"]["jobs"]
    assert not jobs["expire"]["ok"] and jobs["propagate_forgets"]["ok"] and jobs["propose_duplicates"]["ok"]


def test_manual_runs_do_not_count_as_the_scheduler_running(client):
    for job in ("expire", "propagate_forgets", "propose_duplicates"):
        succeeded(job, timedelta(seconds=5), trigger="run_job")
    response = client.get("/health/")
    assert response.status_code == 503
    assert response.json()["checks"]["scheduler"]["error"] == "no scheduled run has been recorded yet"


def test_a_job_that_never_succeeded_is_stale_once_beat_has_run_longer_than_its_threshold(client):
    succeeded("expire", timedelta(seconds=5))
    succeeded("propagate_forgets", timedelta(seconds=5))
    JobRun.objects.create(job="propose_duplicates", status=JobRun.Status.FAILED, started_at=timezone.now(), trigger="beat")
    assert client.get("/health/").status_code == 200  # beat started 5 s ago: a new job is not stale yet
    JobRun.objects.filter(job="expire").update(started_at=timezone.now() - timedelta(hours=4))
    response = client.get("/health/")  # beat's first run was 4 h ago: more than 3 x 1 h + 2 min
    assert response.status_code == 503
    never = response.json()["checks"]["scheduler"]["jobs"]["propose_duplicates"]
    assert (never["ok"], never["last_success_at"]) == (False, None) and never["age_seconds"] > 4 * 3600 - 60


def test_an_unreachable_broker_is_named(client, settings):
    for job in ("expire", "propagate_forgets", "propose_duplicates"):
        succeeded(job, timedelta(seconds=5))
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:1/0"
    settings.CELERY_BROKER_TRANSPORT_OPTIONS = {}
    response = client.get("/health/")
    assert response.status_code == 503
    body = response.json()
    assert body["failing"] == ["broker"]
    assert body["checks"]["broker"] == {"ok": False, "error": "OperationalError"}  # no host or message leaks


def test_health_needs_no_login_and_only_answers_get(client):
    assert client.post("/health/").status_code == 405


def test_just_after_start_a_scheduler_that_has_not_run_yet_is_starting_not_failing(client, settings, caplog):
    settings.HEALTH_STARTUP_GRACE_SECONDS = 3600
    response = client.get("/health/")
    assert response.status_code == 200
    assert response.json()["status"] == "starting" and "normal" in response.json()["note"]
    assert not [r for r in caplog.records if r.levelname in ("WARNING", "ERROR")]


def test_a_job_gone_stale_is_failing_even_just_after_start(client, settings):
    settings.HEALTH_STARTUP_GRACE_SECONDS = 3600
    succeeded("expire", timedelta(hours=2))
    response = client.get("/health/")
    assert response.status_code == 503 and response.json()["failing"] == ["scheduler"]


def test_a_broken_database_or_broker_is_failing_even_just_after_start(client, settings):
    settings.HEALTH_STARTUP_GRACE_SECONDS = 3600
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:1/0"
    settings.CELERY_BROKER_TRANSPORT_OPTIONS = {}
    response = client.get("/health/")
    assert response.status_code == 503 and "broker" in response.json()["failing"]
