"""SQLite has no streaming replicas: nothing to measure (`memory.replicas` routes every read to
the one database)."""

from __future__ import annotations

from typing import Any


def wal_position(using: str) -> int:
    return 0


def replayed_position(using: str) -> int | None:
    return 0


def standby_status(using: str, *, primary_position: int, timeout: float) -> dict[str, Any]:
    return {"in_recovery": False, "lag_bytes": 0, "lag_seconds": 0.0}
