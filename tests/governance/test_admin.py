"""The admin shows job runs, forget requests with their receipts, tombstones and proposals, and
lets nobody edit them; job runs and the job schedule read in words (counts, intervals, last runs)."""

import re
import tomllib
from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.utils import timezone
from django_celery_beat.models import IntervalSchedule, PeriodicTask
from rest_framework.test import APIClient

from governance.forget.services import forget_request_create
from governance.jobs import run_job
from governance.jobs.admin import counts_summary, every_text
from governance.jobs.schedule import entry_name, set_job_intervals
from governance.models import ForgetRequest, JobRun

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(client):
    admin = get_user_model().objects.create_superuser("root", "root@example.com", "a-long-password")
    client.force_login(admin)
    return client


def test_job_runs_and_forget_receipts_are_visible_and_read_only(admin_client, tenant, write, reviewer_actor):
    write(subject="customer/erin")
    request = forget_request_create(actor=reviewer_actor, tenant=tenant, subject="customer/erin")
    run = run_job("propagate_forgets", trigger="run_job")

    changelist = admin_client.get("/admin/governance/jobrun/")
    assert changelist.status_code == 200 and b"propagate_forgets" in changelist.content
    detail = admin_client.get(f"/admin/governance/forgetrequest/{request.pk}/change/")
    assert detail.status_code == 200
    for artifact in (b"record_content", b"history_rows", b"external_backups"):
        assert artifact in detail.content
    for url in ("/admin/governance/forgettombstone/", "/admin/governance/dedupproposal/", "/admin/governance/forgetrequest/"):
        assert admin_client.get(url).status_code == 200
    assert admin_client.get("/admin/governance/jobrun/add/").status_code == 403
    admin_client.post(f"/admin/governance/jobrun/{run.pk}/change/", {"job": "forged"})
    run.refresh_from_db()
    assert run.job == "propagate_forgets"
    admin_client.post(f"/admin/governance/forgetrequest/{request.pk}/delete/", {"post": "yes"})
    assert ForgetRequest.objects.filter(pk=request.pk).exists()


# --------------------------------------------------------------------------------------------
# job runs and the schedule, as an admin reads them


def made_run(
    job: str, *, counts: dict, errors: list | None = None, status=JobRun.Status.SUCCEEDED, ago: timedelta = timedelta(0)
) -> JobRun:
    started = timezone.now() - ago
    return JobRun.objects.create(
        job=job,
        status=status,
        trigger="beat",
        started_at=started,
        finished_at=started + timedelta(seconds=1.25),
        counts=counts,
        errors=errors or [],
    )


def test_job_runs_list_a_line_of_non_zero_counts_with_duration_and_errors_not_the_json(admin_client):
    idle = run_job("propagate_forgets", trigger="run_job")  # 17 counts, all zero
    assert len(idle.counts) > 10 and not any(idle.counts.values())
    made_run("propose_duplicates", counts={"records": 7, "deferred": 0, "duplicate_proposals": 1})
    made_run(
        "expire", counts={"expired": 0}, status=JobRun.Status.FAILED, errors=["ValueError: " + "x" * 200, "KeyError: second"]
    )

    page = admin_client.get("/admin/governance/jobrun/").content.decode()
    assert "records: 7, duplicate proposals: 1" in page and "deferred" not in page
    assert "nothing to do" in page
    assert "removed_record_content" not in page and "requests_completed" not in page  # no raw JSON
    assert "1.25 s" in page
    assert re.search(r'title="ValueError: x{200}">ValueError: x+…</span> \(\+1 more\)', page)


def test_a_job_run_page_shows_its_counts_as_pretty_json(admin_client):
    run = made_run("propose_duplicates", counts={"records": 7, "deferred": 0}, errors=["boom"])
    page = admin_client.get(f"/admin/governance/jobrun/{run.pk}/change/").content.decode()
    assert '<pre class="json">{\n  &quot;records&quot;: 7,\n  &quot;deferred&quot;: 0\n}</pre>' in page
    assert '<pre class="json">boom</pre>' in page


def test_the_activity_filter_separates_runs_that_did_something_from_idle_ones(admin_client):
    busy = made_run("expire", counts={"expired": 3})
    idle = made_run("expire", counts={"expired": 0, "other": 0})
    failed = made_run("prune", counts={}, status=JobRun.Status.FAILED, errors=["RuntimeError: down"])

    def listed(query: str) -> set[int]:
        return {run.pk for run in admin_client.get(f"/admin/governance/jobrun/?{query}").context["cl"].result_list}

    assert listed("activity=some") == {busy.pk}
    assert listed("activity=none") == {idle.pk, failed.pk}
    assert listed("activity=errors") == {failed.pk}
    assert listed("") == {busy.pk, idle.pk, failed.pk}  # nothing hidden by default


@pytest.mark.parametrize(
    "seconds, text",
    [
        (86400, "every day"),
        (172800, "every 2 days"),
        (3600, "every hour"),
        (21600, "every 6 hours"),
        (300, "every 5 minutes"),
        (60, "every minute"),
        (90, "every 90 seconds"),
        (1, "every second"),
        (0.5, "every 0.5 seconds"),
    ],
)
def test_intervals_read_in_their_largest_whole_unit(seconds, text):
    assert every_text(seconds) == text


def test_counts_summary_keeps_the_jobs_order_and_drops_zeros():
    assert counts_summary({"b_things": 2, "a": 0, "c": 1}) == "b things: 2, c: 1"
    assert counts_summary({"a": 0}) == "" and counts_summary({}) == ""


def test_periodic_tasks_show_intervals_in_words_and_the_last_run_from_the_job_runs(admin_client):
    set_job_intervals({"golden_recall": 86400, "alerts": 300, "expire": 60})
    made_run("expire", counts={"expired": 0}, ago=timedelta(hours=2))
    latest = run_job("expire", trigger="run_job")  # a run beat did not send: its last_run_at stays empty
    assert PeriodicTask.objects.get(name=entry_name("expire")).last_run_at is None

    response = admin_client.get("/admin/django_celery_beat/periodictask/")
    page = response.content.decode()
    for text in ("every day", "every 5 minutes", "every minute"):
        assert f'<td class="field-schedule">{text}</td>' in page
    for raw in ("every 86400 seconds", "every 300 seconds", "every 60 seconds"):  # not even in a checkbox's label
        assert raw not in page
    rows = {task.name: task for task in response.context["cl"].result_list}
    assert rows[entry_name("expire")].last_job_run_at == latest.started_at  # the newest run, not the older one
    assert rows[entry_name("golden_recall")].last_job_run_at is None
    assert '<a href="/admin/governance/jobrun/?job=expire"' in page and "succeeded, now" in page
    assert '<td class="field-last_run">never</td>' in page  # golden_recall and alerts never ran


def test_the_interval_list_reads_in_words(admin_client):
    IntervalSchedule.objects.create(every=86400, period="seconds")
    IntervalSchedule.objects.create(every=2, period="hours")
    page = admin_client.get("/admin/django_celery_beat/intervalschedule/").content.decode()
    assert "every day</a>" in page and "every 2 hours</a>" in page


def test_the_periodic_task_form_selects_the_registered_task_and_saves_either_kind(admin_client):
    set_job_intervals({"expire": 60})
    row = PeriodicTask.objects.get(name=entry_name("expire"))
    url = f"/admin/django_celery_beat/periodictask/{row.pk}/change/"
    form = admin_client.get(url).content.decode()
    assert '<option value="governance.tasks.run_expire" selected>' in form
    assert 'name="task" value="' not in form  # the "other task" box is empty, not a truncated copy
    assert "job-expire: every minute" in form  # breadcrumbs and subtitle in words

    base = {
        "name": row.name,
        "enabled": "on",
        "description": row.description,
        "interval": row.interval_id,
        "args": "[]",
        "kwargs": "{}",
        "headers": "{}",
    }
    assert admin_client.post(url, {**base, "regtask": "governance.tasks.run_prune", "task": ""}).status_code == 302
    assert PeriodicTask.objects.get(pk=row.pk).task == "governance.tasks.run_prune"
    assert admin_client.post(url, {**base, "regtask": "", "task": "custom.elsewhere"}).status_code == 302
    assert PeriodicTask.objects.get(pk=row.pk).task == "custom.elsewhere"
    refused = admin_client.post(url, {**base, "regtask": "", "task": ""})
    assert refused.status_code == 200 and PeriodicTask.objects.get(pk=row.pk).task == "custom.elsewhere"


def test_the_api_schema_carries_the_package_version():
    version = tomllib.loads((Path(settings.BASE_DIR) / "pyproject.toml").read_text())["project"]["version"]
    assert settings.SPECTACULAR_SETTINGS["VERSION"] == version
    schema = APIClient().get("/api/schema/", HTTP_ACCEPT="application/json").json()
    assert schema["info"]["version"] == version
