"""Recall quality from ranked results: hit@k, MRR and all-evidence recall, per category.

A question's ranking is the list of turn ids recall returned, best first (at most `limit`, here 10).
- hit@k: some evidence turn is among the first k results (for a multi-hop question any one of its
  turns counts, as in the public benchmark).
- MRR: the mean of 1 / rank of the first evidence turn, 0 when none is returned (so MRR@10).
- all-evidence@10: every evidence turn is among the first ten; reported for the questions that have
  two or more evidence turns.

A no-answer question (nothing in memory answers it) is answered well by an empty result: its
summary is the share of questions recall answered with nothing (0 items), the mean number of items
it returned instead, and, where recall reports a `relevance` per item, the mean relevance of the
best item it returned.
"""

from collections.abc import Iterable, Sequence

KS = (5, 10)


def first_evidence_rank(ranking: Sequence[str], evidence: Iterable[str]) -> int | None:
    """1-based rank of the first evidence turn in the ranking, None if it holds none."""
    wanted = set(evidence)
    return next((position for position, turn_id in enumerate(ranking, start=1) if turn_id in wanted), None)


def score_question(ranking: Sequence[str], evidence: Sequence[str]) -> dict:
    rank = first_evidence_rank(ranking, evidence)
    top10 = set(ranking[:10])
    return {
        "rank": rank,
        **{f"hit@{k}": rank is not None and rank <= k for k in KS},
        "rr": 1.0 / rank if rank else 0.0,
        "evidence": len(evidence),
        "evidence_in_top10": sum(1 for turn_id in set(evidence) if turn_id in top10),
    }


def summarise(scored: Iterable[dict], categories: Sequence[str]) -> dict[str, dict]:
    """Per category and overall ("all"): n, hit@5, hit@10, mrr (fractions), and for questions with
    several evidence turns multi_n and all_evidence@10."""
    rows = list(scored)
    groups = {category: [r for r in rows if r["category"] == category] for category in categories}
    groups["all"] = rows
    summary = {}
    for name, group in groups.items():
        n = len(group)
        multi = [r for r in group if r["evidence"] > 1]
        summary[name] = {
            "n": n,
            **{f"hit@{k}": (sum(r[f"hit@{k}"] for r in group) / n if n else None) for k in KS},
            "mrr": sum(r["rr"] for r in group) / n if n else None,
            "multi_n": len(multi),
            "all_evidence@10": (sum(r["evidence_in_top10"] == r["evidence"] for r in multi) / len(multi) if multi else None),
        }
    return summary


def summarise_noanswer(rows: Iterable[dict], traps: Sequence[str]) -> dict[str, dict]:
    """Per trap and overall ("all"), for rows with "trap", "returned" (items recall returned) and
    "relevance" (their relevance values, best first; empty when recall reports none): n, empty
    (share answered with 0 items), mean_returned, relevance_n (questions with a relevance for every
    item returned) and top_relevance (mean of the highest relevance among those, None if none)."""
    rows = list(rows)
    groups = {trap: [r for r in rows if r["trap"] == trap] for trap in traps}
    groups["all"] = rows
    summary = {}
    for name, group in groups.items():
        n = len(group)
        rated = [r for r in group if r["returned"] and len(r["relevance"]) == r["returned"]]
        summary[name] = {
            "n": n,
            "empty": sum(r["returned"] == 0 for r in group) / n if n else None,
            "mean_returned": sum(r["returned"] for r in group) / n if n else None,
            "relevance_n": len(rated),
            "top_relevance": sum(max(r["relevance"]) for r in rated) / len(rated) if rated else None,
        }
    return summary
