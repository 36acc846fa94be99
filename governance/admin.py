"""Django's entry point for governance's admin: it gathers every feature's admin module, each of
which registers its own models (most read-only: their rows are written by services and jobs, and
an edit here would falsify the record)."""

from governance.alerts import admin as alerts_admin  # thresholds, alert episodes, digests
from governance.dedup import admin as dedup_admin  # proposals and their drops
from governance.events import admin as events_admin  # webhook subscriptions, deliveries; replay
from governance.forget import admin as forget_admin  # forget requests, receipts, tombstones
from governance.golden import admin as golden_admin  # golden questions and runs
from governance.jobs import admin as jobs_admin  # job schedule and runs; run now
from governance.retention import admin as retention_admin  # traces of pruned records
from governance.revocations import admin as revocations_admin  # revocations; revoke actions

__all__ = [
    "alerts_admin",
    "dedup_admin",
    "events_admin",
    "forget_admin",
    "golden_admin",
    "jobs_admin",
    "retention_admin",
    "revocations_admin",
]
