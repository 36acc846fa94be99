"""How Django connects to PostgreSQL: the settings the app adds to a parsed DATABASE_URL."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any


def configure(database: Mapping[str, Any], *, var_dir: Path) -> dict[str, Any]:
    """Django's backend with psycopg's compiled timestamp loader (`config.postgresql`)."""
    return {**database, "ENGINE": "config.postgresql"}
