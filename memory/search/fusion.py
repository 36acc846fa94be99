"""Hybrid ranking: the lexical ranking and the semantic index's similarity, fused within the
hard-filtered scope, plus the same priors as lexical recall.

The pool is the first DEPTH rows of the lexical ranking and the DEPTH records of the scope most
similar to the query. Each record's two scores are put on one scale by normalising over the pool
(BM25 divided by the pool's best, so a non-match is 0; cosine min-max scaled to [0, 1]) and mixed
with equal weight (a convex combination):

    fused relevance = WEIGHT * (ALPHA * bm25 / best bm25 + (1 - ALPHA) * (cos - min cos) / (max cos - min cos))

Why not reciprocal rank fusion (RRF, k=60), which uses ranks alone: measured on the dev part of the
recall evaluation set (bench/recall_eval), RRF scored below the semantic ranking alone (hit@10
59.5% against 71.2%), because in conversation memories most records share some word with a
question (a speaker's name opens every turn), and RRF rewards a record at lexical rank 5 the same
whether its BM25 is 4.4 (the words asked about) or 0.6 (only the name). The convex combination keeps
how strong each match is: 69.8% there with the equal weight it has here, untuned. ALPHA = 0.5
trusts neither index more than the other.

WEIGHT puts the fused relevance on the scale of a good BM25 score (a record best in both gets
WEIGHT), so the priors weigh in hybrid recall about as they do in lexical recall.

`score_parts` of a fused row: `lexical` (its BM25, 0 outside the lexical pool), `semantic` (its cosine
similarity), `fusion` (the fused relevance minus those two: what fusion made of them), and
`authority`, `confidence`, `recency`. `score` is their sum: the fused relevance plus the priors.
Rows come in score order (ties: fused relevance, the most recently confirmed, the id). Past the
pool (more than `limit` ever needs, unless the hard filters refuse many) the lexical ranking
continues, with no fused relevance. A record whose vector is still pending gets no semantic share
(and `semantic` 0). With nothing to compare (no vector in the scope, an empty
query) the lexical ranking is returned as it is.

`Fusion.fused_row` fuses a record from outside the pool on the pool's scale (the second stage,
`memory.search.rerank`, brings in a candidate's neighbours that way).
"""

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from itertools import islice

from memory.search.ranking import Ranked, priors, reading
from memory.search.semantic import Similarity

DEPTH = 100  # rows taken from each ranking
ALPHA = 0.5  # the lexical share of the fused relevance
WEIGHT = 10.0

PRIORS = ("authority", "confidence", "recency")

TAIL_BATCH = 10  # rows past the pool whose cosines are read in one statement


def _row(record_id: uuid.UUID, lexical: float, cosine: float, fused: float, prior: dict, confirmed: float) -> Ranked:
    parts = {"lexical": lexical, "semantic": cosine, "fusion": fused - lexical - cosine, **prior}
    return Ranked(record_id=record_id, parts=parts, confirmed=confirmed)


@dataclass(frozen=True)
class Scale:
    """How a pool puts its two scores on one scale: BM25 over the pool's best, the cosine min-max
    scaled over the pool (below the pool's lowest: 0)."""

    best: float
    low: float
    spread: float

    def relevance(self, bm25: float, cosine: float | None) -> float:
        semantic = 0.0 if cosine is None else max(0.0, (cosine - self.low) / self.spread)
        return WEIGHT * (ALPHA * bm25 / self.best + (1 - ALPHA) * semantic)


class Fusion:
    """The fused ranking of `lexical` (the lexical ranking, in its order) and `similarity`, read by
    iterating; `scale` is the pool's and `size` its rows once the first row is out (None and 0:
    nothing to fuse)."""

    def __init__(self, lexical: Iterator[Ranked], similarity: Similarity, *, now: datetime, depth: int = DEPTH) -> None:
        self.lexical, self.similarity, self.now, self.depth = lexical, similarity, now, depth
        self.scale: Scale | None = None
        self.size = 0

    def fused_row(self, record_id: uuid.UUID, bm25: float, prior: dict[str, float], confirmed: float) -> Ranked:
        """A record from outside the pool, fused on the pool's scale (its cosine looked up)."""
        cosine = self.similarity.cosine(record_id)
        relevance = self.scale.relevance(bm25, cosine) if self.scale is not None else bm25
        return _row(record_id, bm25, cosine or 0.0, relevance, prior, confirmed)

    def __iter__(self) -> Iterator[Ranked]:
        similarity, lexical = self.similarity, self.lexical
        if not similarity.top:
            yield from lexical
            return
        with reading(self.depth):
            head = list(islice(lexical, self.depth))
        similarity.prefetch([row.record_id for row in head])
        # record id -> (bm25, cosine or None while its vector is pending, priors, confirmed)
        pool: dict[uuid.UUID, tuple[float, float | None, dict, float]] = {}
        for row in head:
            pool[row.record_id] = (
                row.parts["lexical"],
                similarity.cosine(row.record_id),
                {name: row.parts[name] for name in PRIORS},
                row.confirmed,
            )
        for hit in similarity.top[: self.depth]:
            if hit.record_id not in pool:
                pool[hit.record_id] = (
                    0.0,
                    hit.cosine,
                    priors(hit.authority, hit.confidence, hit.confirmed_at, self.now),
                    hit.confirmed_at.timestamp(),
                )
        cosines = [cosine for _, cosine, _, _ in pool.values() if cosine is not None]
        low = min(cosines)
        self.size = len(pool)
        self.scale = scale = Scale(
            best=max(bm25 for bm25, _, _, _ in pool.values()) or 1.0, low=low, spread=(max(cosines) - low) or 1.0
        )
        fused = []
        for record_id, (bm25, cosine, prior, confirmed) in pool.items():
            relevance = scale.relevance(bm25, cosine)
            fused.append((_row(record_id, bm25, cosine or 0.0, relevance, prior, confirmed), relevance))
        fused.sort(key=lambda item: (-item[0].score, -item[1], -item[0].confirmed, str(item[0].record_id)))
        yield from (row for row, _ in fused)
        # cosines read on demand (an approximate search) are read a few rows at a time
        batch = 1 if similarity.fetch is None else TAIL_BATCH
        while rows := list(islice(lexical, batch)):
            tail = [row for row in rows if row.record_id not in pool]
            similarity.prefetch([row.record_id for row in tail])
            for row in tail:
                cosine = similarity.cosine(row.record_id) or 0.0
                yield _row(
                    row.record_id, row.parts["lexical"], cosine, 0.0, {name: row.parts[name] for name in PRIORS}, row.confirmed
                )


def fuse(lexical: Iterator[Ranked], similarity: Similarity, *, now: datetime) -> Iterator[Ranked]:
    """The fused ranking of `lexical` (the lexical ranking, in its order) and `similarity`."""
    return iter(Fusion(lexical, similarity, now=now))
