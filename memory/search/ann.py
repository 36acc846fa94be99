"""Approximate nearest neighbours for a semantic index: files that let recall find a large scope's
most similar records without reading every vector of the scope.

What they are. One HNSW graph (faiss-cpu's `IndexHNSWFlat`, inner product on the unit vectors)
per tenant whose embedded rows reach the recipe's `min_partition`, under
`SEMANTIC_ANN_DIR/<storage name>/`: `tenant-<id>.g<generation>.faiss` (the graph and the vectors),
`tenant-<id>.g<generation>.ids` (the record id of each position, 16 bytes each) and
`tenant-<id>.json` (which generation is current, its snapshot moment and counts). A tenant is a
hard filter of every recall, so a partition never mixes tenants; smaller tenants are scanned
exactly, as is any scope within one subject.

A cache, never a source. The vectors table (`memory.search.vectors`) stays the truth:
- every candidate the graph proposes is checked against the table with the recall's hard filters
  (`read_checked`, by primary key, with the rows below in one statement), so an out-of-scope,
  expired, invalid, superseded or forgotten record is never returned; its cosine is the one the
  search computed from the partition's copy of its vector, which is the table's while the row
  holds a vector embedded before the snapshot (a row whose content changed lost its vector, and
  one embedded again is among the rows below, scored from the table);
- the rows embedded after the partition's snapshot (`embedded_at`, version 3 of the storage) are
  read by their index and scored exactly from the table's vectors, so a new vector is found at once;
- missing or unreadable files mean an exact scan, never an error.
`refresh` rebuilds a partition when the rows embedded since it was read, the rows it holds that
left the table and the positions purged from it pass `REFRESH_SHARE` of it (the
`refresh_semantic_ann` job), and removes partitions of tenants that fell below the threshold.

Forget (`memory.search.ann_forget.purge`) overwrites the forgotten records' vectors and ids with zeros in a new generation
of each partition holding them, publishes it, deletes the old files and then reads every file of
the index back, byte for byte, for the ids and the vectors it removed (`Purged.verified`; a kept
record with the same content holds the same vector, and its own copies do not count). A partition
it cannot read, and any file no partition refers to, it deletes. A build racing with a forget cannot bring a vector back: before it publishes, a build zeroes every
position whose record no longer has a vector in the table, under the same lock as a purge.

Processes share the files: each maps the current generation read-only (`IO_FLAG_MMAP_IFC`), so
the page cache holds one copy for all of them, and notices a new generation by the `.json` file's
change (one `stat` per recall).
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import importlib.metadata
import importlib.util
import json
import logging
import os
import re
import shutil
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from django.conf import settings

from memory.errors import ValidationFailed
from memory.search import vectors

logger = logging.getLogger("memory.search")

LIBRARY = "faiss-cpu"
DEFAULTS: dict[str, Any] = {
    "m": 32,  # graph degree
    "ef_construction": 80,
    "ef_search": 128,  # at least; a search asks for as many as it wants back
    "oversample": 4,  # candidates asked of the graph per record wanted
    "min_partition": 20_000,  # a tenant with fewer embedded rows is scanned exactly
    # A partition of at most this many positions is searched by scoring every vector in its file
    # (mapped, so without reading the table; exact), a larger one through its graph.
    "scan_up_to": 250_000,
}
LIMITS = {
    "m": (4, 128),
    "ef_construction": (8, 1024),
    "ef_search": (8, 4096),
    "oversample": (1, 64),
    "min_partition": (1, 10**9),
    "scan_up_to": (0, 10**9),
}
# A vector stored up to this long before a snapshot's read began may be missing from it (its
# transaction, one short UPDATE, not yet committed): the fresh rows are read from this far back.
FRESH_MARGIN = timedelta(seconds=5)
REFRESH_SHARE = 0.1
READ_CHUNK = 10_000
ID_BYTES = 16
DEAD = bytes(ID_BYTES)
STORAGE_DIR = re.compile(r"^memory_search_sem_\d+$")  # a semantic index's directory (its storage name)


# --------------------------------------------------------------------------------------------
# availability and the recipe


def faiss_module() -> Any:
    """The library, imported on first use (typed as Any: its generated hints miss most classes)."""
    return importlib.import_module("faiss")


@functools.lru_cache(maxsize=1)
def library_missing() -> str | None:
    if importlib.util.find_spec("faiss") is None:
        return f"{LIBRARY} is not installed (it comes with the semantic extra): the semantic index is scanned exactly."
    return None


def library_version() -> str | None:
    try:
        return importlib.metadata.version(LIBRARY)
    except importlib.metadata.PackageNotFoundError:
        return None


def ann_recipe(given: Any) -> dict[str, Any] | None:
    """The complete `ann` part of a semantic recipe for `given` (None or a dict; missing keys take
    the defaults), or None when the library is missing and nothing was asked for. Raises
    ValidationFailed naming every bad key."""
    if given is False:
        return None
    if given is None:
        if library_missing():
            return None
        given = {}
    if not isinstance(given, dict):
        raise ValidationFailed("The index recipe is invalid.", errors={"ann": ["An object, or false for exact scans only."]})
    errors: dict[str, list[str]] = {}
    for key in sorted(set(given) - set(DEFAULTS) - {"library", "version"}):
        errors[f"ann.{key}"] = [f"Unknown key; `ann` has {', '.join(DEFAULTS)}."]
    for key, (low, high) in LIMITS.items():
        value = given.get(key, DEFAULTS[key])
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            errors[f"ann.{key}"] = [f"An integer from {low} to {high}."]
    missing = library_missing()
    if missing:
        errors["ann"] = [missing]
    for key, fixed in (("library", LIBRARY), ("version", library_version())):
        if key in given and given[key] != fixed:
            errors[f"ann.{key}"] = [f"Only {fixed!r} is available here."]
    if errors:
        raise ValidationFailed("The index recipe is invalid.", errors=errors)
    return {"library": LIBRARY, "version": library_version(), **{key: given.get(key, DEFAULTS[key]) for key in DEFAULTS}}


# --------------------------------------------------------------------------------------------
# files


def index_dir(storage_name: str) -> Path:
    return Path(settings.SEMANTIC_ANN_DIR) / storage_name


def _meta_path(directory: Path, tenant_id: int) -> Path:
    return directory / f"tenant-{int(tenant_id)}.json"


def read_meta(path: Path) -> dict | None:
    try:
        meta = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return meta if isinstance(meta, dict) else None


def _write_atomic(path: Path, data: bytes) -> None:
    temporary = path.with_name(path.name + ".tmp")
    with open(temporary, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)


@contextlib.contextmanager
def locked(directory: Path) -> Iterator[None]:
    """One writer per index directory at a time (builds, refreshes and purges, in any process)."""
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / ".lock", "a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def publish(directory: Path, tenant_id: int, index: Any, ids: bytearray, meta: dict) -> None:
    """Write a new generation of a partition and make it current; the old generation's files go."""
    faiss = faiss_module()

    meta_path = _meta_path(directory, tenant_id)
    old = read_meta(meta_path)
    generation = (old or {}).get("generation", 0) + 1
    stem = f"tenant-{int(tenant_id)}.g{generation}"
    # Written beside, then renamed: a file of that name left by an interrupted publish may be
    # mapped by a process, and rewriting a mapped file in place would crash it.
    temporary = directory / f"{stem}.faiss.tmp"
    faiss.write_index(index, str(temporary))
    with open(temporary, "rb") as handle:
        os.fsync(handle.fileno())
    os.replace(temporary, directory / f"{stem}.faiss")
    _write_atomic(directory / f"{stem}.ids", bytes(ids))
    meta = {**meta, "generation": generation, "faiss": f"{stem}.faiss", "ids": f"{stem}.ids"}
    _write_atomic(meta_path, json.dumps(meta).encode())
    if old:
        for key in ("faiss", "ids"):
            with contextlib.suppress(FileNotFoundError):
                (directory / old[key]).unlink()


def remove_partition(directory: Path, tenant_id: int) -> None:
    meta_path = _meta_path(directory, tenant_id)
    old = read_meta(meta_path)
    with contextlib.suppress(FileNotFoundError):
        meta_path.unlink()
    for key in ("faiss", "ids"):
        if old and old.get(key):
            with contextlib.suppress(FileNotFoundError):
                (directory / old[key]).unlink()


def partitions(storage_name: str) -> dict[int, dict]:
    """tenant id -> the current `.json` of each partition of the index."""
    directory = index_dir(storage_name)
    found = {}
    for path in sorted(directory.glob("tenant-*.json")) if directory.is_dir() else ():
        meta = read_meta(path)
        if meta is not None:
            found[int(path.stem.split("-", 1)[1])] = meta
    return found


def stored() -> set[str]:
    """The storage names that have a directory of files here, whatever the database still holds."""
    root = Path(settings.SEMANTIC_ANN_DIR)
    return {path.name for path in root.iterdir() if path.is_dir() and STORAGE_DIR.match(path.name)} if root.is_dir() else set()


def drop(storage_name: str) -> None:
    """Delete every file of the index (its storage was dropped)."""
    shutil.rmtree(index_dir(storage_name), ignore_errors=True)


# --------------------------------------------------------------------------------------------
# building


def zeroed(index: Any, ids: bytearray, positions: Sequence[int], dims: int) -> list[bytes]:
    """Overwrite the vectors and ids at `positions` with zeros (the graph keeps its links: a zero
    vector is similar to nothing, and a zero id is skipped); returns the vectors' former bytes."""
    faiss = faiss_module()
    import numpy as np

    storage = faiss.downcast_index(index.storage)
    codes = faiss.rev_swig_ptr(storage.codes.data(), storage.codes.size())
    rows = np.asarray(codes).reshape(-1, dims * 4)
    removed = []
    for position in positions:
        removed.append(rows[position].tobytes())
        rows[position] = 0
        ids[position * ID_BYTES : (position + 1) * ID_BYTES] = DEAD
    return removed


def _gone(storage_name: str, ids: bytearray) -> list[int]:
    """Positions whose record no longer holds a vector in the table (forgotten or changed since
    the snapshot was read)."""
    count = len(ids) // ID_BYTES
    gone: list[int] = []
    for start in range(0, count, READ_CHUNK):
        chunk = {
            uuid.UUID(bytes=bytes(ids[p * ID_BYTES : (p + 1) * ID_BYTES])): p
            for p in range(start, min(count, start + READ_CHUNK))
            if ids[p * ID_BYTES : (p + 1) * ID_BYTES] != DEAD
        }
        kept = vectors.embedded_ids(storage_name, list(chunk))
        gone.extend(p for record_id, p in chunk.items() if record_id not in kept)
    return gone


def _settle(storage_name: str) -> None:
    """Wait, at most FRESH_MARGIN, until the newest vector is FRESH_MARGIN old: after a bulk
    embedding (a build) the snapshot then holds every vector, and no recall reads the last moments
    of the bulk again as fresh rows."""
    newest = vectors.newest_embedded(storage_name)
    if newest is not None:
        wait = (newest + FRESH_MARGIN - vectors.clock()).total_seconds()
        if wait > 0:
            time.sleep(min(wait, FRESH_MARGIN.total_seconds()))


def build_partition(storage_name: str, recipe: dict, tenant_id: int) -> int:
    """Build and publish the tenant's partition from the table; returns how many vectors it holds."""
    faiss = faiss_module()
    import numpy as np

    dims = int(recipe.get("dims", 384))
    ann = recipe["ann"]
    read_at = vectors.clock()
    snapshot = read_at - FRESH_MARGIN
    chunks, ids, after = [], bytearray(), None
    while True:
        rows = vectors.read_partition(storage_name, tenant_id, after=after, limit=READ_CHUNK)
        if not rows:
            break
        chunks.append(np.frombuffer(b"".join(bytes(v) for _, v in rows), dtype="<f4").reshape(len(rows), dims))
        ids += b"".join(record_id.bytes for record_id, _ in rows)
        after = rows[-1][0]
    matrix = np.ascontiguousarray(np.concatenate(chunks) if chunks else np.zeros((0, dims), dtype=np.float32))
    index = faiss.IndexHNSWFlat(dims, ann["m"], faiss.METRIC_INNER_PRODUCT)
    index.hnsw.efConstruction = ann["ef_construction"]
    index.add(matrix)
    directory = index_dir(storage_name)
    with locked(directory):
        gone = _gone(storage_name, ids)
        zeroed(index, ids, gone, dims)
        meta = {
            "tenant": tenant_id,
            "snapshot": snapshot.isoformat(),
            "read_at": read_at.isoformat(),
            "count": len(matrix),
            "dead": len(gone),
            "recipe": ann,
        }
        publish(directory, tenant_id, index, ids, meta)
    graph_cache.forget(storage_name, tenant_id)
    return len(matrix) - len(gone)


def build(storage_name: str, recipe: dict) -> dict[int, int]:
    """Build a partition for every tenant with at least `min_partition` embedded rows (and remove
    the others'); returns vectors held per partition. Nothing when the recipe has no `ann`."""
    if not recipe.get("ann"):
        return {}
    counts = vectors.tenant_counts(storage_name)
    if any(count >= recipe["ann"]["min_partition"] for count in counts.values()):
        _settle(storage_name)
    built = {}
    for tenant_id, count in sorted(counts.items()):
        if count >= recipe["ann"]["min_partition"]:
            built[tenant_id] = build_partition(storage_name, recipe, tenant_id)
    if index_dir(storage_name).is_dir():  # (none made for an index without partitions)
        with locked(index_dir(storage_name)):
            for tenant_id in set(partitions(storage_name)) - set(built):
                remove_partition(index_dir(storage_name), tenant_id)
    return built


def refresh(storage_name: str, recipe: dict) -> dict[str, list[int]]:
    """Rebuild the partitions that drifted (`_drifted`) or were built with another recipe, build
    those of tenants that reached `min_partition`, remove those of tenants that fell below it.
    Returns the tenants per action."""
    if not recipe.get("ann") or library_missing():
        return {"rebuilt": [], "removed": []}
    counts = vectors.tenant_counts(storage_name)
    present = partitions(storage_name)
    rebuilt, removed = [], []
    for tenant_id, count in sorted(counts.items()):
        meta = present.get(tenant_id)
        if count < recipe["ann"]["min_partition"]:
            continue
        if meta is not None and meta.get("recipe") == recipe["ann"] and not _drifted(storage_name, tenant_id, meta, count):
            continue
        build_partition(storage_name, recipe, tenant_id)
        rebuilt.append(tenant_id)
    if present:
        with locked(index_dir(storage_name)):
            for tenant_id in sorted(present):
                if counts.get(tenant_id, 0) < recipe["ann"]["min_partition"]:
                    remove_partition(index_dir(storage_name), tenant_id)
                    removed.append(tenant_id)
    return {"rebuilt": rebuilt, "removed": removed}


def _drifted(storage_name: str, tenant_id: int, meta: dict, count: int) -> bool:
    """Whether the rows embedded since the partition's read (each one scored exactly by every
    recall), the rows it holds that have left the table (proposed, then dropped by the check) and
    its purged positions pass REFRESH_SHARE of it. The fresh rows are counted, not the change in
    the tenant's count: as many rows expiring as are written leaves the count alone."""
    try:
        live = int(meta["count"]) - int(meta["dead"])
        since = datetime.fromisoformat(meta.get("read_at") or meta["snapshot"])
    except (KeyError, TypeError, ValueError):
        return True
    fresh = len(vectors.read_fresh(storage_name, since, "d.tenant_id = %(ann_tenant)s", {"ann_tenant": tenant_id}))
    gone = max(0, live - (count - fresh))
    return fresh + gone + int(meta["dead"]) > REFRESH_SHARE * max(live, 1)


# --------------------------------------------------------------------------------------------
# searching


@dataclass
class Partition:
    """A loaded partition: the graph and its vectors (mapped read-only), the ids, and when its
    snapshot was read. Searched by scoring every mapped vector up to `scan_up_to` positions
    (exact, and as fast as the graph at that size), through the graph beyond."""

    index: Any
    ids: bytes
    snapshot: datetime
    count: int
    ef_search: int
    stamp: tuple[int, int]
    scan_up_to: int = 0

    def search(self, query: Any, count: int) -> list[tuple[uuid.UUID, float]]:
        """(id, similarity to `query`) of up to `count` positions most similar to it, best first
        (purged positions skipped); the similarity is the inner product with the position's vector,
        the cosine the table's copy of that vector gives while the row is unchanged."""
        faiss = faiss_module()
        import numpy as np

        count = min(count, self.count)
        if count <= 0:
            return []
        # OpenMP's thread count is each thread's own: set it in the thread that searches (a web
        # worker serves requests on several), or faiss spreads one query over every core (40 ms
        # against 6-8 ms on one thread here, with other processes on the cores).
        faiss.omp_set_num_threads(settings.SEMANTIC_MODEL_THREADS)
        query = np.ascontiguousarray(query, dtype=np.float32).reshape(1, -1)
        if self.count <= self.scan_up_to:
            # The graph's flat storage searched whole by faiss's own kernel: exact, and about ten
            # times faster than a numpy product over the mapped vectors (6 against 60 ms for
            # 100,000 of 384 dimensions, bench.recall_latency's scope).
            found = faiss.downcast_index(self.index.storage).search(query, count)
        else:
            params = faiss.SearchParametersHNSW()
            params.efSearch = max(self.ef_search, count)
            found = self.index.search(query, count, params=params)
        similarities, positions = found[0][0], found[1][0]
        ids = []
        for position, similarity in zip(positions.tolist(), similarities.tolist(), strict=True):
            if position < 0:
                continue
            raw = self.ids[position * ID_BYTES : (position + 1) * ID_BYTES]
            if raw != DEAD:
                ids.append((uuid.UUID(bytes=raw), similarity))
        return ids


@dataclass
class _Cache:
    """The partitions this process has loaded, by their `.json` file's path; one found unreadable
    is remembered by its stamp too, so it is not read again (nor logged) until it changes."""

    loaded: dict[str, Partition] = field(default_factory=dict)
    unreadable: dict[str, tuple[int, int]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def forget(self, storage_name: str, tenant_id: int) -> None:
        key = str(_meta_path(index_dir(storage_name), tenant_id))
        with self.lock:
            self.loaded.pop(key, None)
            self.unreadable.pop(key, None)

    def get(self, storage_name: str, tenant_id: int, dims: int) -> Partition | None:
        directory = index_dir(storage_name)
        meta_path = _meta_path(directory, tenant_id)
        key = str(meta_path)
        try:
            status = meta_path.stat()
        except OSError:
            self.forget(storage_name, tenant_id)
            return None
        stamp = (status.st_ino, status.st_mtime_ns)
        with self.lock:
            partition = self.loaded.get(key)
            if partition is not None and partition.stamp == stamp:
                return partition
            if self.unreadable.get(key) == stamp:
                return None
        partition = _load(directory, meta_path, stamp, dims)
        with self.lock:
            if partition is None:
                self.loaded.pop(key, None)
                self.unreadable[key] = stamp
            else:
                self.loaded[key] = partition
                self.unreadable.pop(key, None)
        return partition


graph_cache = _Cache()


def _load(directory: Path, meta_path: Path, stamp: tuple[int, int], dims: int) -> Partition | None:
    faiss = faiss_module()

    try:
        meta = read_meta(meta_path)
        if meta is None:
            raise ValueError("unreadable partition description")
        index = faiss.read_index(str(directory / meta["faiss"]), faiss.IO_FLAG_MMAP_IFC | faiss.IO_FLAG_READ_ONLY)
        ids = (directory / meta["ids"]).read_bytes()
        if index.d != dims or len(ids) != index.ntotal * ID_BYTES:
            raise ValueError("partition files do not match")
        return Partition(
            index=index,
            ids=ids,
            snapshot=datetime.fromisoformat(meta["snapshot"]),
            count=index.ntotal,
            ef_search=int(meta["recipe"]["ef_search"]),
            stamp=stamp,
            scan_up_to=int(meta["recipe"].get("scan_up_to", 0)),
        )
    except Exception as exc:  # a cache: an unreadable file means an exact scan
        logger.warning(
            "semantic ann partition unreadable: scanned exactly", extra={"path": str(meta_path), "error": type(exc).__name__}
        )
        return None


def partition(storage_name: str, recipe: dict, tenant_id: int) -> Partition | None:
    """The tenant's loaded partition, or None (no `ann` in the recipe, SEMANTIC_ANN_SEARCH off, the
    library missing, no partition built for the tenant, or its files unreadable): scan exactly."""
    if not recipe.get("ann") or not settings.SEMANTIC_ANN_SEARCH or library_missing():
        return None
    return graph_cache.get(storage_name, tenant_id, int(recipe.get("dims", 384)))
