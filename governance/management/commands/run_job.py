"""`manage.py run_job NAME`: run one scheduled job once, synchronously, exactly as beat would (same
lock, same JobRun), and print the run's summary as one JSON object on the last line. Exits 1 when
the run failed; a run skipped because another holds the lock exits 0 with status "skipped"."""

import json

from django.core.management.base import BaseCommand, CommandError, CommandParser

from governance.jobs import JOBS, job_run_summary, run_job
from governance.jobs.models import JobRun


class Command(BaseCommand):
    help = "Run one scheduled job once, synchronously, as beat would; print its JobRun summary as JSON."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("job", choices=sorted(JOBS))
        parser.add_argument("--batch-size", type=int, default=None, help="Rows per chunk (default: JOB_BATCH_SIZE).")

    def handle(self, *args, job: str, batch_size: int | None, **options) -> None:
        if batch_size is not None and batch_size < 1:
            raise CommandError("--batch-size must be at least 1.")
        run = run_job(job, trigger="run_job", batch_size=batch_size)
        self.stdout.write(json.dumps(job_run_summary(run), sort_keys=False))
        if run.status == JobRun.Status.FAILED:
            raise CommandError(f"Job {job} failed: {'; '.join(run.errors)}", returncode=1)
