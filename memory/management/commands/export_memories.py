"""`manage.py export_memories --tenant T OUTDIR [--subject S] [--status S ...]`: a tenant's memory
as plain files, one Markdown note per record in folders by subject, plus `index.md`
(memory.portable.export). Forgotten records are content-free tombstones. Prints a summary as one
JSON object on the last line."""

import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from memory.actors import Actor
from memory.models import Status, Tenant
from memory.portable.export import export_to_directory


class Command(BaseCommand):
    help = "Export a tenant's memories as Markdown notes with YAML front matter, one file per record."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("outdir", type=Path, help="Directory to write into (created if missing).")
        parser.add_argument("--tenant", required=True, help="Tenant slug.")
        parser.add_argument("--subject", default=None, help="Only this subject.")
        parser.add_argument(
            "--status",
            action="append",
            choices=Status.values,
            default=None,
            help="Only records in this status (repeat for several; default: all, forgotten ones as tombstones).",
        )

    def handle(self, *args, outdir: Path, tenant: str, subject: str | None, status: list[str] | None, **options) -> None:
        found = Tenant.objects.filter(slug=tenant).first()
        if found is None:
            raise CommandError(f"No tenant {tenant!r}. Nothing was written.")
        if outdir.exists() and not outdir.is_dir():
            raise CommandError(f"{outdir} exists and is not a directory. Nothing was written.")
        summary = export_to_directory(Actor.job("export_memories"), found, outdir, subject=subject, statuses=status)
        self.stdout.write(f"Exported {summary.records} notes and {summary.tombstones} tombstones to {outdir}")
        self.stdout.write(json.dumps({"outdir": str(outdir), **summary.as_dict()}))
