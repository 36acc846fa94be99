"""SQLite has no streaming replicas: nothing to measure (`memory.replicas` routes every read to
the one database)."""

from __future__ import annotations


def wal_position(using: str) -> int:
    return 0


def replayed_position(using: str) -> int | None:
    return 0
