"""How Django connects to SQLite: the settings the app adds to the embedded database's URL."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

# WAL lets the web server, worker and beat share one file without "database is locked";
# secure_delete zeroes deleted and overwritten content in the file, so a forget reaches the disk.
INIT_COMMAND = "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA secure_delete=ON;"


def configure(database: Mapping[str, Any], *, var_dir: Path) -> dict[str, Any]:
    """Options for one file shared by several processes; the test database is a file beside it
    (not :memory:) so tests that use several connections (threads, a worker) share it."""
    var_dir.mkdir(parents=True, exist_ok=True)
    return {
        **database,
        "OPTIONS": {"timeout": 20, "transaction_mode": "IMMEDIATE", "init_command": INIT_COMMAND},
        "CONN_MAX_AGE": 0,
        "TEST": {"NAME": str(var_dir / "test-db.sqlite3")},
    }
