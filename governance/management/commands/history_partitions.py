"""`manage.py history_partitions`: the records' history by month, as the prune job keeps it: each
partition (PostgreSQL) with its month and estimated rows, the horizon before which history is
dropped, and the months made ahead. On SQLite the table is not partitioned and the command says so.
`--json` prints one JSON object instead."""

import json

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser
from django.utils import timezone

from memory.engine import current
from memory.history import history_horizon


class Command(BaseCommand):
    help = "List the history table's monthly partitions and the retention horizon."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--json", action="store_true", dest="as_json", help="Print one JSON object.")

    def handle(self, *args, as_json: bool = False, **options) -> None:
        horizon = history_horizon(timezone.now(), settings.HISTORY_RETENTION_DAYS)
        partitions = current().history.history_partitions()
        rows = [
            {
                "name": partition.name,
                "month": f"{partition.lower:%Y-%m}" if partition.lower else "default",
                "rows_estimate": partition.rows,
            }
            for partition in partitions
        ]
        summary = {
            "retention_days": settings.HISTORY_RETENTION_DAYS,
            "horizon": horizon.isoformat() if horizon else None,
            "months_ahead": settings.HISTORY_PARTITIONS_AHEAD,
            "partitions": rows,
        }
        if as_json:
            self.stdout.write(json.dumps(summary))
            return
        kept = f"history from {horizon:%Y-%m-%d} on" if horizon else "history kept for as long as its record"
        self.stdout.write(f"Retention: {settings.HISTORY_RETENTION_DAYS} days, counted in whole months: {kept}.")
        if not partitions:
            self.stdout.write("The history table is not partitioned (SQLite): the prune job deletes old rows in chunks.")
            return
        for row in rows:
            estimate = "not analysed yet" if row["rows_estimate"] < 0 else f"~{row['rows_estimate']} rows"
            self.stdout.write(f"{row['month']:>8}  {row['name']}  {estimate}")
