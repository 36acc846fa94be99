"""Celery tasks, one per scheduled job: thin wrappers that run the job once through
`governance.jobs.run_job` (lock + JobRun) and return its summary. They take only the trigger the
JobRun records (beat sends none: "beat"; the admin's "Run now" sends "admin") and are safe to
deliver twice: the lock skips a concurrent duplicate, and every job selects its work by state, so
a repeat finds nothing left to do. Beat sends them (see governance/jobs/schedule.py)."""

from celery import shared_task

from governance.jobs import job_run_summary, run_job


@shared_task(name="governance.tasks.run_expire")
def run_expire(trigger: str = "beat") -> dict:
    return job_run_summary(run_job("expire", trigger=trigger))


@shared_task(name="governance.tasks.run_propagate_forgets")
def run_propagate_forgets(trigger: str = "beat") -> dict:
    # Also sent right after a forget request commits (trigger "forget_request"), so propagation
    # does not wait for beat's next tick; /health/ counts only beat's runs.
    return job_run_summary(run_job("propagate_forgets", trigger=trigger))


@shared_task(name="governance.tasks.run_propose_duplicates")
def run_propose_duplicates(trigger: str = "beat") -> dict:
    return job_run_summary(run_job("propose_duplicates", trigger=trigger))


@shared_task(name="governance.tasks.run_prune")
def run_prune(trigger: str = "beat") -> dict:
    return job_run_summary(run_job("prune", trigger=trigger))


@shared_task(name="governance.tasks.run_golden_recall")
def run_golden_recall(trigger: str = "beat") -> dict:
    # Nightly: every tenant's golden set against the active index (a GoldenRun per tenant).
    return job_run_summary(run_job("golden_recall", trigger=trigger))


@shared_task(name="governance.tasks.run_disk_rewrite")
def run_disk_rewrite(trigger: str = "beat") -> dict:
    # Rewrites the tables forgets touched, once per batch of completed forgets (governance.portability.disk).
    return job_run_summary(run_job("disk_rewrite", trigger=trigger))


@shared_task(name="governance.tasks.run_alerts")
def run_alerts(trigger: str = "beat") -> dict:
    # Every few minutes: queue alerts (one email per episode) and, once a day, each reviewer's digest.
    return job_run_summary(run_job("alerts", trigger=trigger))


@shared_task(name="governance.tasks.run_sweep_indexes")
def run_sweep_indexes(trigger: str = "beat") -> dict:
    # Search-index entries the expire job left (records expired in time), deleted in batches.
    return job_run_summary(run_job("sweep_indexes", trigger=trigger))
