"""The labelled pairs in data/dedup_pairs.jsonl, written through the real write service and run
through the real proposal job: duplicate and conflict precision and recall of the proposals, and
no contradiction proposed as a duplicate.

Each pair gets its own subject, so its two records form one scope and a proposal can only be
about that pair. The "dev" split chose the thresholds and the contrast reading (swapped
alternatives: categories contradiction_order and reworded_order). The "holdout" split arrived
together with the detector and its lexicon, so it cannot be shown to be blind: the blind figures
come from data/dedup_blind_pairs.jsonl (test_dedup_blind.py). Run with -s to see the figures."""

import json
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from governance.dedup.jobs import propose_duplicates
from governance.models import DedupProposal
from memory.services import memory_write
from tests.conftest import memory_body

pytestmark = pytest.mark.django_db

PAIRS = [
    json.loads(line)
    for line in (Path(__file__).parent / "data" / "dedup_pairs.jsonl").read_text("utf-8").splitlines()
    if line.strip()
]


def test_the_labelled_set_is_large_varied_and_split():
    categories = Counter(pair["category"] for pair in PAIRS)
    assert len(PAIRS) >= 300
    assert len({pair["id"] for pair in PAIRS}) == len(PAIRS)
    assert set(categories) == {
        "exact",
        "normalised",
        "reworded",
        "reworded_order",
        "contradiction_value",
        "contradiction_number",
        "contradiction_negation",
        "contradiction_order",
        "unrelated",
    }
    assert min(categories.values()) >= 25
    assert {pair["split"] for pair in PAIRS} == {"dev", "holdout"}
    for pair in PAIRS:
        assert (pair["a"] == pair["b"]) == (pair["category"] == "exact"), pair["id"]
    # not one template repeated: most texts are distinct
    assert len({pair["b"] for pair in PAIRS}) > 0.9 * len(PAIRS)


def _ratio(numerator: int, denominator: int) -> float:
    return numerator / denominator if denominator else 1.0


def _scores(pairs: list[dict], predicted: dict[str, str]) -> dict[str, float]:
    tp = sum(1 for p in pairs if p["label"] == "duplicate" and predicted[p["id"]] == "duplicate")
    fp = sum(1 for p in pairs if p["label"] != "duplicate" and predicted[p["id"]] == "duplicate")
    fn = sum(1 for p in pairs if p["label"] == "duplicate" and predicted[p["id"]] != "duplicate")
    ctp = sum(1 for p in pairs if p["label"] == "contradiction" and predicted[p["id"]] == "conflict")
    cfp = sum(1 for p in pairs if p["label"] != "contradiction" and predicted[p["id"]] == "conflict")
    cfn = sum(1 for p in pairs if p["label"] == "contradiction" and predicted[p["id"]] != "conflict")
    return {
        "pairs": len(pairs),
        "duplicate_precision": _ratio(tp, tp + fp),
        "duplicate_recall": _ratio(tp, tp + fn),
        "contradictions_proposed_as_duplicates": sum(
            1 for p in pairs if p["label"] == "contradiction" and predicted[p["id"]] == "duplicate"
        ),
        "conflict_precision": _ratio(ctp, ctp + cfp),
        "conflict_recall": _ratio(ctp, ctp + cfn),
    }


def test_proposals_over_the_labelled_pairs_reach_the_required_precision_and_recall(credential):
    pair_of_record: dict = {}
    for pair in PAIRS:
        for side in ("a", "b"):
            body = memory_body(kind=pair["kind"], subject=f"{pair['subject']}#{pair['id']}", content=pair[side])
            record = memory_write(credential=credential, data=body).record
            assert record.status == "active"
            pair_of_record[record.pk] = pair["id"]

    counts = propose_duplicates(now=None, batch_size=97)  # a small batch: scopes straddle chunk boundaries
    assert counts["records"] == 2 * len(PAIRS)
    assert counts["scopes"] == len(PAIRS)

    predicted = {pair["id"]: "none" for pair in PAIRS}
    proposals = DedupProposal.objects.prefetch_related("drops")
    for proposal in proposals:
        members = {proposal.keep_id, *(drop.record_id for drop in proposal.drops.all())}
        pair_ids = {pair_of_record[record_id] for record_id in members}
        assert len(pair_ids) == 1 and len(members) == 2  # within one scope, one pair
        (pair_id,) = pair_ids
        assert predicted[pair_id] == "none", "a pair was proposed twice"
        predicted[pair_id] = proposal.category

    overall = _scores(PAIRS, predicted)
    by_split = {split: _scores([p for p in PAIRS if p["split"] == split], predicted) for split in ("dev", "holdout")}
    recall_by_category = defaultdict(lambda: [0, 0])
    for pair in PAIRS:
        expected = {"duplicate": "duplicate", "contradiction": "conflict", "distinct": "none"}[pair["label"]]
        recall_by_category[pair["category"]][0] += predicted[pair["id"]] == expected
        recall_by_category[pair["category"]][1] += 1
    print("\nDedup labelled set (proposals from propose_duplicates):")
    for name, scores in (("all", overall), *by_split.items()):
        print(
            f"  {name:8} "
            + "  ".join(f"{key}={value:.3f}" if isinstance(value, float) else f"{key}={value}" for key, value in scores.items())
        )
    print(
        "  per category (share proposed as expected): "
        + ", ".join(f"{category} {hit}/{total}" for category, (hit, total) in sorted(recall_by_category.items()))
    )

    for scores in (overall, *by_split.values()):
        assert scores["duplicate_precision"] >= 0.95
        assert scores["duplicate_recall"] >= 0.95
        assert scores["conflict_precision"] >= 0.95
        assert scores["conflict_recall"] >= 0.95
        assert scores["contradictions_proposed_as_duplicates"] == 0
    # swapped alternatives are conflicts, and the same choice said another way stays a duplicate
    assert recall_by_category["contradiction_order"][0] == recall_by_category["contradiction_order"][1]
    assert recall_by_category["reworded_order"][0] == recall_by_category["reworded_order"][1]

    # Re-running the job files nothing new: every group is already proposed.
    again = propose_duplicates(now=None, batch_size=2000)
    assert (again["duplicate_proposals"], again["conflict_proposals"]) == (0, 0)
    assert again["already_proposed"] == proposals.count()
