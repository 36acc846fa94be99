"""What `bin/run` does before it starts web, worker and beat, in one process (a Django start for each
step took seconds, on every start of the demo): migrate, collect the static files, seed the demo
(which prints its URLs and credentials), build the semantic index when the `semantic` extra is
installed and there never was one (built, gated by the golden sets and promoted like any index, so
the demo's recall is hybrid from its first request), and run every scheduled job once, so the
demo's pages (proposals, job runs, health) are filled at once instead of after each job's first
interval. A failed build or job is said here and recorded with its errors (Job runs in the admin);
the demo starts either way."""

from django.core.management import call_command
from django.core.management.base import BaseCommand

from governance.jobs import JOBS, run_job
from memory.search.build import build_and_promote, ensure_semantic_index
from memory.search.semantic import serving_report


class Command(BaseCommand):
    help = "Migrate, collect static files, seed the demo, build its semantic index if due and run each job once."

    def add_arguments(self, parser):
        parser.add_argument("--base-url", default="http://127.0.0.1:8000", help="where the demo will be served")

    def handle(self, *args, **options):
        call_command("migrate", interactive=False, verbosity=0)
        call_command("collectstatic", interactive=False, verbosity=0)
        call_command("seed_demo", base_url=options["base_url"], stdout=self.stdout)
        index = ensure_semantic_index(actor="bin/run")
        if index is not None:
            self.stdout.write("Building the semantic index (the semantic extra is installed)")
            try:
                index = build_and_promote(index.pk, actor="bin/run")
            except Exception as exc:
                self.stdout.write(f"  (the semantic index failed to build: {type(exc).__name__}; recall stays lexical)")
            else:
                self.stdout.write(f"  {index.name}: {index.status}, {index.inputs.get('records', 0)} records embedded")
        report = serving_report()
        self.stdout.write(f"Recall is {report['serving']}" + (f": {report['reason']}" if report["reason"] else ""))
        for name in JOBS:
            if run_job(name, trigger="run_job").status == "failed":
                self.stdout.write(f"  (job {name} failed; see Job runs in the admin)")
