"""The PostgreSQL engine: every statement the app runs that only PostgreSQL understands.

Concern modules (search, vectors, ranking, lifecycle, ops) load on first use, so importing the
engine costs nothing until a caller needs one of them.
"""

from __future__ import annotations

from importlib import import_module
from types import ModuleType

NAME = "postgresql"


def __getattr__(concern: str) -> ModuleType:
    if concern.startswith("_"):
        raise AttributeError(concern)
    try:
        return import_module(f"{__name__}.{concern}")
    except ModuleNotFoundError as missing:
        if missing.name != f"{__name__}.{concern}":
            raise
        raise AttributeError(f"the engine has no {concern!r} module") from None
