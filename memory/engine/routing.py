"""Which database a read goes to: the primary (`default`) unless the code around it opened a
replica read with `reading_from` (`memory.replicas` decides when that is safe), and never inside a
transaction or after a write in the same block. `ReplicaRouter` applies it to the ORM
(DATABASE_ROUTERS, set by the settings only when replicas are configured); the engines' own reads
ask `read_alias()` for their connection."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections


@dataclass
class _Route:
    alias: str
    wrote: bool = False


_ROUTE: ContextVar[_Route | None] = ContextVar("memory_read_route", default=None)
# Set per request by the read-your-writes middleware: did anything in it write?
_WROTE: ContextVar[list[bool] | None] = ContextVar("memory_request_wrote", default=None)


def read_alias() -> str:
    """The alias a read made now goes to."""
    route = _ROUTE.get()
    if route is None or route.wrote or connections[DEFAULT_DB_ALIAS].in_atomic_block:
        return DEFAULT_DB_ALIAS
    return route.alias


@contextmanager
def reading_from(alias: str) -> Iterator[None]:
    """Reads inside the block go to `alias` (until the block writes, or opens a transaction)."""
    token = _ROUTE.set(_Route(alias) if alias != DEFAULT_DB_ALIAS else None)
    try:
        yield
    finally:
        _ROUTE.reset(token)


@contextmanager
def tracking_writes() -> Iterator[list[bool]]:
    """Yields a one-item list that becomes [True] once anything in the block writes."""
    wrote = [False]
    token = _WROTE.set(wrote)
    try:
        yield wrote
    finally:
        _WROTE.reset(token)


def note_write() -> None:
    route = _ROUTE.get()
    if route is not None:
        route.wrote = True  # read your own write: the rest of the block reads the primary
    wrote = _WROTE.get()
    if wrote is not None:
        wrote[0] = True


class ReplicaRouter:
    """Django's database router for DATABASE_REPLICA_URLS: writes and migrations on the primary;
    reads where `read_alias()` says."""

    def db_for_read(self, model: Any, **hints: Any) -> str:
        return read_alias()

    def db_for_write(self, model: Any, **hints: Any) -> str:
        note_write()
        return DEFAULT_DB_ALIAS

    def allow_relation(self, obj1: Any, obj2: Any, **hints: Any) -> bool:
        return True  # every alias holds the same data

    def allow_migrate(self, db: str, app_label: str, **hints: Any) -> bool:
        return db == DEFAULT_DB_ALIAS
