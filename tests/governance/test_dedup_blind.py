"""The blind hold-out for dedup: data/dedup_blind_pairs.jsonl, 150 pairs of agent-memory claims
(preferences, facts, procedures, schedules; 50 duplicates, 50 conflicts, 50 distinct claims about
one subject), written from how people phrase such things, not from the detector's word lists, and
committed alone ("Blind dedup hold-out set, frozen before evaluation") before the detector first
ran on it. Its sha256 is pinned below, so a pair cannot be edited to fit the detector.

Each pair is written through the real write service under its own subject and run through the
real proposal job. The thresholds are set a little under what the detector reached on its first
run over the set (figures in docs/benchmarks.md); they guard against regressions, they are not
targets met by tuning. Run with -s to see the figures and the pairs it gets wrong."""

import hashlib
import json
from collections import Counter
from pathlib import Path

import pytest

from governance.dedup.jobs import propose_duplicates
from governance.models import DedupProposal
from memory.services import memory_write
from tests.conftest import memory_body

pytestmark = pytest.mark.django_db

BLIND_FILE = Path(__file__).parent / "data" / "dedup_blind_pairs.jsonl"
BLIND_SHA256 = "e8c9e74362e750560427d9f68c9e92803429786b3ba8b429bae6b36610456e80"
PAIRS = [json.loads(line) for line in BLIND_FILE.read_text("utf-8").splitlines() if line.strip()]
EXPECTED = {"duplicate": "duplicate", "conflict": "conflict", "distinct": "none"}


def test_the_blind_set_is_the_one_frozen_before_evaluation():
    assert hashlib.sha256(BLIND_FILE.read_bytes()).hexdigest() == BLIND_SHA256
    assert len(PAIRS) == 150 and len({pair["id"] for pair in PAIRS}) == 150
    assert Counter(pair["label"] for pair in PAIRS) == {"duplicate": 50, "conflict": 50, "distinct": 50}


def _precision_recall(predicted: dict[str, str], category: str) -> tuple[float, float]:
    hits = sum(1 for pair in PAIRS if EXPECTED[pair["label"]] == category and predicted[pair["id"]] == category)
    proposed = sum(1 for pair in PAIRS if predicted[pair["id"]] == category)
    expected = sum(1 for pair in PAIRS if EXPECTED[pair["label"]] == category)
    return hits / proposed if proposed else 1.0, hits / expected


def test_proposals_over_the_blind_pairs(credential):
    pair_of_record = {}
    for pair in PAIRS:
        for side in ("a", "b"):
            body = memory_body(kind=pair["kind"], subject=f"{pair['subject']}#{pair['id']}", content=pair[side])
            record = memory_write(credential=credential, data=body).record
            assert record.status == "active"
            pair_of_record[record.pk] = pair["id"]

    counts = propose_duplicates(now=None, batch_size=500)
    assert counts["scopes"] == len(PAIRS)

    predicted = {pair["id"]: "none" for pair in PAIRS}
    for proposal in DedupProposal.objects.prefetch_related("drops"):
        (pair_id,) = {pair_of_record[proposal.keep_id], *(pair_of_record[drop.record_id] for drop in proposal.drops.all())}
        predicted[pair_id] = proposal.category

    duplicate_precision, duplicate_recall = _precision_recall(predicted, "duplicate")
    conflict_precision, conflict_recall = _precision_recall(predicted, "conflict")
    confusion = Counter((pair["label"], predicted[pair["id"]]) for pair in PAIRS)
    print(
        f"\nBlind dedup set ({len(PAIRS)} pairs): duplicate precision {duplicate_precision:.3f} recall "
        f"{duplicate_recall:.3f}; conflict precision {conflict_precision:.3f} recall {conflict_recall:.3f}"
    )
    print("  label -> proposed: " + ", ".join(f"{label}->{got} {n}" for (label, got), n in sorted(confusion.items())))
    for pair in PAIRS:
        if predicted[pair["id"]] != EXPECTED[pair["label"]]:
            print(f"  {pair['id']} {pair['label']:9} proposed {predicted[pair['id']]:9} {pair['a']} | {pair['b']}")

    # First run over the frozen set: duplicates 41 of 43 proposed right (0.953), 41 of 50 found
    # (0.820); conflicts 46 of 53 (0.868), 46 of 50 (0.920); 2 conflicts proposed as duplicates.
    # The thresholds come from that run. It showed two bugs in the contrast reading ("prefers X to
    # Y" was not read when Y began with a function word; a swap whose shared words were all on the
    # sides was judged on the words around them), fixed with dev pairs d313-d318; since then (no
    # longer blind for those two fixes):
    # duplicates 0.976 / 0.820, conflicts 0.873 / 0.960, 1 conflict proposed as a duplicate.
    assert duplicate_precision >= 0.93
    assert duplicate_recall >= 0.80
    assert conflict_precision >= 0.85
    assert conflict_recall >= 0.90
    assert confusion[("conflict", "duplicate")] <= 2
