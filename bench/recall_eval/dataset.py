"""The evaluation set on disk: loading, the frozen hashes, and integrity checks.

The blind part was frozen before any ranking ran on it: its sha256 below was committed together
with the data file in a commit of its own. The harness refuses to report blind figures for a file
whose hash differs, so the blind part cannot drift towards whatever the ranking of the day does
well. The dev part is for tuning; a changed dev file is reported as such, not refused.

Each part has a no-answer companion (`dev-noanswer.json`, `blind-noanswer.json`): questions about
the same conversations that no turn answers, in files of their own so that the answerable parts
and the figures measured on them stay as they were. The blind one is frozen the same way.

Each part also has two extra parts of conversations of their own, frozen the same way: reply
(`dev-reply.json`, `blind-reply.json`), whose questions are answered by the reply to the turn that
holds the question's words (category `reply`), and dated (`dev-dated.json`, `blind-dated.json`),
whose questions name the date of one of many alike turns (category `dated`).
"""

import hashlib
import json
import re
from functools import cache
from pathlib import Path

DATA_DIR = Path(__file__).resolve().parent / "data"
PARTS = ("dev", "blind")
NOANSWER_PARTS = {"dev": "dev-noanswer", "blind": "blind-noanswer"}
EXTRA_PARTS = {"dev": ("dev-reply", "dev-dated"), "blind": ("blind-reply", "blind-dated")}
BLIND_PARTS = (
    "blind",
    "blind-noanswer",
    "blind-reply",
    "blind-dated",
)  # refused, not only reported, when they differ from the frozen file
FROZEN_SHA256 = {
    "dev": "54101a4b56f0c0c874457a6da953c156d67d53847c672fea677a0d582101beb7",
    "blind": "77234be3ecc25120f1906965e96fe024059005951f0793598981aa3cb3ab1d22",
    "dev-noanswer": "faca9732cb3e3cdf60235732663254aed22202383aa513b977ba2717c24362f6",
    "blind-noanswer": "06333de2d51aaa511710dfd0def50dfda48a8e1c38a9832c264c1dc7b07af881",
    "dev-reply": "9073c47d33e5ba4e9a17d98c1a42b9613bc5d5c9ed77df795c1837fac7ec510c",
    "blind-reply": "b7565922939f0ecdfd9d4a18d48275246971434a19a3c74cd52f9123d8b0bf6b",
    "dev-dated": "88c3612c614cf84ab1e56190e40e8a7e6f81ebb575363859535989cedce8d069",
    "blind-dated": "9156f40f7fa76a4fdcea27b763c787fefa1e345f46bcd625f210fd100ace3db8",
}
CATEGORIES = ("single-fact", "multi-hop", "temporal", "open")
# The categories of the extra parts: the answer is in the reply to the turn with the question's
# words (reply); the question names the date of one of many alike turns (dated).
EXTRA_CATEGORIES = ("reply", "dated")
NOANSWER_CATEGORY = "no-answer"
# How a no-answer question misleads: (a) a topic nobody talked about; (b) a topic only the partner
# has, or one the speaker has but with a value nobody said; (c) words shared with a filler turn.
TRAPS = ("absent-topic", "other-speaker", "other-value", "near-miss")


class BlindSetChanged(Exception):
    pass


def data_path(part: str) -> Path:
    return DATA_DIR / f"{part}.json"


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def load(part: str, path: Path | None = None) -> dict:
    """The part's data; the blind part only if its file is the frozen one."""
    path = path or data_path(part)
    digest = sha256_of(path)
    if part in BLIND_PARTS and digest != FROZEN_SHA256[part]:
        raise BlindSetChanged(
            f"{path} has sha256 {digest}, but the frozen blind set is {FROZEN_SHA256[part]}. "
            "Blind figures are only reported on the frozen file; restore it from git."
        )
    data = json.loads(path.read_bytes())
    data["sha256"] = digest
    data["frozen"] = digest == FROZEN_SHA256[part]
    return data


def load_noanswer(part: str) -> dict:
    """The no-answer questions of a part ("dev" or "blind"); the blind ones only if frozen."""
    return load(NOANSWER_PARTS[part])


def load_extra(part: str) -> dict[str, dict]:
    """The extra parts of a part ("dev" or "blind") by name (`dev-reply`, `dev-dated`); the blind
    ones only if frozen."""
    return {name: load(name) for name in EXTRA_PARTS[part]}


def turn_content(turn: dict) -> str:
    """A turn as it is written to memory: prefixed by its speaker, as in the public benchmark."""
    return f"{turn['speaker']}: {turn['text']}"


def integrity_problems(data: dict) -> list[str]:
    """Everything wrong with a part's structure (empty when it is sound)."""
    problems = []
    seen_turns: set[str] = set()
    seen_questions: set[str] = set()
    for conv in data["conversations"]:
        turn_ids = set()
        for session in conv["sessions"]:
            if not session["turns"]:
                problems.append(f"{session['id']}: no turns")
            for turn in session["turns"]:
                if turn["id"] in seen_turns:
                    problems.append(f"{turn['id']}: duplicate turn id")
                seen_turns.add(turn["id"])
                turn_ids.add(turn["id"])
                if turn["speaker"] not in conv["speakers"]:
                    problems.append(f"{turn['id']}: speaker {turn['speaker']!r} is not in the conversation")
        for question in conv["questions"]:
            if question["id"] in seen_questions:
                problems.append(f"{question['id']}: duplicate question id")
            seen_questions.add(question["id"])
            if question["category"] not in (*CATEGORIES, *EXTRA_CATEGORIES):
                problems.append(f"{question['id']}: unknown category {question['category']!r}")
            if not question["evidence"]:
                problems.append(f"{question['id']}: no evidence")
            for turn_id in question["evidence"]:
                if turn_id not in turn_ids:  # evidence lies in the question's own conversation
                    problems.append(f"{question['id']}: evidence {turn_id} is not a turn of {conv['id']}")
            if question["category"] == "multi-hop" and len(question["evidence"]) < 2:
                problems.append(f"{question['id']}: a multi-hop question needs two or more evidence turns")
    return problems


# --------------------------------------------------------------------------------------------
# no-answer questions


@cache
def _term_pattern(term: str) -> re.Pattern:
    """A whole word or phrase, any case, with a plural, verb or possessive ending; `stem*` matches
    any word the stem begins."""
    if term.endswith("*"):
        return re.compile(r"(?<!\w)" + re.escape(term[:-1]), re.IGNORECASE)
    return re.compile(r"(?<!\w)" + re.escape(term) + r"(?:s|es|ed|ing|er|ers|'s)?(?!\w)", re.IGNORECASE)


def mentions(text: str, term: str) -> bool:
    return _term_pattern(term).search(text) is not None


def noanswer_violations(conv: dict, question: dict) -> list[str]:
    """The turns that might answer a no-answer question: those in its scope that contain one of its
    terms. The scope is every turn of the conversation, or, when the check names a speaker, that
    speaker's turns and the turns that name them; the near-miss turns the question was built on are
    listed in `near` and known not to answer. Empty when no turn can answer."""
    check = question["check"]
    speaker, near = check["speaker"], set(check["near"])
    found = []
    for session in conv["sessions"]:
        for turn in session["turns"]:
            if turn["id"] in near:
                continue
            if speaker and turn["speaker"] != speaker and not mentions(turn["text"], speaker):
                continue
            if any(mentions(turn["text"], term) for term in check["terms"]):
                found.append(turn["id"])
    return found


def topic_base(topic: str) -> str:
    """An answerable question's topic without its variant (`home_city.latest` -> `home_city`)."""
    return topic.split(".", 1)[0]


def noanswer_problems(noanswer: dict, data: dict) -> list[str]:
    """Everything wrong with a no-answer part checked against its conversations (empty when sound):
    it was built on this very file, every question has no evidence and a known trap, and no turn in
    its scope contains a word an answer would need."""
    problems = []
    if noanswer.get("conversations_sha256") != data.get("sha256"):
        problems.append(f"built on conversations {noanswer.get('conversations_sha256')}, not on {data.get('sha256')}")
    conversations = {conv["id"]: conv for conv in data["conversations"]}
    seen: set[str] = set()
    for entry in noanswer["conversations"]:
        conv = conversations.get(entry["id"])
        if conv is None or (entry["subject"], entry["speakers"]) != (conv["subject"], conv["speakers"]):
            problems.append(f"{entry['id']}: not a conversation of this part")
            continue
        turn_ids = {turn["id"] for session in conv["sessions"] for turn in session["turns"]}
        held = {(topic_base(q["topic"]), q["about"]) for q in conv["questions"]}
        asked = {q["question"] for q in conv["questions"]}
        for question in entry["questions"]:
            qid = question["id"]
            if qid in seen or not qid.startswith(conv["id"] + "-"):
                problems.append(f"{qid}: duplicate or misplaced question id")
            seen.add(qid)
            if question["category"] != NOANSWER_CATEGORY or question["trap"] not in TRAPS:
                problems.append(f"{qid}: category {question['category']!r}, trap {question['trap']!r}")
            if question["evidence"] or question["answer"] is not None:
                problems.append(f"{qid}: a no-answer question has evidence or an answer")
            if question["about"] not in conv["speakers"] or question["question"] in asked:
                problems.append(f"{qid}: about someone else, or the same text as an answerable question")
            if not question["check"]["terms"] or not set(question["check"]["near"]) <= turn_ids:
                problems.append(f"{qid}: no terms to check, or near-miss turns that are not in {conv['id']}")
            if (question["trap"] == "near-miss") != bool(question["check"]["near"]):
                problems.append(f"{qid}: near-miss turns on a question that is not a near miss, or none on one")
            topic = question["topic"]
            if question["trap"] == "absent-topic" and any(t == topic for t, _ in held):
                problems.append(f"{qid}: topic {topic} is talked about in {conv['id']}")
            if question["trap"] == "other-speaker" and (topic, question["about"]) in held:
                problems.append(f"{qid}: {question['about']} has topic {topic}")
            answering = noanswer_violations(conv, question)
            if answering:
                problems.append(f"{qid}: turns {answering[:3]} may answer it")
    return problems
