"""On PostgreSQL, the records' history table becomes a table partitioned by `history_date`, one
partition a month (`memory_historicalmemoryrecord_pYYYY_MM`) and a default partition
(`memory_historicalmemoryrecord_default`), so that retention drops a month of history as one
table (governance.retention.history) instead of deleting it row by row.

The existing rows move: the old table is renamed, the partitioned one created like it, with a
partition for every month from the oldest row to two months ahead, the rows copied (keeping their
`history_id`, the identity continuing after the highest), the old table dropped, then its indexes
and foreign keys created again on the partitioned table (PostgreSQL builds each on every
partition). A partitioned table's primary key must hold the partition key: the table's is
(history_id, history_date); the model keeps `history_id` as its primary key in Django's state,
which stays unique, as the identity hands out each value once.

SQLite keeps the plain table (retention deletes its old rows in chunks). The reverse copies the rows
back into a plain table."""

from django.db import migrations

TABLE = "memory_historicalmemoryrecord"
OLD = f"{TABLE}_unpartitioned"
PKEY = f"{TABLE}_pkey"
MONTHS_AHEAD = 2


def _definitions(cursor, table: str) -> tuple[list[str], list[str]]:
    """The table's index definitions (primary key aside) and its foreign keys, as SQL that
    recreates them on a table of the same name."""
    cursor.execute(
        "SELECT pg_get_indexdef(i.indexrelid) FROM pg_index i WHERE i.indrelid = %s::regclass AND NOT i.indisprimary "
        "ORDER BY i.indexrelid",
        [table],
    )
    indexes = [row[0] for row in cursor.fetchall()]
    cursor.execute(
        "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = %s::regclass AND contype = 'f' "
        "ORDER BY conname",
        [table],
    )
    foreign = [f'ALTER TABLE {TABLE} ADD CONSTRAINT "{name}" {definition}' for name, definition in cursor.fetchall()]
    return indexes, foreign


def _month_bounds(cursor, table: str) -> list[tuple[str, str]]:
    """[lower, upper) of each month from the oldest row's (or this one) to MONTHS_AHEAD ahead."""
    cursor.execute(
        "SELECT to_char(m, 'YYYY-MM-DD'), to_char(m + interval '1 month', 'YYYY-MM-DD') FROM generate_series("
        f"  date_trunc('month', least(coalesce((SELECT min(history_date) FROM {table}), now()), now()) AT TIME ZONE 'UTC'),"
        f"  date_trunc('month', now() AT TIME ZONE 'UTC') + interval '{MONTHS_AHEAD} months', interval '1 month') AS m"
    )
    return cursor.fetchall()


def partition(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("SELECT relkind FROM pg_class WHERE oid = %s::regclass", [TABLE])
        if cursor.fetchone()[0] == "p":
            return  # already partitioned
        indexes, foreign = _definitions(cursor, TABLE)
        cursor.execute(f"ALTER TABLE {TABLE} RENAME TO {OLD}")
        cursor.execute(
            f"CREATE TABLE {TABLE} (LIKE {OLD} INCLUDING DEFAULTS INCLUDING IDENTITY INCLUDING CONSTRAINTS "
            "INCLUDING STORAGE INCLUDING COMMENTS) PARTITION BY RANGE (history_date)"
        )
        for lower, upper in _month_bounds(cursor, OLD):
            name = f"{TABLE}_p{lower[:4]}_{lower[5:7]}"
            cursor.execute(
                f"CREATE TABLE {name} PARTITION OF {TABLE} FOR VALUES FROM ('{lower} 00:00:00+00') TO ('{upper} 00:00:00+00')"
            )
        cursor.execute(f"CREATE TABLE {TABLE}_default PARTITION OF {TABLE} DEFAULT")
        cursor.execute(f"INSERT INTO {TABLE} SELECT * FROM {OLD}")
        cursor.execute(
            f"SELECT setval(pg_get_serial_sequence('{TABLE}', 'history_id'), coalesce((SELECT max(history_id) FROM {OLD}), 0) + 1, false)"
        )
        cursor.execute(f"DROP TABLE {OLD}")
        cursor.execute(f"ALTER TABLE {TABLE} ADD CONSTRAINT {PKEY} PRIMARY KEY (history_id, history_date)")
        for statement in [*indexes, *foreign]:
            cursor.execute(statement)
        cursor.execute(f"ANALYZE {TABLE}")


def unpartition(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("SELECT relkind FROM pg_class WHERE oid = %s::regclass", [TABLE])
        if cursor.fetchone()[0] != "p":
            return
        indexes, foreign = _definitions(cursor, TABLE)
        cursor.execute(f"ALTER TABLE {TABLE} RENAME TO {OLD}")
        cursor.execute(
            f"CREATE TABLE {TABLE} (LIKE {OLD} INCLUDING DEFAULTS INCLUDING IDENTITY INCLUDING CONSTRAINTS "
            "INCLUDING STORAGE INCLUDING COMMENTS)"
        )
        cursor.execute(f"INSERT INTO {TABLE} SELECT * FROM {OLD}")
        cursor.execute(
            f"SELECT setval(pg_get_serial_sequence('{TABLE}', 'history_id'), coalesce((SELECT max(history_id) FROM {OLD}), 0) + 1, false)"
        )
        cursor.execute(f"DROP TABLE {OLD}")  # its partitions with it
        cursor.execute(f"ALTER TABLE {TABLE} ADD CONSTRAINT {PKEY} PRIMARY KEY (history_id)")
        for statement in [*indexes, *foreign]:
            cursor.execute(statement.replace(" ON ONLY ", " ON "))


class Migration(migrations.Migration):
    dependencies = [("memory", "0024_replica_fence")]

    operations = [migrations.RunPython(partition, unpartition)]
