"""Forget in a semantic index's approximate files (`memory.search.ann`): the forgotten records'
vectors and ids overwritten with zeros in a new generation of each partition holding them, the old
files deleted, and every file of the index read back for the removed ids and vectors. A partition
that cannot be read, or a file no partition points to, is deleted (the refresh job builds the
partition again), so nothing unaccounted for stays behind."""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memory.search.ann import (
    ID_BYTES,
    faiss_module,
    graph_cache,
    index_dir,
    locked,
    partitions,
    publish,
    read_meta,
    remove_partition,
    zeroed,
)

logger = logging.getLogger("memory.search")


@dataclass
class Purged:
    positions: int = 0  # vectors overwritten
    files: int = 0  # files read back
    verified: bool = True  # none of the removed ids or vectors is in any file of the index


def purge(storage_name: str, record_ids: Sequence[uuid.UUID], *, dims: int = 384) -> Purged:
    """Overwrite the given records' vectors and ids in every partition of the index (a new
    generation of each partition holding any of them), then read every file of the index back
    for the removed ids and vectors. A partition that cannot be read cannot be overwritten: it is
    deleted (a cache; the refresh builds it again), as is any file no partition refers to."""
    faiss = faiss_module()

    wanted = {uuid.UUID(str(pk)).bytes for pk in record_ids}
    directory = index_dir(storage_name)
    result = Purged()
    if not wanted or not directory.is_dir():
        return result
    removed_vectors: set[bytes] = set()
    with locked(directory):
        for tenant_id, meta in partitions(storage_name).items():
            try:
                ids = bytearray((directory / meta["ids"]).read_bytes())
                if len(ids) != int(meta["count"]) * ID_BYTES:
                    raise ValueError("partition files do not match")
                positions = [p for p in range(len(ids) // ID_BYTES) if bytes(ids[p * ID_BYTES : (p + 1) * ID_BYTES]) in wanted]
                if not positions:
                    continue
                index = faiss.read_index(str(directory / meta["faiss"]))
                removed_vectors.update(zeroed(index, ids, positions, dims))
                meta = {**meta, "dead": int(meta["dead"]) + len(positions)}
            except Exception as exc:
                logger.warning(
                    "semantic ann partition unreadable: deleted", extra={"tenant": tenant_id, "error": type(exc).__name__}
                )
                remove_partition(directory, tenant_id)
                graph_cache.forget(storage_name, tenant_id)
                continue
            publish(directory, tenant_id, index, ids, meta)
            graph_cache.forget(storage_name, tenant_id)
            result.positions += len(positions)
        _remove_unreferenced(directory)
        result.files, result.verified = _read_back(directory, wanted, {v for v in removed_vectors if any(v)}, dims)
    return result


def _remove_unreferenced(directory: Path) -> None:
    """Delete every file no current partition refers to (an interrupted publish's, an unreadable
    description): it may hold what a forget removes, and nothing reads it."""
    kept = {".lock"}
    for path in directory.glob("tenant-*.json"):
        meta = read_meta(path)
        if meta is not None and meta.get("faiss") and meta.get("ids"):
            kept |= {path.name, meta["faiss"], meta["ids"]}
    for path in directory.iterdir():
        if path.is_file() and path.name not in kept:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()


def _read_back(directory: Path, ids: set[bytes], removed: set[bytes], dims: int) -> tuple[int, bool]:
    """(files read, whether none holds one of `ids` or one of the `removed` vectors). A record kept
    may share a forgotten one's content, and so its vector: a removed vector counts as found only
    where a file holds more copies of it than its partition's live positions do."""
    files, clean = 0, True
    for path in sorted(directory.iterdir()):
        if not path.is_file():
            continue
        files += 1
        data = path.read_bytes()
        if any(needle in data for needle in ids):
            clean = False
        found = [vector for vector in removed if vector in data]
        if found:
            held = _live_copies(directory, path.name, found, dims)
            if any(data.count(vector) > held.get(vector, 0) for vector in found):
                clean = False
    return files, clean


def _live_copies(directory: Path, faiss_name: str, found: list[bytes], dims: int) -> dict[bytes, int]:
    """vector -> how many live positions of the partition stored in `faiss_name` hold it."""
    faiss = faiss_module()
    import numpy as np

    for path in directory.glob("tenant-*.json"):
        meta = read_meta(path)
        if meta is not None and meta.get("faiss") == faiss_name:
            break
    else:
        return {}
    try:
        index = faiss.read_index(str(directory / faiss_name))
        storage = faiss.downcast_index(index.storage)
        rows = np.asarray(faiss.rev_swig_ptr(storage.codes.data(), storage.codes.size())).reshape(-1, dims * 4)
        live: Any = np.frombuffer((directory / meta["ids"]).read_bytes(), dtype=np.uint8).reshape(-1, ID_BYTES).any(axis=1)
        if live.shape[0] != rows.shape[0]:
            return {}
    except Exception:  # unreadable: none of its copies is accounted for
        return {}
    return {vector: int(((rows == np.frombuffer(vector, dtype=np.uint8)).all(axis=1) & live).sum()) for vector in found}
