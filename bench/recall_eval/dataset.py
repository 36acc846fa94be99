"""The evaluation set on disk: loading, the frozen hashes, and integrity checks.

The blind part was frozen before any ranking ran on it: its sha256 below was committed together
with the data file in a commit of its own. The harness refuses to report blind figures for a file
whose hash differs, so the blind part cannot drift towards whatever the ranking of the day does
well. The dev part is for tuning; a changed dev file is reported as such, not refused.
"""

import hashlib
import json
from pathlib import Path

DATA_DIR = Path(__file__).resolve().parent / "data"
PARTS = ("dev", "blind")
FROZEN_SHA256 = {
    "dev": "54101a4b56f0c0c874457a6da953c156d67d53847c672fea677a0d582101beb7",
    "blind": "77234be3ecc25120f1906965e96fe024059005951f0793598981aa3cb3ab1d22",
}
CATEGORIES = ("single-fact", "multi-hop", "temporal", "open")


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
    if part == "blind" and digest != FROZEN_SHA256["blind"]:
        raise BlindSetChanged(
            f"{path} has sha256 {digest}, but the frozen blind set is {FROZEN_SHA256['blind']}. "
            "Blind figures are only reported on the frozen file; restore it from git."
        )
    data = json.loads(path.read_bytes())
    data["sha256"] = digest
    data["frozen"] = digest == FROZEN_SHA256[part]
    return data


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
            if question["category"] not in CATEGORIES:
                problems.append(f"{question['id']}: unknown category {question['category']!r}")
            if not question["evidence"]:
                problems.append(f"{question['id']}: no evidence")
            for turn_id in question["evidence"]:
                if turn_id not in turn_ids:  # evidence lies in the question's own conversation
                    problems.append(f"{question['id']}: evidence {turn_id} is not a turn of {conv['id']}")
            if question["category"] == "multi-hop" and len(question["evidence"]) < 2:
                problems.append(f"{question['id']}: a multi-hop question needs two or more evidence turns")
    return problems
