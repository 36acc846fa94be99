"""The nightly `golden_recall` job: every tenant's golden set against the active index, one
`GoldenRun` per tenant (trigger `nightly`), so the dashboard shows a trend and a regression in the
data or the ranking shows up without anyone asking. Also what `manage.py run_job golden_recall`
runs on demand."""

from datetime import datetime

from governance.golden.models import GoldenRun
from governance.golden.runner import run_golden_sets


def golden_recall(*, now: datetime, batch_size: int) -> dict[str, int]:
    # Golden sets are small (questions written by people), so there is nothing to chunk.
    runs = run_golden_sets(trigger=GoldenRun.Trigger.NIGHTLY, requested_by="job:golden_recall", now=now)
    return {
        "tenants": len(runs),
        "questions": sum(run.questions for run in runs),
        "hits": sum(run.hits for run in runs),
        "stale": sum(run.stale for run in runs),
    }
