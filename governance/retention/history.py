"""History retention, run by the `prune` job: the records' history table keeps
HISTORY_RETENTION_DAYS, counted in whole calendar months (UTC).

On PostgreSQL the table is partitioned by month (migration memory 0025): each run first makes the
partitions of this month and the next HISTORY_PARTITIONS_AHEAD, then detaches and drops every month
that ended before the horizon (the start of the month holding now - HISTORY_RETENTION_DAYS). On
SQLite the same rows are deleted in chunks. Either way, each record that still exists keeps its
newest row from before the horizon, its state there: as-of reads at or after the horizon stay
whole, and the history page starts from that row. A record pruned by retention loses all its
history with it (governance.retention.prune), whatever the month.
"""

from datetime import datetime

from django.conf import settings

from memory.engine import current
from memory.history import history_horizon


def trim_history(*, now: datetime, batch_size: int) -> dict[str, int]:
    history = current().history
    counts = {
        "history_partitions_made": len(
            history.ensure_history_partitions(now=now, months_ahead=settings.HISTORY_PARTITIONS_AHEAD)
        ),
        "history_partitions_dropped": 0,
    }
    horizon = history_horizon(now, settings.HISTORY_RETENTION_DAYS)
    if horizon is not None:
        counts.update(history.drop_history_before(horizon=horizon, batch_size=batch_size))
    return counts
