"""Fit recall's second stage (`memory.search.rerank`) on the dev part, in process, over a database
the harness kept, and print the recipe keys it chose (`memory.search.recipes.SECOND_STAGE_DEFAULTS`).

    .venv/bin/python -m bench.recall_eval.run --part dev --config hybrid --keep      # prints the temp dir
    DATABASE_URL=sqlite:////tmp/recall-eval-XXXX/eval.sqlite3 .venv/bin/python -m bench.recall_eval.fit

(PostgreSQL: `--database postgres --keep`, then DATABASE_URL=postgres://.../gm_recall_eval.) Only the
dev part is read, answerable (the reply and dated parts included) and no-answer questions: the blind part never chooses a setting
(docs/recall-eval.md). For each question and mode (lexical: the lexical ranking alone; hybrid: fused
with the semantic index the harness built) the first stage runs once through the database; the
second stage then runs in memory over the conversation's records (`rerank.ListedRecords`, which
orders a session as the scoped query does) for every setting tried:

1. The ranking: `brevity_weight`, `neighbour_window`, `neighbour_weight` and `rerank_depth` on a
   grid, scored by dev hit@10 and then MRR, summed over both modes (one recipe serves both);
   then, with those, `time_weight` on its grid and `strip_periods` both ways, scored alike (the
   dated part's questions are the ones that name a date). The brevity grid stops at 0.2 (see
   BREVITY_WEIGHTS).
2. The relevance calibration per mode: logistic regression of "this row is an evidence turn" on the
   row's features (coverage, cosine for hybrid, neighbour support), over the re-ranked rows of every
   answerable and no-answer question; the neighbour feature depends on the neighbours' own relevance,
   so the fit is repeated with it a few times. A neighbour may only raise relevance: where its
   weight comes out negative, the fit is made again without it (weight 0).
3. The floor per mode: `min_relevance` on a grid; of the floors that keep dev hit@10 within
   MAX_HIT_DROP of no floor, the highest of those that answer the most no-answer questions with
   nothing (a tie leaves out the most filler). The whole trade-off curve (hit@10 against the share of no-answer questions answered with nothing) is
   printed. The lexical floor is then kept above the relevance of a record that matches none of
   the query's words (the bias alone), so those are never returned as filler. The hybrid floor is then held at half the relevance of a short note
   asked in other words (PARAPHRASE: the README's "how does acme want to be contacted" -> "Prefers
   email over phone for routine updates.", no word and no neighbour shared) at most: the calibration
   is fitted on conversation turns, whose cosines to a question run higher than a short note's to
   its paraphrase, and a default floor must not drop that answer.
"""

import argparse
import json
import math
import os
from dataclasses import replace
from itertools import islice, product

MAX_HIT_DROP = 0.01  # the bound: answerable hit@10 drops by at most one point
PARAPHRASE = ("how does acme want to be contacted", "Prefers email over phone for routine updates.")
FLOORS = sorted(
    {
        0.0,
        *(round(0.001 * i, 3) for i in range(1, 20)),
        *(round(0.005 * i, 3) for i in range(4, 20)),
        *(round(0.05 * i, 2) for i in range(2, 20)),
    }
)
WINDOWS = (0, 1, 2, 3)
WEIGHTS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0)
# At least the largest recall limit (MEMORY_RECALL_MAX_LIMIT), so every item is re-ranked; no deeper,
# since the lexical ranking reads its first 50 rows in one statement and a deeper head costs another.
DEPTHS = (50,)
# No more than 0.2: the dev set's filler turns are shorter than real chat's, and a weight fitted
# past that would fit its generator rather than conversations.
BREVITY_WEIGHTS = (0.0, 0.1, 0.2)
TIME_WEIGHTS = (0.0, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0)
FIRST_STAGE_ROWS = 300  # first-stage rows kept per question (the floor's scan goes past the re-ranked ones)
LIMIT = 10
NO_FLOOR = {"lexical": 0.0, "hybrid": 0.0}


def logistic_fit(rows: list[tuple[list[float], int]], *, iterations: int = 50, ridge: float = 1e-3) -> list[float]:
    """Weights (bias first) of a logistic regression by Newton's method, a small ridge for stability."""
    import numpy as np

    x = np.array([[1.0, *features] for features, _ in rows])
    y = np.array([label for _, label in rows], dtype=float)
    w = np.zeros(x.shape[1])
    for _ in range(iterations):
        p = 1 / (1 + np.exp(-np.clip(x @ w, -60, 60)))
        gradient = x.T @ (p - y) + ridge * w
        hessian = (x * (p * (1 - p))[:, None]).T @ x + ridge * np.eye(len(w))
        step = np.linalg.solve(hessian, gradient)
        w -= step
        if float(np.abs(step).max()) < 1e-8:
            break
    return [float(v) for v in w]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="only the recipe's settings, no grid (prints the figures)")
    parser.add_argument(
        "--dump", help="write each question's re-ranked rows and features (the recipe's settings) to this JSON file"
    )
    parser.add_argument(
        "--common-share",
        type=float,
        help="semantic_common_share for the first stage's semantic query (default: the recipe's); "
        "run once per value to compare, since the first stage runs once",
    )
    args = parser.parse_args(argv)

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    from django.utils import timezone

    from bench.recall_eval import dataset, metrics

    CATEGORIES = (*dataset.CATEGORIES, *dataset.EXTRA_CATEGORIES)
    from bench.recall_eval.run import PURPOSE
    from memory.models import Agent, MemoryKind, MemoryRecord
    from memory.search import fusion, semantic
    from memory.search.build import serving_index
    from memory.search.models import IndexKind, IndexStatus, SearchIndex
    from memory.search.periods import named_periods, strip_periods
    from memory.search.ranking import Scope, rank
    from memory.search.recipes import SECOND_STAGE_DEFAULTS
    from memory.search.rerank import ListedRecords, Query, Settings, rerank

    agent = Agent.objects.get(slug="evaluator")
    lexical_index = serving_index(None)
    semantic_index = SearchIndex.objects.get(kind=IndexKind.SEMANTIC, status=IndexStatus.ACTIVE)
    episodic = (MemoryKind.objects.get(name="episodic").pk,)
    now = timezone.now()
    base = Settings.of(SECOND_STAGE_DEFAULTS)
    share = base.common_share if args.common_share is None else args.common_share
    base = replace(base, common_share=share)

    # ---------------------------------------------------------------- the first stage, once
    cases = []  # one per (question, mode, strip)
    records_of: dict[str, ListedRecords] = {}
    turns: dict = {}
    parts = (
        ("answerable", dataset.load("dev")),
        *(("answerable", found) for found in dataset.load_extra("dev").values()),
        ("no-answer", dataset.load_noanswer("dev")),
    )
    for kind, data in parts:
        for conv in data["conversations"]:
            scope = Scope(
                tenant_id=agent.tenant_id, agent_id=agent.pk, purpose=PURPOSE, now=now, subject=conv["subject"], kind_ids=episodic
            )
            if conv["subject"] not in records_of:
                found = list(MemoryRecord.objects.filter(agent=agent, subject=conv["subject"]).select_related("kind"))
                records_of[conv["subject"]] = ListedRecords(found)
                turns.update({record.id: record.turn_id for record in found})
            for question in conv["questions"]:
                text = question["question"]
                periods = named_periods(text, now=now)
                for strip in (False, True) if periods else (False,):
                    ranking = rank(lexical_index, scope, strip_periods(text, periods) if strip else text)
                    lexical_rows = list(islice(iter(ranking), FIRST_STAGE_ROWS))
                    common = ranking.common_words(text, share)
                    similarity = semantic.similar(semantic_index, scope, semantic.query_text(text, common), depth=fusion.DEPTH)
                    fused = fusion.Fusion(iter(lexical_rows), similarity, now=now)
                    fused_rows = list(islice(iter(fused), FIRST_STAGE_ROWS))
                    for mode, rows, fusion_object in (("lexical", lexical_rows, None), ("hybrid", fused_rows, fused)):
                        cases.append(
                            {
                                "kind": kind,
                                "id": question["id"],
                                "category": question.get("category"),
                                "evidence": set(question.get("evidence", [])),
                                "subject": conv["subject"],
                                "mode": mode,
                                "strip": strip,
                                "has_periods": bool(periods),
                                "rows": rows,
                                "fusion": fusion_object,
                                "query": Query(idfs=dict(ranking.idfs), periods=periods, mode=mode),
                            }
                        )
    print(f"first stage: {len(cases)} question-modes", flush=True)

    def select(mode: str, strip: bool) -> list[dict]:
        return [c for c in cases if c["mode"] == mode and (c["strip"] == strip or not c["has_periods"])]

    def run(case: dict, settings: Settings, observe=None) -> list:
        return list(
            islice(
                rerank(
                    iter(case["rows"]),
                    settings=settings,
                    query=case["query"],
                    records=records_of[case["subject"]],
                    now=now,
                    fusion=case["fusion"],
                    observe=observe,
                ),
                FIRST_STAGE_ROWS,
            )
        )

    def ranked(mode: str, settings: Settings, strip: bool = False) -> list[tuple[dict, list]]:
        return [(case, run(case, settings)) for case in select(mode, strip)]

    def score(mode: str, settings: Settings, floor: float = 0.0, strip: bool = False, runs=None) -> dict:
        scored, empty, noanswer = [], 0, 0
        for case, rows in runs if runs is not None else ranked(mode, settings, strip):
            kept = [row for row in rows if row.relevance is None or row.relevance >= floor][:LIMIT]
            ranking = [turns[row.record_id] for row in kept]
            if case["kind"] == "answerable":
                scored.append({"category": case["category"], **metrics.score_question(ranking, sorted(case["evidence"]))})
            else:
                noanswer += 1
                empty += not ranking
        summary = metrics.summarise(scored, CATEGORIES)
        return {"summary": summary, "empty": empty / noanswer if noanswer else None}

    def line(label: str, result: dict) -> str:
        overall = result["summary"]["all"]
        cells = " | ".join(f"{100 * result['summary'][c]['hit@10']:.1f}" for c in CATEGORIES)
        return (
            f"| {label} | {100 * overall['hit@5']:.1f} | {100 * overall['hit@10']:.1f} | {overall['mrr']:.3f} | {cells} | "
            f"{100 * result['empty']:.1f} |"
        )

    header = (
        "| setting | hit@5 | hit@10 | MRR | "
        + " | ".join(f"{c} hit@10" for c in CATEGORIES)
        + " | no-answer empty |\n|"
        + "---|" * (5 + len(CATEGORIES))
    )

    if args.dump:
        dumped = []
        for case in cases:
            rows = []

            def keep(row, features, rows=rows):
                rows.append({"turn": turns[row.record_id], "parts": row.parts, "features": features})

            returned = run(case, replace(base, min_relevance=NO_FLOOR), keep)
            order = {turns[row.record_id]: i for i, row in enumerate(returned)}
            for row in rows:
                row["rank"] = order.get(row["turn"])
            dumped.append(
                {k: case[k] for k in ("kind", "id", "category", "mode", "strip")}
                | {"evidence": sorted(case["evidence"]), "rows": rows, "idfs": case["query"].idfs}
            )
        with open(args.dump, "w") as out:
            json.dump(dumped, out)
        print(f"dumped {len(dumped)} to {args.dump}")

    # ---------------------------------------------------------------- 1. the ranking
    print("\nfirst stage alone (no second stage, no floor):\n" + header)
    for mode in ("lexical", "hybrid"):
        first_stage = [(case, case["rows"]) for case in select(mode, False)]
        print(line(f"{mode}, first stage", score(mode, base, runs=first_stage)))
    chosen = replace(base, min_relevance=NO_FLOOR)

    def best_of(trials) -> Settings:
        """The trial (label, settings, tie-break) with the most dev hit@10, then MRR, summed over both
        modes; then the larger tie-break. Prints each trial's line per mode."""
        best_key, best = None, None
        for label, trial, tiebreak in trials:
            scores = {mode: score(mode, trial, strip=trial.strip_periods) for mode in ("lexical", "hybrid")}
            results = [found["summary"]["all"] for found in scores.values()]
            key = (round(sum(r["hit@10"] for r in results), 6), round(sum(r["mrr"] for r in results), 6), *tiebreak)
            if best_key is None or key > best_key:
                best_key, best = key, trial
            for mode, found in scores.items():
                print(line(f"{mode}, {label}", found))
        return best

    if not args.quick:
        chosen = best_of(
            (
                f"brevity {brevity:g} window {window} weight {weight:g} depth {depth}",
                replace(chosen, brevity_weight=brevity, neighbour_window=window, neighbour_weight=weight, depth=depth),
                (-window, -depth),
            )
            for brevity, window, weight, depth in product(BREVITY_WEIGHTS, WINDOWS, WEIGHTS, DEPTHS)
            if (window == 0) == (weight == 0.0)
        )
        chosen = best_of(
            (
                f"time {time_weight:g} strip_periods {strip}",
                replace(chosen, time_weight=time_weight, strip_periods=strip),
                (-time_weight, -strip),
            )
            for time_weight, strip in product(TIME_WEIGHTS, (False, True))
        )
    print(
        f"\nranking chosen: brevity {chosen.brevity_weight}, window {chosen.neighbour_window}, "
        f"weight {chosen.neighbour_weight}, depth {chosen.depth}, time {chosen.time_weight}, "
        f"strip_periods {chosen.strip_periods}"
    )
    print(header)
    for mode, strip in product(("lexical", "hybrid"), (False, True)):
        print(line(f"{mode}, second stage, strip_periods {strip}", score(mode, chosen, strip=strip)))
    period_cases = [c for c in cases if c["has_periods"] and c["kind"] == "answerable"]
    print(f"(dev questions naming a period: {len({c['id'] for c in period_cases})})")

    # ---------------------------------------------------------------- 2. relevance
    relevance = {}
    for mode in ("lexical", "hybrid"):
        names = ["coverage", "cosine", "neighbour"] if mode == "hybrid" else ["coverage", "neighbour"]
        coefficients = dict(chosen.relevance[mode])
        for _ in range(4):
            samples = []
            trial = replace(chosen, relevance={**chosen.relevance, mode: coefficients})

            for case in select(mode, chosen.strip_periods):

                def observe(row, features, case=case, samples=samples, names=names):
                    label = int(case["kind"] == "answerable" and turns[row.record_id] in case["evidence"])
                    samples.append(([features[name] for name in names], label))

                run(case, trial, observe)
            weights = logistic_fit(samples)
            coefficients = {
                "bias": round(weights[0], 3),
                **{name: round(w, 3) for name, w in zip(names, weights[1:], strict=True)},
            }
            if coefficients["neighbour"] < 0:
                kept = [i for i, name in enumerate(names) if name != "neighbour"]
                weights = logistic_fit([([features[i] for i in kept], label) for features, label in samples])
                coefficients = {
                    "bias": round(weights[0], 3),
                    **{names[i]: round(w, 3) for i, w in zip(kept, weights[1:], strict=True)},
                }
                coefficients["neighbour"] = 0.0
                break
        relevance[mode] = coefficients
        print(f"relevance, {mode}: {coefficients} ({len(samples)} rows, {sum(label for _, label in samples)} evidence)")
    chosen = replace(chosen, relevance=relevance)

    # ---------------------------------------------------------------- 3. the floor
    print("\nthe floor's trade-off (dev): min_relevance | lexical hit@10, no-answer empty | hybrid hit@10, no-answer empty")
    runs = {mode: ranked(mode, chosen, chosen.strip_periods) for mode in ("lexical", "hybrid")}
    baseline = {mode: score(mode, chosen, runs=runs[mode])["summary"]["all"]["hit@10"] for mode in ("lexical", "hybrid")}
    best: dict[str, tuple[float, float]] = {}  # mode -> (no-answer share, floor) of the best floor within the bound
    for floor in FLOORS:
        results = {mode: score(mode, chosen, floor=floor, runs=runs[mode]) for mode in ("lexical", "hybrid")}
        hits = {mode: r["summary"]["all"]["hit@10"] for mode, r in results.items()}
        print(
            f"| {floor:.3f} | "
            + " | ".join(f"{100 * hits[m]:.1f} | {100 * results[m]['empty']:.1f}" for m in ("lexical", "hybrid"))
            + " |"
        )
        for mode in hits:
            if baseline[mode] - hits[mode] <= MAX_HIT_DROP + 1e-9:
                best[mode] = max(best.get(mode, (-1.0, 0.0)), (results[mode]["empty"], floor))
        if all(results[m]["empty"] >= 1.0 for m in results) or all(hits[m] == 0 for m in hits):
            break
    floors = {mode: found[1] for mode, found in best.items()}
    question, note = PARAPHRASE
    cosine = float(semantic.embed([note])[0] @ semantic.query_vector(question))
    hybrid = relevance["hybrid"]
    cap = 0.5 / (1 + math.exp(-(hybrid["bias"] + hybrid.get("cosine", 0.0) * cosine)))
    print(f"hybrid floor held under half a paraphrased note's relevance (cosine {cosine:.3f}): {cap:.4f}")
    floors["hybrid"] = min(floors["hybrid"], math.floor(cap * 10000) / 10000)
    # Lexically, a record that matches none of the query's words is judged by the bias alone; the
    # floor stays above that, so such records are never filler (whatever the bound allowed).
    nothing = 1 / (1 + math.exp(-relevance["lexical"]["bias"]))
    if floors["lexical"] <= nothing:
        floors["lexical"] = math.ceil(nothing * 1.05 * 10000) / 10000
        lexical_result = score("lexical", chosen, floor=floors["lexical"], runs=runs["lexical"])
        print(f"lexical floor raised over a record that matches nothing ({nothing:.4f}): {floors['lexical']}")
        print(line("lexical, that floor", lexical_result))
    chosen = replace(chosen, min_relevance=floors)
    floor_chosen = floors
    print(f"\nfloor chosen: {floor_chosen}")
    print(header)
    for mode in ("lexical", "hybrid"):
        print(line(f"{mode}, chosen", score(mode, chosen, floor=floor_chosen[mode])))
    recipe = {
        "rerank_depth": chosen.depth,
        "neighbour_window": chosen.neighbour_window,
        "neighbour_weight": chosen.neighbour_weight,
        "time_weight": chosen.time_weight,
        "brevity_weight": chosen.brevity_weight,
        "strip_periods": chosen.strip_periods,
        "semantic_common_share": chosen.common_share,
        "min_relevance": chosen.min_relevance,
        "relevance": chosen.relevance,
    }
    print("\nrecipe keys (memory.search.recipes.SECOND_STAGE_DEFAULTS):\n" + json.dumps(recipe, indent=1))
    assert all(math.isfinite(v) for mode in relevance.values() for v in mode.values())


if __name__ == "__main__":
    main()
