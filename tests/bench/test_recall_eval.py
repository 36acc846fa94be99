"""The recall evaluation set and its metrics, without a server: the data files are the frozen ones,
the set is sound and large enough, the harness refuses a changed blind set, and hit@k / MRR are
computed as documented."""

import json
import shutil
from collections import Counter

import pytest

from bench.recall_eval import dataset, generate, metrics, run

MINIMUM_PER_CATEGORY = {"single-fact": 100, "multi-hop": 60, "temporal": 80, "open": 80}


@pytest.fixture(scope="module")
def parts() -> dict[str, dict]:
    return {part: dataset.load(part) for part in dataset.PARTS}


def test_data_files_are_the_frozen_ones(parts):
    for part, data in parts.items():
        assert data["sha256"] == dataset.FROZEN_SHA256[part], part
        assert data["frozen"]


def test_generator_reproduces_the_committed_data():
    for part, data in generate.generate().items():
        assert generate.serialise(data) == dataset.data_path(part).read_bytes(), part


def test_set_is_sound_and_large_enough(parts):
    categories = Counter()
    subjects = set()
    for part, data in parts.items():
        assert dataset.integrity_problems(data) == [], part
        for conv in data["conversations"]:
            subjects.add(conv["subject"])
            dates = [session["date"] for session in conv["sessions"]]
            assert len(dates) >= 5 and dates == sorted(dates), conv["id"]
            categories.update(question["category"] for question in conv["questions"])
    assert len(subjects) == sum(len(data["conversations"]) for data in parts.values())  # one subject each
    assert sum(categories.values()) >= 300
    for category, minimum in MINIMUM_PER_CATEGORY.items():
        assert categories[category] >= minimum, (category, categories)
    for data in parts.values():  # both parts hold every category
        assert {q["category"] for conv in data["conversations"] for q in conv["questions"]} == set(dataset.CATEGORIES)


def test_integrity_check_names_evidence_outside_the_conversation(parts):
    data = json.loads(json.dumps(parts["dev"]))
    first, second = data["conversations"][:2]
    first["questions"][0]["evidence"] = [second["sessions"][0]["turns"][0]["id"]]
    first["questions"][1]["evidence"] = ["no-such-turn"]
    problems = dataset.integrity_problems(data)
    assert len(problems) == 2
    assert first["questions"][0]["id"] in problems[0] and "not a turn of" in problems[0]


@pytest.fixture
def changed_blind(tmp_path, monkeypatch):
    shutil.copy(dataset.data_path("dev"), tmp_path / "dev.json")
    raw = dataset.data_path("blind").read_bytes()
    (tmp_path / "blind.json").write_bytes(raw.replace(b'"question": "', b'"question": "Really, ', 1))
    monkeypatch.setattr(dataset, "DATA_DIR", tmp_path)
    return tmp_path / "blind.json"


def test_changed_blind_set_is_refused(changed_blind):
    with pytest.raises(dataset.BlindSetChanged, match="frozen blind set"):
        dataset.load("blind")
    # The harness stops before it creates a database or starts a server.
    with pytest.raises(SystemExit, match="refusing to report blind figures"):
        run.main(["--part", "both"])
    assert dataset.load("dev")["frozen"]  # a dev part is still loaded


def test_metrics_on_a_hand_made_ranking():
    ranking = list("abcdefghij")
    cases = [  # (category, ranking, evidence)
        ("single-fact", ranking, ["c"]),  # rank 3
        ("single-fact", ranking, ["h"]),  # rank 8: a hit at 10, not at 5
        ("multi-hop", ranking, ["x", "b"]),  # rank 2, one of two evidence turns returned
        ("multi-hop", ranking, ["j", "a"]),  # rank 1, both returned
        ("temporal", ranking, ["z"]),  # not returned
        ("open", ["q", "r"], ["q"]),  # a short ranking
    ]
    scored = [{"category": category, **metrics.score_question(r, evidence)} for category, r, evidence in cases]
    assert [s["rank"] for s in scored] == [3, 8, 2, 1, None, 1]
    assert [s["hit@5"] for s in scored] == [True, False, True, True, False, True]
    assert [s["hit@10"] for s in scored] == [True, True, True, True, False, True]
    assert scored[2]["evidence_in_top10"] == 1 and scored[3]["evidence_in_top10"] == 2

    summary = metrics.summarise(scored, dataset.CATEGORIES)
    assert summary["single-fact"]["n"] == 2
    assert summary["single-fact"]["hit@5"] == 0.5 and summary["single-fact"]["hit@10"] == 1.0
    assert summary["single-fact"]["mrr"] == pytest.approx((1 / 3 + 1 / 8) / 2)
    assert summary["multi-hop"]["mrr"] == pytest.approx(0.75)
    assert summary["multi-hop"]["multi_n"] == 2 and summary["multi-hop"]["all_evidence@10"] == 0.5
    assert summary["temporal"]["hit@10"] == 0.0 and summary["temporal"]["mrr"] == 0.0
    assert summary["open"]["all_evidence@10"] is None
    overall = summary["all"]
    assert overall["n"] == 6
    assert overall["hit@5"] == pytest.approx(4 / 6) and overall["hit@10"] == pytest.approx(5 / 6)
    assert overall["mrr"] == pytest.approx((1 / 3 + 1 / 8 + 1 / 2 + 1 + 0 + 1) / 6)
