"""What both engines' ranking statements share: the priors and BM25's term part as SQL, the order
of ranked rows, and turning a fetched row into a `Ranked`. (`memory.search.ranking` defines the
scores; these are their SQL spellings, kept beside each other so the two engines cannot drift.)"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from django.db import connections

from memory.engine.routing import read_alias
from memory.search.models import SearchIndex
from memory.search.ranking import AUTHORITY_WEIGHT, CONFIDENCE_WEIGHT, Ranked

ORDER_SQL = "ORDER BY lexical + authority + confidence + recency DESC, lexical DESC, confirmed_at DESC, record_id"


def authority_sql(alias: str, real: str = "") -> str:
    cases = " ".join(f"WHEN '{name}' THEN {weight!r}{real}" for name, weight in AUTHORITY_WEIGHT.items())
    return f"(CASE {alias}.authority {cases} ELSE 0.0{real} END)"


def confidence_sql(alias: str) -> str:
    return f"({CONFIDENCE_WEIGHT!r} * {alias}.confidence)"


def tf_part_sql(tf: str, doclen: str, real: str = "") -> str:
    """BM25's term-frequency part as SQL (tf > 0); idf comes from Python (`ranking.idf`). `real`
    casts the parameters (PostgreSQL reads a bare literal as numeric, and numeric arithmetic on
    every row's length costs more than the rest of its score)."""
    k1, b, avgdl = (f"%({name})s{real}" for name in ("k1", "b", "avgdl"))
    return f"{tf} * ({k1} + 1) / ({tf} + {k1} * (1 - {b} + {b} * {doclen} / {avgdl}))"


def recipe_params(index: SearchIndex) -> dict[str, float]:
    """BM25's parameters from the index recipe, as every scoring statement binds them."""
    return {"k1": float(index.recipe["k1"]), "b": float(index.recipe["b"])}


def fetch(sql: str, params: dict[str, Any]) -> list[tuple]:
    # Recall's ranking: on a replica when the caller allowed one (memory.replicas).
    with connections[read_alias()].cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def ranked(row: tuple) -> Ranked:
    """A fetched row (record id, the four parts, confirmed_at) as a `Ranked`."""
    record_id, lexical, authority, confidence, recency, confirmed_at = row[:6]
    parts = {"lexical": float(lexical), "authority": float(authority), "confidence": float(confidence), "recency": float(recency)}
    if isinstance(confirmed_at, str):  # SQLite keeps UTC times as text
        confirmed_at = datetime.fromisoformat(confirmed_at).replace(tzinfo=UTC)
    if isinstance(confirmed_at, datetime):
        confirmed_at = confirmed_at.timestamp()
    if not isinstance(record_id, uuid.UUID):
        record_id = uuid.UUID(str(record_id))
    return Ranked(record_id=record_id, parts=parts, confirmed=float(confirmed_at))
