"""`manage.py restore INFILE`: replace the database with a backup made by `manage.py backup`, after
re-applying every forget request the backup does not contain (from the forget ledger, which a
restore cannot roll back). The live database changes in one step, only once the re-forget and its
propagation are done, so nothing forgotten is served from the backup; then the re-forgotten rows'
old versions are rewritten out of the table files at once (the `disk_rewrite` job), and a line
says whether every table was verified. Prints a summary as one JSON object on the last line. See
governance.portability.backups."""

import json
import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from governance.portability.backups import BackupError, restore


class Command(BaseCommand):
    help = "Restore a backup over the database, re-applying every forget newer than the backup before it returns."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("infile", type=Path)
        parser.add_argument("--yes", action="store_true", help="Do not ask for confirmation (scripts).")

    def handle(self, *args, infile: Path, yes: bool, **options) -> None:
        if not infile.is_file():
            raise CommandError(f"{infile} is not a file. Nothing was changed.")
        if not yes:
            if not sys.stdin.isatty():
                raise CommandError("Pass --yes to restore without a prompt. Nothing was changed.")
            answer = input("This replaces every row of the database with the backup's. Type 'restore' to go on: ")
            if answer.strip() != "restore":
                raise CommandError("Not confirmed. Nothing was changed.")
        try:
            result = restore(infile)
        except BackupError as exc:
            raise CommandError(f"{exc} The database was not changed.") from None
        for item in result.reforgotten:
            if item.forget_request:
                self.stdout.write(
                    f"re-forgot   request {item.original_request} ({item.requested_at:%Y-%m-%d %H:%M}) -> "
                    f"forget request {item.forget_request}: {item.affected} records"
                )
            else:
                self.stdout.write(f"skipped     request {item.original_request}: {item.skipped}")
        self.stdout.write(disk_line(result.disk))
        self.stdout.write(json.dumps(result.summary(), sort_keys=True, default=str))


def disk_line(outcome: dict) -> str:
    """What the disk rewrite that followed the restore did, in one line."""
    run = f"disk_rewrite run {outcome['run']}"
    if outcome["complete"] and outcome["requests"] == 0:
        return f"disk        nothing forgotten waits for a rewrite ({run})."
    if outcome["complete"] and outcome.get("database") == "sqlite":
        return (
            f"disk        re-forgotten content verified out of the database files now: secure_delete zeroed it, the "
            f"write-ahead log was checkpointed and truncated ({run}); {outcome['requests']} disk receipts completed."
        )
    if outcome["complete"]:
        return (
            f"disk        re-forgotten rows rewritten out of the table files now: {outcome['tables_verified']} tables "
            f"rewritten and verified ({run}); {outcome['requests']} disk receipts completed."
        )
    if outcome["status"] != "succeeded":
        done = f"did not run to the end ({'; '.join(outcome['errors'])[:200] or outcome['status']})"
    else:
        done = (
            f"left {outcome['tables_pending']} tables not verified ({outcome['tables_verified']} rewritten and "
            "verified); the disk receipts stay pending and name them"
        )
    retry = "the disk_rewrite job was sent to the workers" if outcome.get("sent_to_workers") else "the schedule retries it"
    return f"disk        the rewrite {done} ({run}); {retry}."
