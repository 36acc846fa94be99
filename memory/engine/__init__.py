"""The database engine boundary: each backend's SQL lives in one package here.

`memory.engine.postgres` and `memory.engine.sqlite` hold the same concern modules with the same
public names (`search`, `vectors`, `ranking`, `lifecycle`, `ops`; a test holds them to one
interface). Everything outside this package asks `current()` for the engine and calls its concern
modules; nothing else reads `connection.vendor`, and no SQL is written outside these packages and
the migrations.
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib import import_module
from pathlib import Path
from types import ModuleType
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.db import DEFAULT_DB_ALIAS, connections

ENGINES = {"postgresql": "memory.engine.postgres", "sqlite": "memory.engine.sqlite"}
# Django's backend modules, for the settings (read before any connection exists).
BACKENDS = {"django.db.backends.postgresql": ENGINES["postgresql"], "django.db.backends.sqlite3": ENGINES["sqlite"]}


def current(using: str = DEFAULT_DB_ALIAS) -> ModuleType:
    """The engine package for the database `using` names (the only place that reads the vendor)."""
    vendor = connections[using].vendor
    try:
        return import_module(ENGINES[vendor])
    except KeyError:
        raise ImproperlyConfigured(f"no engine for the {vendor!r} database; supported: {', '.join(ENGINES)}") from None


def configure(database: Mapping[str, Any], *, var_dir: Path) -> dict[str, Any]:
    """A parsed DATABASE_URL with the options its engine needs (called by the settings)."""
    try:
        package = BACKENDS[database["ENGINE"]]
    except KeyError:
        raise ImproperlyConfigured(
            f"no engine for the {database['ENGINE']!r} backend; supported: {', '.join(BACKENDS)}"
        ) from None
    return import_module(f"{package}.connection").configure(database, var_dir=var_dir)
