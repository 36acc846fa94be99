"""Builds the no-answer part of the recall evaluation set: for each conversation, questions that
are plausible for it but that no turn answers, from the tables in `templates_noanswer.py` with a
fixed seed of their own (written by `python -m bench.recall_eval.generate` beside dev.json and
blind.json, as dev-noanswer.json and blind-noanswer.json).

Per conversation, in this order:
- (a) absent topics: a topic nobody in the conversation talks about;
- (b) other speaker: a topic the partner has and the speaker asked about does not, one question
  about each speaker; other value: a topic the speaker has, asked with a value (a city, a
  company, a pet's name ...) that nobody in the conversation says;
- (c) near misses: a question built on a small-talk or decoy turn of the conversation that shares
  its words but does not give the detail asked.

A candidate is kept only if `dataset.noanswer_violations` finds no turn in its scope that contains
a word an answer would need; every question records those words, its scope and the near-miss
turns, so the check can be run again on the data alone. The generator reads the conversations but
never changes them, and draws from its own random stream, so the answerable parts are untouched.
"""

import hashlib
import random
from collections.abc import Callable, Iterable

from bench.recall_eval import dataset
from bench.recall_eval import templates_noanswer as NT

NOANSWER_SEED = 20240629
PER_CONVERSATION = {"absent-topic": 3, "other-speaker": 2, "other-value": 1, "near-miss": 2}


class Chooser:
    """Picks one conversation's no-answer questions: distinct topics and texts, each one checked."""

    def __init__(self, rng: random.Random, conv: dict):
        self.rng = rng
        self.conv = conv
        self.held = {(dataset.topic_base(q["topic"]), q["about"]) for q in conv["questions"]}
        self.asked = {q["question"] for q in conv["questions"]}
        self.turns = [turn for session in conv["sessions"] for turn in session["turns"]]
        self.chosen: list[dict] = []

    def other(self, speaker: str) -> str:
        a, b = self.conv["speakers"]
        return b if speaker == a else a

    def offer(self, trap: str, topic: str, speaker: str, asks: list[str], check: dict, value: str = "") -> bool:
        """Adds the question if it is new and no turn can answer it."""
        if any(q["topic"] == topic for q in self.chosen):
            return False
        text = self.rng.choice(asks).format(S=speaker, P=self.other(speaker), value=value)
        question = {
            "category": dataset.NOANSWER_CATEGORY,
            "trap": trap,
            "topic": topic,
            "about": speaker,
            "question": text,
            "evidence": [],
            "answer": None,
            "check": check,
        }
        if text in self.asked or any(q["question"] == text for q in self.chosen):
            return False
        if dataset.noanswer_violations(self.conv, question):
            return False
        self.chosen.append(question)
        return True

    def shuffled(self, options: Iterable) -> list:
        options = sorted(options)
        self.rng.shuffle(options)
        return options

    def absent_topics(self, count: int) -> None:
        talked = {topic for topic, _ in self.held}
        candidates = [(topic, spec["asks"], spec["terms"]) for topic, spec in NT.ABSENT_TOPICS.items()]
        candidates += [
            (topic, spec["asks"], [*spec["key"], *spec["hooks"]]) for topic, spec in NT.SINGLE_KEYS.items() if topic not in talked
        ]
        wanted = len(self.chosen) + count
        for topic, asks, terms in self.shuffled(candidates):
            speaker = self.rng.choice(self.conv["speakers"])
            self.offer("absent-topic", topic, speaker, asks, {"terms": terms, "speaker": None, "near": []})
            if len(self.chosen) == wanted:
                return

    def other_speaker(self) -> None:
        """One question about each speaker, on a topic only the partner has."""
        for speaker in self.conv["speakers"]:
            partner = self.other(speaker)
            topics = {topic for topic, who in self.held if who == partner and (topic, speaker) not in self.held}
            for topic in self.shuffled(topics & (set(NT.SINGLE_KEYS) | set(NT.EVENT_KEYS))):
                if topic in NT.SINGLE_KEYS:
                    spec = NT.SINGLE_KEYS[topic]
                    terms = [*spec["key"], *spec["hooks"]]
                else:
                    spec = NT.EVENT_KEYS[topic]
                    terms = spec["terms"]
                if self.offer("other-speaker", topic, speaker, spec["asks"], {"terms": terms, "speaker": speaker, "near": []}):
                    break

    def other_value(self, count: int) -> None:
        wanted = len(self.chosen) + count
        for topic in self.shuffled({topic for topic, _ in self.held} & set(NT.OTHER_VALUE)):
            spec = NT.OTHER_VALUE[topic]
            speaker = self.rng.choice(sorted(who for t, who in self.held if t == topic))
            unsaid = [v for v in spec["pool"] if not any(dataset.mentions(turn["text"], v) for turn in self.turns)]
            if not unsaid:
                continue
            value = self.rng.choice(unsaid)
            self.offer("other-value", topic, speaker, spec["asks"], {"terms": [value], "speaker": None, "near": []}, value)
            if len(self.chosen) == wanted:
                return

    def near_misses(self, count: int) -> None:
        wanted = len(self.chosen) + count
        for topic in self.shuffled(NT.NEAR_MISSES):
            spec = NT.NEAR_MISSES[topic]
            near = [turn for turn in self.turns if spec["source"] in turn["text"]]
            if not near:
                continue
            speaker = self.rng.choice(sorted({turn["speaker"] for turn in near}))
            check = {"terms": spec["anchors"], "speaker": None, "near": [turn["id"] for turn in near]}
            self.offer("near-miss", topic, speaker, spec["asks"], check)
            if len(self.chosen) == wanted:
                return


def conversation_questions(rng: random.Random, conv: dict) -> list[dict]:
    chooser = Chooser(rng, conv)
    chooser.absent_topics(PER_CONVERSATION["absent-topic"])
    chooser.other_speaker()
    chooser.other_value(PER_CONVERSATION["other-value"])
    chooser.near_misses(PER_CONVERSATION["near-miss"])
    counts = {trap: sum(q["trap"] == trap for q in chooser.chosen) for trap in PER_CONVERSATION}
    if counts != PER_CONVERSATION:
        raise RuntimeError(f"{conv['id']}: found {counts} no-answer questions, wanted {PER_CONVERSATION}")
    return [{"id": f"{conv['id']}-n{n:02d}", **question} for n, question in enumerate(chooser.chosen, start=1)]


def generate(parts: dict[str, dict], serialise: Callable[[dict], bytes]) -> dict[str, dict]:
    """The no-answer parts for the answerable parts `parts` ({"dev": ..., "blind": ...} as
    `generate.generate()` returns them); `serialise` is the bytes those parts are written as, so each
    no-answer part records the sha256 of the very file it was built on."""
    rng = random.Random(NOANSWER_SEED)
    result = {}
    for part in dataset.PARTS:
        data = parts[part]
        conversations = [
            {
                "id": conv["id"],
                "subject": conv["subject"],
                "speakers": conv["speakers"],
                "questions": conversation_questions(rng, conv),
            }
            for conv in data["conversations"]
        ]
        name = dataset.NOANSWER_PARTS[part]
        result[name] = {
            "format": 1,
            "seed": NOANSWER_SEED,
            "generator": "bench.recall_eval.noanswer",
            "part": name,
            "conversations_from": f"{part}.json",
            "conversations_sha256": hashlib.sha256(serialise(data)).hexdigest(),
            "conversations": conversations,
        }
    return result
