"""Search storage behind the engine boundary: the same meaning on both databases (an entry of a
record expired in time stays, and counts in the statistics, until the sweep), one trigger design
per database for both kinds of index, and versioned DDL (an index records the version it was
built with; upgrading a version-1 index gives what version 2 builds; migrations call only pinned
versions)."""

import ast
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import connection
from django.utils import timezone

from memory.actors import Actor
from memory.engine import current
from memory.models import MemoryRecord
from memory.recall import RecallQuery, recall
from memory.search import active_index, storage, vectors
from memory.search.build import ensure_active_index
from memory.search.models import storage_name
from memory.search.recipes import lexical_recipe
from memory.services import memory_expire_due

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]


def _lexical(credential, query: str) -> dict:
    result = recall(credential=credential, q=RecallQuery(query=query, purpose="support"))
    return {item.record.pk: item.score_parts["lexical"] for item in result.items}


def _due(*records) -> None:
    MemoryRecord.objects.filter(pk__in=[r.pk for r in records]).update(
        created_at=timezone.now() - timedelta(hours=1), expires_at=timezone.now() - timedelta(seconds=1)
    )


def test_an_entry_expired_in_time_counts_in_the_statistics_until_the_sweep_on_both_databases(write, credential):
    kept, due = write(content="A roadtrip kept."), write(content="A roadtrip that expires.")
    write(content="Lunch on Friday.")
    name = active_index().storage_name
    before = _lexical(credential, "roadtrip")
    assert set(before) >= {kept.pk, due.pk}
    _due(due)
    assert memory_expire_due(actor=Actor.job("expire")) == 1
    during = _lexical(credential, "roadtrip")
    assert due.pk not in during  # never returned once its time is up
    assert during[kept.pk] == before[kept.pk]  # same N and df: the expired entry still counts
    assert storage.count_rows(name) == 3
    assert storage.sweep_expired(name, now=timezone.now(), batch_size=1) == 1
    assert storage.count_rows(name) == 2 and storage.sweep_expired(name, now=timezone.now(), batch_size=1) == 0
    assert _lexical(credential, "roadtrip")[kept.pk] != before[kept.pk]  # now counted without it


def test_an_entry_goes_at_once_when_its_record_leaves_active_any_other_way(write):
    early, forgotten, pruned, _kept = (write(content=f"A roadtrip, note {n}.") for n in range(4))
    name = active_index().storage_name
    # Expired before its time (expires_at still ahead): not the expire job's case.
    MemoryRecord.objects.filter(pk=early.pk).update(status="expired")
    assert storage.count_rows(name) == 3
    # Expired in time, then forgotten or deleted (prune): the entry kept for the sweep goes then.
    _due(forgotten, pruned)
    assert memory_expire_due(actor=Actor.job("expire")) == 2
    assert storage.count_rows(name) == 3
    MemoryRecord.objects.filter(pk=forgotten.pk).update(status="forgotten", content="")
    assert storage.count_rows(name) == 2
    MemoryRecord.objects.filter(pk=pruned.pk).delete()
    assert storage.count_rows(name) == 1
    assert storage.sweep_expired(name, now=timezone.now(), batch_size=10) == 0


def test_an_index_records_the_storage_version_it_was_built_with():
    assert ensure_active_index().storage_version == current().search.VERSION == storage.storage_version()


# --------------------------------------------------------------------------------------------
# a semantic index's rows follow the records (one trigger design per database)


def test_a_semantic_index_follows_single_and_many_row_statements(write):
    name = storage_name("semantic", 9999)
    first, second, third = (write(content=f"Note {n} about the roadtrip.") for n in range(3))
    try:
        assert vectors.create_storage(name) == 3
        assert vectors.store_vectors(name, [(r.pk, r.content_hash, b"\x00" * 8) for r in (first, second, third)]) == 3
        ids = [first.pk, second.pk, third.pk]
        assert set(vectors.read_rows(name, ids)) == set(ids)
        # One statement: a confirmation keeps the vector, a new content makes the row pending, an
        # expiry removes the row.
        MemoryRecord.objects.filter(pk=first.pk).update(confirmed_at=timezone.now())
        MemoryRecord.objects.filter(pk=second.pk).update(content="Changed.", content_hash="sha256:changed")
        assert vectors.count_rows(name, embedded=True) == 2
        assert [pk for pk, _, _ in vectors.pending(name, limit=10)] == [second.pk]
        MemoryRecord.objects.filter(pk__in=ids).update(status="expired")
        assert vectors.count_rows(name) == 0
        MemoryRecord.objects.filter(pk__in=[first.pk, third.pk]).update(status="active")
        assert vectors.count_rows(name) == 2 and vectors.count_rows(name, embedded=True) == 0
        MemoryRecord.objects.filter(pk=third.pk).delete()
        assert [pk for pk, _, _ in vectors.pending(name, limit=10)] == [first.pk]
        written = write(content="A new note.")
        assert sorted(str(pk) for pk, _, _ in vectors.pending(name, limit=10)) == sorted([str(first.pk), str(written.pk)])
    finally:
        storage.drop_storage(name)


# --------------------------------------------------------------------------------------------
# versioned DDL


def _definitions(name: str) -> list[tuple]:
    """Every trigger, function and index of the storage `name`, as the database spells them."""
    with connection.cursor() as cursor:
        if current().NAME == "postgresql":
            cursor.execute(
                "SELECT 'trigger', tgname, pg_get_triggerdef(oid) FROM pg_trigger WHERE tgname LIKE %(like)s AND NOT tgisinternal "
                "UNION ALL SELECT 'function', proname, pg_get_functiondef(oid) FROM pg_proc WHERE proname LIKE %(like)s "
                "UNION ALL SELECT 'index', indexname, indexdef FROM pg_indexes WHERE indexname LIKE %(like)s "
                "UNION ALL SELECT 'table', relname, array_to_string(reloptions, ',') FROM pg_class "
                "WHERE relname LIKE %(like)s AND relkind = 'r' ORDER BY 1, 2",
                {"like": f"{name}%"},
            )
        else:
            cursor.execute("SELECT type, name, sql FROM sqlite_master WHERE name LIKE %s ORDER BY 1, 2", [f"{name}%"])
        return cursor.fetchall()


def _create(ddl, kind: str, name: str) -> None:
    if kind == "lexical":
        ddl.lexical_create(name, lexical_recipe())
        return
    with connection.cursor() as cursor:
        for sql in (*ddl.semantic_table(name), *ddl.semantic_triggers(name)):
            cursor.execute(sql)


@pytest.mark.parametrize("kind", ["lexical", "semantic"])
def test_upgrading_a_version_1_index_gives_what_version_2_builds(kind, write):
    write(content="A roadtrip along the coast.")
    engine, name = current(), storage_name(kind, 9999)
    try:
        _create(engine.ddl_v1, kind, name)
        if kind == "lexical":
            engine.ddl_v2.lexical_upgrade(name, lexical_recipe())
        else:
            engine.ddl_v2.semantic_upgrade(name)
        upgraded = _definitions(name)
        engine.ddl_v2.drop(name)
        assert _definitions(name) == []
        _create(engine.ddl_v2, kind, name)
        assert _definitions(name) == upgraded and upgraded
    finally:
        engine.ddl_v2.drop(name)


def test_the_migration_upgrades_every_stored_index_and_marks_it(write):
    from memory.search.models import SearchIndex

    index = ensure_active_index()
    engine = current()
    engine.ddl_v2.drop(index.storage_name)
    engine.ddl_v1.lexical_create(index.storage_name, index.recipe)
    SearchIndex.objects.filter(pk=index.pk).update(storage_version=1)
    assert engine.ddl_v2.upgrade_indexes(SearchIndex) == [index.pk]
    assert storage.triggers_present(index.storage_name)


def _imports(path: Path) -> set[str]:
    modules = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            modules |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            modules.add(node.module)
    return modules


def test_migrations_call_only_pinned_code():
    """A migration holds its SQL or calls a pinned module (each engine's `ddl_v<N>`, reached through
    the dispatch, or a frozen copy beside the migrations), never today's code."""
    migrations = sorted((ROOT / "memory" / "migrations").glob("0*.py"))
    migrations.append(ROOT / "governance" / "migrations" / "0004_key_forget_requests_filed_before.py")
    allowed = {"memory.engine", "memory.migrations._0007_risk_flags"}
    found = {
        f"{path.relative_to(ROOT)}: {module}"
        for path in migrations
        for module in _imports(path)
        if module.split(".")[0] in {"memory", "governance"} and module not in allowed
    }
    assert found == set()
