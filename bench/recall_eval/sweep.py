"""Tune hybrid fusion on the dev part, in process, over a database the harness kept.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/gm_eval_recall_eval \\
        .venv/bin/python -m bench.recall_eval.sweep --alphas 0.3,0.4,0.5,0.6,0.7

Run the harness first with `--config hybrid --part dev --keep`; this reads the records it wrote and
the semantic index it built. For each question the lexical ranking and the cosine similarities are
computed once, then fused by `memory.search.fusion.fuse` with each lexical share (ALPHA) in turn;
`--alphas 1` is the lexical ranking's head re-scored and `0` the semantic ranking with the priors.
With `--second-stage` the first stage stays as it is and the share varied is the second stage's,
on the query's scale (`memory.search.rerank.on_query_scale`), the recipe's other defaults applied.
Only the dev part: the blind part is never used to choose a setting (docs/recall-eval.md).
"""

import argparse
import os
from itertools import islice
from unittest import mock


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--alphas", default="0,0.2,0.3,0.4,0.5,0.6,0.7,0.8,1")
    parser.add_argument("--second-stage", action="store_true", help="vary the second stage's share, not the fusion's")
    args = parser.parse_args(argv)
    alphas = [float(value) for value in args.alphas.split(",")]

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    from django.utils import timezone

    from bench.recall_eval import dataset, metrics
    from bench.recall_eval.run import LIMIT, PURPOSE
    from memory.models import Agent, MemoryKind, MemoryRecord
    from memory.search import fusion, rerank, semantic
    from memory.search.build import serving_index
    from memory.search.models import IndexKind, IndexStatus, SearchIndex
    from memory.search.ranking import Scope, rank
    from memory.search.recipes import SECOND_STAGE_DEFAULTS

    data = dataset.load("dev")
    agent = Agent.objects.get(slug="evaluator")
    lexical_index = serving_index(None)
    semantic_index = SearchIndex.objects.get(kind=IndexKind.SEMANTIC, status=IndexStatus.ACTIVE)
    turns = dict(MemoryRecord.objects.filter(agent=agent).values_list("pk", "turn_id"))
    episodic = (MemoryKind.objects.get(name="episodic").pk,)
    now = timezone.now()
    settings = rerank.Settings.of(SECOND_STAGE_DEFAULTS)

    def ranked(head, similarity, records, idfs, alpha):
        if not args.second_stage:
            with mock.patch.object(fusion, "ALPHA", alpha):
                return list(islice(fusion.fuse(iter(head), similarity, now=now), LIMIT))
        fused = fusion.Fusion(iter(head), similarity, now=now)
        query = rerank.Query(idfs=idfs, mode="hybrid")
        with mock.patch.object(rerank, "ALPHA", alpha):
            rows = rerank.rerank(iter(fused), settings=settings, query=query, records=records, now=now, fusion=fused)
            return list(islice(rows, LIMIT))

    scored: dict[float, list[dict]] = {alpha: [] for alpha in alphas}
    for conv in data["conversations"]:
        scope = Scope(
            tenant_id=agent.tenant_id, agent_id=agent.pk, purpose=PURPOSE, now=now, subject=conv["subject"], kind_ids=episodic
        )
        records = rerank.ListedRecords(MemoryRecord.objects.filter(agent=agent, subject=conv["subject"]).select_related("kind"))
        for question in conv["questions"]:
            lexical_ranking = rank(lexical_index, scope, question["question"])
            head = list(islice(iter(lexical_ranking), fusion.DEPTH + LIMIT))
            similarity = semantic.similar(semantic_index, scope, question["question"], depth=fusion.DEPTH)
            for alpha in alphas:
                rows = ranked(head, similarity, records, dict(lexical_ranking.idfs), alpha)
                ranking = [turns[row.record_id] for row in rows]
                scored[alpha].append({"category": question["category"], **metrics.score_question(ranking, question["evidence"])})
    print("| lexical share | hit@5 % | hit@10 % | MRR | " + " | ".join(f"{c} hit@10" for c in dataset.CATEGORIES) + " |")
    for alpha in alphas:
        summary = metrics.summarise(scored[alpha], dataset.CATEGORIES)
        overall = summary["all"]
        cells = " | ".join(f"{100 * summary[c]['hit@10']:.1f}" for c in dataset.CATEGORIES)
        print(f"| {alpha:g} | {100 * overall['hit@5']:.1f} | {100 * overall['hit@10']:.1f} | {overall['mrr']:.3f} | {cells} |")


if __name__ == "__main__":
    main()
