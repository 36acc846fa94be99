"""Recall's ranking over records as they were at a past moment (`memory.asof`), by the same rules
and scoring functions as `memory.search.ranking`, over texts the search index no longer holds.

The index tables hold today's active records only, so the historical rows are analysed by the
database's engine with the serving lexical index's recipe (`memory.engine.<vendor>.ranking
.analyse_history`: on PostgreSQL `to_tsvector` with its text search configuration, on SQLite the
recipe's FTS5 tokenizer in a private scratch table, matched and counted the way the index is).
BM25's collection (N, the average length, each term's document frequency) is the scope's records
that were active then, including those already past expiry or outside their valid window (as the
index counts them); only those the scope admits are ranked. Terms add up rarest first, as on
PostgreSQL; the priors are `ranking.priors` with recency measured at that moment; rows come out
in `Ranked.sort_key` order.

The semantic side (`similarity_at`) gives `memory.search.fusion.fuse` the cosine of each ranked
record's content then, from the semantic index's vector where the content is unchanged since,
else embedded here from the historical text.
"""

import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from memory.engine import current
from memory.scope import Scope
from memory.search import fusion, semantic
from memory.search.models import SearchIndex
from memory.search.ranking import Ranked, analyse_query, idf, priors, term_score
from memory.search.semantic import Similar, Similarity

EMBED_LIMIT = 256  # distinct contents as-of recall embeds itself per request (those the index has no vector for)


@dataclass
class AsOfRanking:
    analysed: list[tuple[str, str]]  # the query's (term as stored, text that matches it)
    rows: list[Ranked] = field(default_factory=list)
    # text that matches a term -> its idf in the collection then (as `Ranking.idfs`: the second
    # stage's relevance reads the query's weight from it)
    idfs: dict[str, float] = field(default_factory=dict)
    records: int = 0  # the collection's records (N)

    @property
    def terms(self) -> list[str]:
        return [term for term, _ in self.analysed]


def rank_rows(index: SearchIndex, rows: Sequence, query: str, *, now: datetime, timely: Callable[[Any], bool]) -> AsOfRanking:
    """`rows` (history rows: the collection) ranked for `query`; only those `timely` accepts (the
    scope's predicate, `Scope.admits`)."""
    analysed = analyse_query(index, query)
    ranking = AsOfRanking(analysed=analysed, records=len(rows))
    if not rows:
        return ranking
    words = [word for _, word in analysed]
    doclens, tfs = current().ranking.analyse_history(index.recipe, rows, words)
    n = len(rows)
    avgdl = (sum(doclens.values()) / n) or 1.0
    frequencies = {word: sum(1 for key in doclens if tfs.get((key, word), 0) > 0) for word in words}
    present = sorted(((word, df) for word, df in frequencies.items() if df > 0), key=lambda item: (item[1], item[0]))
    weights = [(word, idf(n, df)) for word, df in present]
    ranking.idfs.update({word: idf(n, df) for word, df in frequencies.items()})
    k1, b = float(index.recipe["k1"]), float(index.recipe["b"])
    for row in rows:
        if not timely(row):
            continue
        lexical = 0.0
        for word, weight in weights:
            tf = float(tfs.get((row.history_id, word), 0))
            if tf > 0:
                lexical += term_score(weight, tf, k1=k1, b=b, doclen=doclens[row.history_id], avgdl=avgdl)
        parts = {"lexical": lexical, **priors(row.authority, row.confidence, row.confirmed_at, now)}
        ranking.rows.append(Ranked(record_id=uuid.UUID(str(row.id)), parts=parts, confirmed=row.confirmed_at.timestamp()))
    ranking.rows.sort(key=Ranked.sort_key)
    return ranking


@dataclass
class AsOfSimilarity:
    """The semantic side of an as-of ranking: the similarity to fuse, how many records were embedded
    from their content then, and how many ranked records were left without a semantic share."""

    similarity: Similarity
    embedded: int = 0
    without: int = 0


def similarity_at(
    index: SearchIndex, scope: Scope, ranked: Sequence[Ranked], rows: Mapping[Any, Any], query: str, *, limit: int | None = None
) -> AsOfSimilarity:
    """The similarity of `query` to each ranked record's content at the scope's moment (`ranked`:
    the lexical ranking's rows, in order; `rows`: record id -> its history row then, annotated
    with `content_hash_now`), in the shape live recall fuses (`semantic.Similarity`, the DEPTH
    most similar as `top`, with their priors then).

    A record keeps the semantic index's vector only when its content is the same now as then (the
    stored vector was computed from today's content: the hash says whether that is the one it had
    then). Any other (its content changed since, or it left the index: retired, superseded,
    expired since) is embedded from its content then, up to `limit` (default EMBED_LIMIT) distinct
    contents, the first in lexical order; the rest get no semantic share, as a record whose vector
    is pending gets none in live recall. The caller never passes a forgotten record: nothing of one
    is embedded, and its vector is never read into the ranking."""
    import numpy as np

    limit = EMBED_LIMIT if limit is None else limit
    if not ranked or not query.strip():
        return AsOfSimilarity(Similarity(top=[]))
    stored = semantic.scope_vectors(index, scope)
    found: dict[uuid.UUID, bytes] = {}
    missing: dict[uuid.UUID, str] = {}  # record id -> content hash then, to embed
    texts: dict[str, str] = {}  # content hash -> content then
    without = 0
    for row in ranked:
        then = rows[row.record_id]
        vector = stored.get(row.record_id)
        if vector is not None and then.content_hash == then.content_hash_now:
            found[row.record_id] = vector
        elif then.content_hash in texts or len(texts) < limit:
            texts.setdefault(then.content_hash, then.content)
            missing[row.record_id] = then.content_hash
        else:
            without += 1
    if texts:
        digests = list(texts)
        embedded = semantic.embed([texts[digest] for digest in digests])
        computed = {digest: vector.astype("<f4").tobytes() for digest, vector in zip(digests, embedded, strict=True)}
        found.update({record_id: computed[digest] for record_id, digest in missing.items()})
    if not found:
        return AsOfSimilarity(Similarity(top=[]), without=without)
    ids = list(found)
    dims = index.recipe.get("dims", semantic.DIMS)
    matrix = np.frombuffer(b"".join(found[record_id] for record_id in ids), dtype="<f4").reshape(len(ids), dims)
    cosines = matrix @ semantic.query_vector(query)
    best = np.lexsort((np.arange(len(ids)), -cosines))[: fusion.DEPTH]  # by cosine, then position: a stable order
    top = []
    for position in best:
        then = rows[ids[position]]
        top.append(Similar(ids[position], float(cosines[position]), then.authority, float(then.confidence), then.confirmed_at))
    similarity = Similarity(top=top, positions={str(record_id): i for i, record_id in enumerate(ids)}, cosines=cosines)
    return AsOfSimilarity(similarity, embedded=len(missing), without=without)
