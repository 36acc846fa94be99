"""Promotion gates: checks a candidate index must pass before it replaces the active one. A gate
is `fn(candidate, active) -> (passed, report)`; `active` is None when nothing of that kind serves
yet. Governance registers the golden-recall gate in its AppConfig.ready() (memory never imports
governance); with no gate registered, promotion passes."""

import logging
from collections.abc import Callable

from memory.search.models import SearchIndex

logger = logging.getLogger("memory.search")

PromotionGate = Callable[[SearchIndex, SearchIndex | None], tuple[bool, dict]]

_GATES: dict[str, PromotionGate] = {}


def register_promotion_gate(fn: PromotionGate, *, name: str | None = None) -> PromotionGate:
    """Add a gate (or replace one of the same name; the name defaults to the function's)."""
    if not callable(fn):
        raise TypeError("A promotion gate is a callable fn(candidate, active) -> (passed, report).")
    _GATES[name or fn.__name__] = fn
    return fn


def unregister_promotion_gate(name: str) -> None:
    _GATES.pop(name, None)


def registered_gates() -> dict[str, PromotionGate]:
    return dict(_GATES)


def run_promotion_gates(candidate: SearchIndex, active: SearchIndex | None) -> tuple[bool, dict[str, dict]]:
    """Every gate's verdict and report, by gate name; passed only if all pass. A gate that raises
    fails (its report names the exception type, never its message, which could quote data)."""
    reports: dict[str, dict] = {}
    passed = True
    for name, gate in _GATES.items():
        try:
            ok, report = gate(candidate, active)
        except Exception as exc:  # a broken gate must hold the candidate back, not crash the build
            logger.exception("promotion gate failed", extra={"gate": name, "index": candidate.name})
            ok, report = False, {"error": type(exc).__name__}
        reports[name] = {**(report or {}), "passed": bool(ok)}
        passed = passed and bool(ok)
    return passed, reports
