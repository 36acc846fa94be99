"""Hybrid ranking: the lexical ranking and the semantic index's similarity, fused by reciprocal rank
fusion (RRF) within the hard-filtered scope, plus the same priors as lexical recall.

    fused relevance = WEIGHT * (1 / (RRF_K + lexical rank) + 1 / (RRF_K + semantic rank))

over the first DEPTH rows of each: the lexical rank counts the records that share a term with the
query, by BM25; the semantic rank counts the scope's records by cosine similarity; a record absent
from one list gets nothing from it. Ranks, not raw scores, are fused, because BM25 and cosine are on
unrelated scales (BM25 grows with rarity and the number of terms, cosine sits in [-1, 1]). WEIGHT
puts the fused relevance on the scale of a good BM25 score (a record first in both lists gets
2 x WEIGHT / 61), so the priors weigh in hybrid recall about as they do in lexical recall.

`score_parts` of a fused row: `lexical` (its BM25, 0 outside the lexical list), `semantic` (its cosine
similarity), `fusion` (the fused relevance minus those two: what fusion made of them), and
`authority`, `confidence`, `recency`. `score` is their sum: the fused relevance plus the priors.
Rows come in score order (ties: fused relevance, the most recently confirmed, the id). Past the
fused rows (more than `limit` ever needs, unless the hard filters refuse many) the lexical ranking
continues, with no fused relevance.
"""

import uuid
from collections.abc import Iterator
from datetime import datetime
from itertools import islice

from memory.search.ranking import Ranked, priors
from memory.search.semantic import Similarity

RRF_K = 60
DEPTH = 100  # rows taken from each ranking
WEIGHT = 300.0


def rrf(rank: int | None) -> float:
    return 0.0 if rank is None else 1.0 / (RRF_K + rank)


def _row(record_id: uuid.UUID, lexical: float, cosine: float, fused: float, prior: dict, confirmed: float) -> Ranked:
    parts = {"lexical": lexical, "semantic": cosine, "fusion": fused - lexical - cosine, **prior}
    return Ranked(record_id=record_id, parts=parts, confirmed=confirmed)


def fuse(lexical: Iterator[Ranked], similarity: Similarity, *, now: datetime) -> Iterator[Ranked]:
    """The fused ranking of `lexical` (the lexical ranking, in its order) and `similarity`."""
    head = list(islice(lexical, DEPTH))
    matched = sorted((row for row in head if row.parts["lexical"] > 0), key=lambda row: -row.parts["lexical"])
    lexical_rank = {row.record_id: rank for rank, row in enumerate(matched, start=1)}
    semantic_rank = {hit.record_id: rank for rank, hit in enumerate(similarity.top[:DEPTH], start=1)}
    fused: dict[uuid.UUID, tuple[Ranked, float]] = {}
    for row in head:
        relevance = WEIGHT * (rrf(lexical_rank.get(row.record_id)) + rrf(semantic_rank.get(row.record_id)))
        prior = {name: row.parts[name] for name in ("authority", "confidence", "recency")}
        fused[row.record_id] = (_row(row.record_id, row.parts["lexical"], similarity.cosine(row.record_id) or 0.0,
                                     relevance, prior, row.confirmed), relevance)
    for hit in similarity.top[:DEPTH]:
        if hit.record_id in fused:
            continue
        relevance = WEIGHT * rrf(semantic_rank[hit.record_id])
        fused[hit.record_id] = (_row(hit.record_id, 0.0, hit.cosine, relevance,
                                     priors(hit.authority, hit.confidence, hit.confirmed_at, now),
                                     hit.confirmed_at.timestamp()), relevance)
    ordered = sorted(fused.values(), key=lambda item: (-item[0].score, -item[1], -item[0].confirmed, str(item[0].record_id)))
    yield from (row for row, _ in ordered)
    for row in lexical:
        if row.record_id not in fused:
            prior = {name: row.parts[name] for name in ("authority", "confidence", "recency")}
            yield _row(row.record_id, row.parts["lexical"], similarity.cosine(row.record_id) or 0.0, 0.0, prior, row.confirmed)
