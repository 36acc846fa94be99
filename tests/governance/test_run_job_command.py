"""`manage.py run_job NAME` per the contract: one run, synchronous, JSON summary on the last line."""

import io
import json
from datetime import datetime

import pytest
from django.core.management import CommandError, call_command

from governance.jobs import JOBS
from governance.models import JobRun
from memory.models import MemoryRecord, Status

pytestmark = pytest.mark.django_db


def last_line_json(output: str) -> dict:
    return json.loads(output.strip().splitlines()[-1])


def test_run_job_runs_once_as_beat_would_and_prints_the_summary(make_records):
    ids = make_records(3)
    out = io.StringIO()
    call_command("run_job", "expire", "--batch-size", "2", stdout=out)
    summary = last_line_json(out.getvalue())
    assert (summary["job"], summary["counts"], summary["errors"], summary["status"]) == (
        "expire",
        {"expired": 3},
        [],
        "succeeded",
    )
    assert datetime.fromisoformat(summary["finished_at"]) >= datetime.fromisoformat(summary["started_at"])
    assert MemoryRecord.objects.filter(pk__in=ids, status=Status.EXPIRED).count() == 3
    run = JobRun.objects.get()
    assert (run.pk, run.trigger) == (summary["id"], "run_job")


@pytest.mark.parametrize("job", ["propagate_forgets", "prune"])
def test_every_job_can_be_run_by_name(job):
    out = io.StringIO()
    call_command("run_job", job, stdout=out)
    assert last_line_json(out.getvalue())["job"] == job


def test_a_failed_run_still_prints_its_summary_and_exits_non_zero(monkeypatch):
    monkeypatch.setitem(JOBS, "ghost", "governance.no_such_module.ghost_job")
    out = io.StringIO()
    with pytest.raises(CommandError, match="ghost failed") as raised:
        call_command("run_job", "ghost", stdout=out)
    assert raised.value.returncode == 1
    summary = last_line_json(out.getvalue())
    assert summary["job"] == "ghost" and summary["errors"][0].startswith("JobUnavailable")


def test_an_unknown_job_is_a_usage_error():
    with pytest.raises(CommandError, match="invalid choice"):
        call_command("run_job", "nope")
