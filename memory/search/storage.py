"""Where a search index lives: its own tables, filled from the active memory records and kept in
step with them by database triggers, so every path that changes a record (the lifecycle services,
bulk jobs, forget, prune, the admin) updates every index in the same transaction, and an index can
be dropped and rebuilt without touching the records.

A lexical index holds `active` records, and records expired in time until the sweep deletes them
(`sweep_expired`), on both databases, with a copy of the fields recall's hard filters and ranking
read and a word count, so collection statistics come from the index alone and count the same
records on PostgreSQL and SQLite. A semantic index (`memory.search.vectors`) holds the active
records' embeddings under the same naming.

This module is the backend-neutral face of that storage: each database's tables, triggers and
statements live in its engine (`memory.engine.<database>.search`, at the storage version it
builds, and the pinned `ddl_v<N>` modules the migrations call); the version an index was built
with or last upgraded to is stored on its row (`SearchIndex.storage_version`). Table and trigger
names derive from the index's primary key (`storage_name`), never from user input.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable, Sequence
from datetime import datetime
from importlib import import_module
from typing import Any

from django.db import connection

from memory.engine import ENGINES, current
from memory.search import ann
from memory.search.models import storage_name as storage_name  # the names of an index's tables

RECORDS = "memory_memoryrecord"
STORAGE_NAME = re.compile(r"^(memory_search_(?:lex|sem)_(\d+))(?:_.*)?$")

# Names `memory.search.ranking` read here before they moved to each engine's search module:
# name -> (engine, name there). Resolved on use, so this module imports no engine of its own.
_MOVED = {
    "PG_COLUMNS": ("postgresql", "COLUMNS"),
    "AUTHORITY_BITS": ("postgresql", "AUTHORITY_BITS"),
    "BODY_COLUMN": ("sqlite", "BODY_COLUMN"),
    "scope_token": ("sqlite", "scope_token"),
    "subject_token": ("sqlite", "subject_token"),
    "kind_token": ("sqlite", "kind_token"),
}


def __getattr__(name: str) -> Any:
    if name not in _MOVED:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    engine, moved = _MOVED[name]
    return getattr(import_module(ENGINES[engine]).search, moved)


def doclen_sql(expr: str, *, vendor: str) -> str:
    """Words in `expr`, as the `vendor` database's index counts them (`memory.engine.<database>.
    search.doclen_sql`; `vendor` is an engine name, as `memory.engine.ENGINES` lists them)."""
    return import_module(ENGINES[vendor]).search.doclen_sql(expr)


def storage_version() -> int:
    """The storage version this code builds (each engine's `search.VERSION`)."""
    return current().search.VERSION


def build_storage(name: str, recipe: dict) -> int:
    """Create a lexical index's tables and triggers and fill them from the active records; returns
    how many records it holds. Any previous storage under the name is dropped first (a cache)."""
    return current().search.build_storage(name, recipe)


def drop_storage(name: str) -> None:
    """Drop an index's storage, lexical or semantic, with its triggers on the records (and a
    semantic index's approximate nearest-neighbour files)."""
    current().search.drop_storage(name)
    ann.drop(name)


def triggers_present(name: str) -> bool:
    """Whether all of the index's triggers on the records exist (lexical or semantic: the same
    names). SQLite drops them when a migration rebuilds the records table."""
    return current().search.triggers_present(name)


def storage_exists(name: str) -> bool:
    return name in connection.introspection.table_names()


def count_rows(name: str) -> int:
    """Entries a lexical index holds."""
    return current().search.count_rows(name)


def purge_records(name: str, record_ids: Sequence[uuid.UUID]) -> int:
    """Delete the given records' entries from a lexical index, their words gone from disk with
    them; returns how many were still there."""
    return current().search.purge_records(name, record_ids)


def sweep_expired(name: str, *, now: datetime, batch_size: int) -> int:
    """Delete a lexical index's entries whose time was up at `now` (records the expire job expired
    in time keep theirs until then), `batch_size` per transaction; returns how many went."""
    return current().search.sweep_expired(name, now=now, batch_size=batch_size)


def storage_names_present() -> set[str]:
    """Base names of every index storage in the database (tables, functions or triggers), whether
    or not an index row still describes it."""
    return {match.group(1) for match in map(STORAGE_NAME.match, current().search.storage_objects()) if match}


def storage_tables() -> list[str]:
    """Every table of every index storage in the database, lexical or semantic, served or not
    (PostgreSQL `<name>`, `<name>_terms`, `<name>_stats`; SQLite `<name>_doc` and the FTS5 table
    with its shadow tables). A forget's deletes leave old row versions in their files until the
    tables are rewritten."""
    return sorted(table for table in connection.introspection.table_names() if STORAGE_NAME.match(table))


def drop_storage_except(keep: Iterable[str]) -> list[str]:
    """Drop every index storage not named in `keep` (left behind by a retired index, a failed
    build, or a test database flush), and every directory of approximate-search files whose index
    is not named there; returns the names dropped."""
    keep = set(keep)
    dropped = sorted(storage_names_present() - keep)
    for name in dropped:
        drop_storage(name)
    for name in sorted(ann.stored() - keep - set(dropped)):  # files whose tables are gone (a restore, a flush)
        ann.drop(name)
        dropped.append(name)
    return dropped
