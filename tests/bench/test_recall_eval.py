"""The recall evaluation set and its metrics, without a server: the data files are the frozen ones,
the set is sound and large enough, the harness refuses a changed blind set, and hit@k / MRR are
computed as documented."""

import json
import shutil
from collections import Counter
from datetime import UTC, datetime

import pytest

from bench.recall_eval import dataset, dated, generate, metrics, noanswer, reply, run
from bench.recall_eval import templates_dated as D

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


# --------------------------------------------------------------------------------------------
# the no-answer part


@pytest.fixture(scope="module")
def noanswer_parts() -> dict[str, dict]:
    return {part: dataset.load_noanswer(part) for part in dataset.PARTS}


def test_noanswer_files_are_frozen_and_reproduced(noanswer_parts):
    for part, data in noanswer_parts.items():
        assert data["sha256"] == dataset.FROZEN_SHA256[dataset.NOANSWER_PARTS[part]], part
        assert data["frozen"]
    for name, data in noanswer.generate(generate.generate(), generate.serialise).items():
        assert generate.serialise(data) == dataset.data_path(name).read_bytes(), name


def test_noanswer_set_is_sound(parts, noanswer_parts):
    for part, data in noanswer_parts.items():
        assert dataset.noanswer_problems(data, parts[part]) == [], part
        assert [conv["id"] for conv in data["conversations"]] == [conv["id"] for conv in parts[part]["conversations"]]
        questions = [q for conv in data["conversations"] for q in conv["questions"]]
        assert len(questions) == 40, part
        assert {q["trap"] for q in questions} == set(dataset.TRAPS)
        assert all(q["evidence"] == [] and q["category"] == "no-answer" for q in questions)
        for conv in data["conversations"]:  # both speakers are asked about
            assert {q["about"] for q in conv["questions"]} == set(conv["speakers"]), conv["id"]


def test_noanswer_check_finds_a_turn_that_answers(parts, noanswer_parts):
    data = json.loads(json.dumps(parts["dev"]))
    conversations = {conv["id"]: conv for conv in data["conversations"]}
    questions = [q for conv in noanswer_parts["dev"]["conversations"] for q in conv["questions"]]
    absent = next(q for q in questions if q["trap"] == "absent-topic")
    other = next(q for q in questions if q["trap"] == "other-speaker")
    near = next(q for q in questions if q["trap"] == "near-miss")
    for question in (absent, other, near):
        assert dataset.noanswer_violations(conversations[question["id"][:5]], question) == []

    # A turn that says the thing asked is found, whoever says it, in any inflection of the term.
    conv = conversations[absent["id"][:5]]
    term = absent["check"]["terms"][0].rstrip("*")
    conv["sessions"][3]["turns"].append({"id": "answer-1", "speaker": conv["speakers"][0], "text": f"Oh, {term}s for sure."})
    assert dataset.noanswer_violations(conv, absent) == ["answer-1"]

    # For a question about one speaker, the partner's own fact is out of scope, unless it names the speaker.
    conv = conversations[other["id"][:5]]
    partner = next(s for s in conv["speakers"] if s != other["about"])
    value = other["check"]["terms"][0].rstrip("*")
    turns = conv["sessions"][2]["turns"]
    turns.append({"id": "partner-own", "speaker": partner, "text": f"Mine is {value}, always has been."})
    assert dataset.noanswer_violations(conv, other) == []
    turns.append({"id": "partner-names", "speaker": partner, "text": f"{other['about']}, yours is {value} too, right?"})
    turns.append({"id": "speaker-own", "speaker": other["about"], "text": f"Me? {value}."})
    assert dataset.noanswer_violations(conv, other) == ["partner-names", "speaker-own"]

    # A near miss allows its own filler turns and nothing else with its words.
    conv = conversations[near["id"][:5]]
    anchor = near["check"]["terms"][0].rstrip("*")
    conv["sessions"][0]["turns"].append({"id": "answer-2", "speaker": near["about"], "text": f"About that {anchor}: solved."})
    assert dataset.noanswer_violations(conv, near) == ["answer-2"]
    assert any(near["id"] in p and "may answer" in p for p in dataset.noanswer_problems(noanswer_parts["dev"], data))


def test_changed_blind_noanswer_set_is_refused(tmp_path, monkeypatch):
    for name in ("dev", "blind", "dev-noanswer"):
        shutil.copy(dataset.data_path(name), tmp_path / f"{name}.json")
    raw = dataset.data_path("blind-noanswer").read_bytes()
    (tmp_path / "blind-noanswer.json").write_bytes(raw.replace(b'"question": "', b'"question": "Really, ', 1))
    monkeypatch.setattr(dataset, "DATA_DIR", tmp_path)
    with pytest.raises(dataset.BlindSetChanged, match="frozen blind set"):
        dataset.load_noanswer("blind")
    with pytest.raises(SystemExit, match="refusing to report blind figures"):
        run.main(["--part", "blind"])
    assert dataset.load("blind")["frozen"] and dataset.load_noanswer("dev")["frozen"]


def test_noanswer_metrics_on_hand_made_results():
    rows = [  # (trap, relevance of each returned item, best first; None when recall reports none)
        ("absent-topic", []),
        ("absent-topic", [0.4, 0.1]),
        ("other-speaker", [None, None, None]),
        ("near-miss", []),
        ("near-miss", [0.9]),
    ]
    scored = [{"trap": trap, "returned": len(values), "relevance": [v for v in values if v is not None]} for trap, values in rows]
    summary = metrics.summarise_noanswer(scored, dataset.TRAPS)
    assert summary["absent-topic"] == {"n": 2, "empty": 0.5, "mean_returned": 1.0, "relevance_n": 1, "top_relevance": 0.4}
    assert summary["other-speaker"]["empty"] == 0.0 and summary["other-speaker"]["relevance_n"] == 0
    assert summary["other-speaker"]["top_relevance"] is None
    assert summary["other-value"] == {"n": 0, "empty": None, "mean_returned": None, "relevance_n": 0, "top_relevance": None}
    overall = summary["all"]
    assert overall["n"] == 5 and overall["empty"] == pytest.approx(2 / 5) and overall["mean_returned"] == pytest.approx(6 / 5)
    assert overall["relevance_n"] == 2 and overall["top_relevance"] == pytest.approx((0.4 + 0.9) / 2)


class FakeServer:
    """Answers recall with canned items: none for one question, two with a relevance for the rest."""

    call_timeout = 1.0

    def __init__(self):
        self.bodies = []

    def call(self, method, path, token, body, timeout):
        self.bodies.append(body)
        if len(self.bodies) == 1:
            return 200, {"items": [], "tokens_used": 0, "omitted_for_budget": 0, "below_floor": 10}
        items = [
            {"id": "r1", "score": 2.0, "relevance": 0.3, "provenance": {"turn_id": "t1"}},
            {"id": "r2", "score": 1.0, "relevance": 0.2, "provenance": None},
        ]
        return 200, {"items": items, "tokens_used": 9, "omitted_for_budget": 0}


def test_harness_records_what_recall_returned_for_no_answer_questions(noanswer_parts):
    server = FakeServer()
    result = run.evaluate_noanswer(server, "token", noanswer_parts["dev"], {"r2": "t2"}, {"min_relevance": 0.5})
    first = noanswer_parts["dev"]["conversations"][0]
    assert server.bodies[0]["subject"] == first["subject"] and server.bodies[0]["min_relevance"] == 0.5
    assert server.bodies[0]["query"] == first["questions"][0]["question"] and server.bodies[0]["limit"] == run.LIMIT
    rows = result["questions"]
    assert len(rows) == 40 and result["frozen"]
    assert rows[0]["returned"] == 0 and rows[0]["response"]["below_floor"] == 10
    assert rows[1]["returned"] == 2 and rows[1]["relevance"] == [0.3, 0.2] and rows[1]["ranking"] == ["t1", "t2"]
    assert result["summary"]["all"]["empty"] == pytest.approx(1 / 40)
    assert result["summary"]["all"]["top_relevance"] == pytest.approx(0.3)
    table = run.noanswer_table({"noanswer": {"dev": result}})
    assert result["summary"]["all"]["mean_returned"] == pytest.approx(78 / 40)
    assert "| dev | **all** | 40 | 2.5 | 1.9 | 39 | 0.300 |" in table


def test_recall_field_passes_min_relevance_through():
    assert run.parse_pairs(["min_relevance=0.35", "explain=true"], as_json=True) == {"min_relevance": 0.35, "explain": True}


# --------------------------------------------------------------------------------------------
# the extra parts: reply and dated


@pytest.fixture(scope="module")
def extra_parts() -> dict[str, dict]:
    return {name: data for part in dataset.PARTS for name, data in dataset.load_extra(part).items()}


def test_extra_files_are_frozen_reproduced_and_sound(parts, extra_parts):
    generated = {**reply.generate(), **dated.generate()}
    assert set(generated) == set(extra_parts) == {name for names in dataset.EXTRA_PARTS.values() for name in names}
    subjects = {conv["subject"] for data in parts.values() for conv in data["conversations"]}
    for name, data in extra_parts.items():
        assert data["frozen"] and data["sha256"] == dataset.FROZEN_SHA256[name], name
        assert generate.serialise(generated[name]) == dataset.data_path(name).read_bytes(), name
        assert dataset.integrity_problems(data) == [], name
        questions = [q for conv in data["conversations"] for q in conv["questions"]]
        category = name.split("-")[1]
        assert len(questions) >= 30 and {q["category"] for q in questions} == {category}, name
        for conv in data["conversations"]:
            assert conv["subject"] not in subjects, conv["id"]  # conversations of their own
            subjects.add(conv["subject"])


def test_reply_answers_share_no_word_with_their_question_and_follow_a_turn_that_does(extra_parts):
    for conv in extra_parts["dev-reply"]["conversations"]:
        names = {name.lower() for name in conv["speakers"]}
        turns = [turn for session in conv["sessions"] for turn in session["turns"]]
        place = {turn["id"]: i for i, turn in enumerate(turns)}
        for question in conv["questions"]:
            (evidence,) = question["evidence"]
            answer = turns[place[evidence]]
            assert reply.overlap(question["question"], answer["text"], names) == set(), question["id"]
            before = [turns[place[evidence] - d]["text"] for d in (1, 2)]
            assert any(reply.overlap(question["question"], text, names) for text in before), question["id"]


def test_reply_overlap_check_catches_a_shared_stem():
    assert reply.overlap("Why did Anouk quit the job?", "Anouk: I quit because of the jobs.", {"anouk"}) == {"quit", "job"}
    assert reply.overlap("Why did Anouk quit the job?", "The commute was two hours each way.", {"anouk"}) == set()


def test_dated_questions_name_the_period_their_evidence_was_observed_in(extra_parts):
    from memory.search.periods import named_periods

    now = datetime(2026, 12, 3, tzinfo=UTC)
    for conv in extra_parts["dev-dated"]["conversations"]:
        observed = {turn["id"]: datetime.fromisoformat(s["date"]) for s in conv["sessions"] for turn in s["turns"]}
        texts = {turn["id"]: turn["text"] for s in conv["sessions"] for turn in s["turns"]}
        for question in conv["questions"]:
            (period,) = named_periods(question["question"], now=now)
            inside = {turn for turn, at in observed.items() if period.start <= at < period.end}
            assert set(question["evidence"]) <= inside, question["id"]
            # the same topic's turns outside the period match the question's words as well
            topic = question["topic"].split(".")[0]
            says = {text.split("{value}")[0] for text in D.DATED_TOPICS[topic]["says"]}
            alike = [t for t, text in texts.items() if t not in inside and any(text.startswith(s) for s in says if s)]
            assert len(alike) >= 5, question["id"]


def test_dated_period_check():
    named = datetime(2023, 5, 17, 10, 0)  # a Wednesday
    assert dated.within("day", named, datetime(2023, 5, 17, 23, 0)) and not dated.within("day", named, datetime(2023, 5, 18))
    assert dated.within("week", named, datetime(2023, 5, 15)) and not dated.within("week", named, datetime(2023, 5, 22))
    assert dated.within("month", named, datetime(2023, 5, 1)) and not dated.within("month", named, datetime(2023, 6, 1))


@pytest.mark.parametrize("name", ["blind-reply", "blind-dated"])
def test_changed_blind_extra_part_is_refused(tmp_path, monkeypatch, name):
    for other in ("dev", "blind", "dev-noanswer", "blind-noanswer", "dev-reply", "blind-reply", "dev-dated", "blind-dated"):
        if other != name:
            shutil.copy(dataset.data_path(other), tmp_path / f"{other}.json")
    raw = dataset.data_path(name).read_bytes()
    (tmp_path / f"{name}.json").write_bytes(raw.replace(b'"question": "', b'"question": "Really, ', 1))
    monkeypatch.setattr(dataset, "DATA_DIR", tmp_path)
    with pytest.raises(dataset.BlindSetChanged, match="frozen blind set"):
        dataset.load_extra("blind")
    with pytest.raises(SystemExit, match="refusing to report blind figures"):
        run.main(["--part", "blind"])
    assert all(data["frozen"] for data in dataset.load_extra("dev").values())
