"""The history table's indexes serve the as-of lookups (memory.asof): each record's newest row at or
before a moment is one probe of (id, history_date, history_id)."""

import re

import pytest
from django.db import connection

from memory.models import MemoryRecord

pytestmark = pytest.mark.django_db


def test_history_is_indexed_by_record_then_time_in_place_of_record_alone():
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, MemoryRecord.history.model._meta.db_table)
    indexed = [info["columns"] for info in constraints.values() if info["index"] and not info["primary_key"]]
    assert ["id", "history_date", "history_id"] in indexed
    assert ["id"] not in indexed  # the composite index serves lookups by id alone: no second index to maintain


def _index_definitions(table: str) -> dict[str, str]:
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT indexname, indexdef FROM pg_indexes WHERE tablename = %s", [table])
        else:
            cursor.execute(
                "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = %s AND sql IS NOT NULL", [table]
            )
        return dict(cursor.fetchall())


@pytest.mark.parametrize("column", ["supersedes_id", "history_user_id"])
def test_sparse_history_keys_are_indexed_only_where_set(column):
    # Agents' writes and jobs set neither: a full index would take an entry for every transition.
    definitions = _index_definitions(MemoryRecord.history.model._meta.db_table)
    on_column = {name: sql for name, sql in definitions.items() if f"({column})" in sql.replace('"', "")}
    assert on_column, definitions
    assert all(f"{column} IS NOT NULL" in sql.replace('"', "") for sql in on_column.values()), on_column


@pytest.mark.postgresql(reason="the planner's choice is PostgreSQL's")
@pytest.mark.parametrize(
    ("column", "index"), [("supersedes_id", "memory_history_supersedes_idx"), ("history_user_id", "memory_history_user_idx")]
)
def test_a_lookup_by_a_sparse_key_uses_its_partial_index(column, index):
    # A value looked up (= x, IN (...)) implies the key is set, so the partial index serves it.
    table = MemoryRecord.history.model._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute(
            f"EXPLAIN SELECT history_id FROM {table} WHERE {column} IN (%s, %s)",
            ["00000000-0000-0000-0000-000000000001", "00000000-0000-0000-0000-000000000002"]
            if column == "supersedes_id"
            else [1, 2],
        )
        plan = "\n".join(row[0] for row in cursor.fetchall())
        # The table is partitioned by month (migration 0025): each partition's copy of the index
        # serves its part.
        cursor.execute("SELECT inhrelid::regclass::text FROM pg_inherits WHERE inhparent = %s::regclass", [index])
        copies = {row[0] for row in cursor.fetchall()} | {index}
    used = set(re.findall(r"Index Scan (?:using |on )(\S+)", plan))
    assert used and used <= copies, plan
