"""`manage.py backup OUTFILE`: a consistent backup of the database (PostgreSQL: pg_dump's custom
format in one snapshot; SQLite: the online backup API) with a manifest (time, schema version,
counts), as one tar file readable only by its owner (it holds content). The app keeps running.
Prints the manifest as one JSON object on the last line. See governance.portability.backups."""

import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from governance.portability.backups import BackupError, backup


class Command(BaseCommand):
    help = "Write a consistent backup of the database, with a manifest, to OUTFILE (a tar file)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("outfile", type=Path)

    def handle(self, *args, outfile: Path, **options) -> None:
        if outfile.is_dir():
            raise CommandError(f"{outfile} is a directory; give the backup file's name.")
        try:
            result = backup(outfile)
        except BackupError as exc:
            raise CommandError(f"{exc} No backup was written.") from None
        manifest = {key: value for key, value in result.manifest.items() if key != "schema"}
        manifest["schema"] = result.manifest["schema"]["latest"]
        self.stdout.write(
            f"Backup {result.manifest['id']} written to {result.path} ({result.manifest['counts']['records']} records)"
        )
        self.stdout.write(json.dumps(manifest, sort_keys=True))
