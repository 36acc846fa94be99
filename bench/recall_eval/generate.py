"""Builds the recall evaluation set from the hand-written tables in `templates.py` with a fixed seed:
ten two-person conversations of eight dated sessions each, every turn prefixed by its speaker, and
questions in four categories with the turn(s) that answer them.

    .venv/bin/python -m bench.recall_eval.generate            # writes bench/recall_eval/data/{dev,blind}.json
                                                               # their no-answer parts (noanswer.py)
                                                               # and the reply and dated parts (reply.py, dated.py)

The output is deterministic. The blind part is frozen: its sha256 is written into `dataset.py`,
and the harness refuses to report blind figures for a file that differs (see docs/recall-eval.md).
Regenerating is only for building a new version of the set, never for tuning.
"""

import argparse
import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from pathlib import Path
from string import Formatter

from bench.recall_eval import templates as T

SEED = 20240611
N_CONVERSATIONS = 10
N_DEV = 5  # the first five conversations are the dev part, the rest the blind part
N_SESSIONS = 8
SESSION_TURNS = (30, 42)  # turns per session, inclusive range
DATA_DIR = Path(__file__).resolve().parent / "data"

SINGLE_PER_SPEAKER = 7
OPEN_PER_SPEAKER = 4
EVENTS_PER_SPEAKER = 2
CORRECTIONS_PER_SPEAKER = 2
MULTI_PER_SPEAKER = 3

# Slots whose pool holds tuples: the names each element is spread over.
TUPLE_SLOTS = {
    "animal": ("animal", "animal_small", "animal_desc"),
    "job": ("job_role", "job_where"),
    "job2": ("job2_role", "job2_where"),
    "sibling": ("rel", "rel_he", "sib"),
    "kid": ("kid", "childrel"),
    "exercise": ("exercise_habit", "exercise_short"),
    "friend": ("friend_does", "friend_job"),
    "obsession_gift": ("obsession", "gift"),
    "vet": ("vet_symptom", "vet_cause"),
}


@dataclass
class Turn:
    speaker: str
    text: str
    id: str = ""


@dataclass
class Question:
    category: str
    topic: str
    speaker: str
    question: str
    evidence: list[Turn]
    answer: str


@dataclass
class Conversation:
    id: str
    speakers: tuple[str, str]
    dates: list[datetime]
    blocks: list[list[list[Turn]]] = field(default_factory=lambda: [[] for _ in range(N_SESSIONS)])
    questions: list[Question] = field(default_factory=list)


class Draw:
    """Values drawn without replacement within one conversation, so two facts never share a name,
    city or title (a question then has exactly the evidence it names)."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.used: dict[int, set] = {}

    def __call__(self, pool: list):
        used = self.used.setdefault(id(pool), set())
        choices = [i for i in range(len(pool)) if i not in used]
        index = self.rng.choice(choices)
        used.add(index)
        return pool[index]


# Pools for the slots that events and multi-hop templates name.
SLOT_POOLS = {
    "other": T.OTHERS,
    "city": T.CITIES,
    "company": T.COMPANIES,
    "meeting": T.MEETING_PLACES,
    "sibjob": T.SIB_JOBS,
    "book": T.BOOKS,
    "country": T.COUNTRIES,
    "dish": T.DISHES,
    "kid": T.KIDS,
    "pet": T.PET_NAMES,
    "friend": T.FRIEND_JOBS,
    "obsession_gift": T.OBSESSIONS,
    "vet": T.VET_ISSUES,
}


def _texts(value) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [text for item in value.values() for text in _texts(item)]
    if isinstance(value, (list, tuple)):
        return [text for item in value for text in _texts(item)]
    return []


def fill(template: str, slots: dict) -> str:
    return template.format(**slots)


def draw_slots(draw: Draw, spec: dict, base: dict) -> dict:
    slots = dict(base)
    for name, pool in spec.items():
        value = draw(pool)
        if name in TUPLE_SLOTS:
            slots.update(zip(TUPLE_SLOTS[name], value, strict=True))
        else:
            slots[name] = value
    for name, value in list(slots.items()):
        if isinstance(value, str) and value:
            slots[f"{name}_cap"] = value[0].upper() + value[1:]
    return slots


def when_answer(phrase_key, day: date) -> str:
    if phrase_key == "weekend":
        return f"the weekend before {day.isoformat()}"
    if phrase_key == "week":
        return f"the week before {day.isoformat()}"
    if phrase_key in ("tuesday", "friday"):
        weekday = {"tuesday": 1, "friday": 4}[phrase_key]
        back = (day.weekday() - weekday) % 7 or 7
        return (day - timedelta(days=back)).isoformat()
    return (day - timedelta(days=phrase_key)).isoformat()


class Builder:
    def __init__(self, rng: random.Random, conv: Conversation):
        self.rng = rng
        self.conv = conv
        self.draw = Draw(rng)
        self.used_text: set[str] = set()
        self.facts: dict[str, dict] = {}  # per speaker: values later facts refer to (pet name, kid name)
        self.said: dict[str, list[str]] = {}  # single-fact phrasings used, per topic
        self.session_cores: set[str] = set()

    # -- placement
    def place(self, session: int, *turns: Turn) -> list[Turn]:
        self.conv.blocks[session].append(list(turns))
        return list(turns)

    def ask(
        self, category: str, topic: str, speaker: str, asks: list[str], slots: dict, evidence: list[Turn], answer: str
    ) -> None:
        self.conv.questions.append(
            Question(
                category=category,
                topic=topic,
                speaker=speaker,
                question=fill(self.rng.choice(asks), slots),
                evidence=evidence,
                answer=answer,
            )
        )

    def slots_for(self, spec: dict, base: dict) -> dict:
        """Draws exactly the slots the spec's templates name and `base` does not already hold."""
        names = {name for text in _texts(spec) for _, name, _, _ in Formatter().parse(text) if name}
        wanted = {}
        for name in sorted(names - set(base)):
            pool_name = next((key for key, parts in TUPLE_SLOTS.items() if name in parts), name)
            wanted[pool_name] = SLOT_POOLS[pool_name]
        return draw_slots(self.draw, wanted, base)

    def other(self, speaker: str) -> str:
        a, b = self.conv.speakers
        return b if speaker == a else a

    def session(self, low: int = 0, high: int = N_SESSIONS - 1) -> int:
        return self.rng.randint(low, high)

    def reaction(self, speaker: str, options: list[str], slots: dict, chance: float = 0.7) -> list[Turn]:
        if self.rng.random() >= chance:
            return []
        return [Turn(self.other(speaker), fill(self.rng.choice(options), slots))]

    def base(self, speaker: str) -> dict:
        return {"S": speaker, "P": self.other(speaker), "Y": speaker}

    # -- categories
    def singles(self, speaker: str, topics: list[str]) -> None:
        for topic in topics:
            spec = T.SINGLE_TOPICS[topic]
            slots = draw_slots(self.draw, spec["slots"], self.base(speaker))
            self.facts[speaker].update({k: slots[k] for k in ("pet", "animal", "kid", "childrel") if k in slots})
            said = self.said.setdefault(topic, [])
            template = self.rng.choice([v for v in spec["says"] if v not in said] or spec["says"])
            said.append(template)
            turn = Turn(speaker, fill(template, slots))
            self.place(self.session(), turn, *self.reaction(speaker, spec["react"], slots))
            if self.rng.random() < 0.8:  # a decoy: same words, another fact, in another session
                decoy_speaker = self.rng.choice(self.conv.speakers)
                self.place(self.session(), Turn(decoy_speaker, fill(self.rng.choice(spec["decoy"]), slots)))
            self.ask("single-fact", topic, speaker, spec["asks"], slots, [turn], fill(spec["answer"], slots))

    def opens(self, speaker: str, topics: dict[str, int], advice: str) -> None:
        for topic, variant in topics.items():
            spec = T.OPEN_TOPICS[topic]
            slots = self.base(speaker)
            said = spec["says"][variant]
            turn = Turn(speaker, said)
            self.place(self.session(), turn, *self.reaction(speaker, T.REACTIONS, {"Y": speaker}, chance=0.5))
            self.ask("open", topic, speaker, spec["asks"], slots, [turn], said)
        spec = T.ADVICE_TOPICS[advice]
        slots = {**self.base(speaker), "other": self.draw(T.OTHERS)}
        advice_turn = Turn(self.other(speaker), fill(spec["advice"], slots))
        self.place(
            self.session(),
            Turn(speaker, fill(spec["setup"], slots)),
            advice_turn,
            Turn(
                speaker,
                fill(
                    self.rng.choice(
                        ["Thanks, {P}. You're right, as usual.", "Okay. I'll try that, {P}.", "Hmm, maybe. Thank you."]
                    ),
                    slots,
                ),
            ),
        )
        self.ask("open", advice, speaker, spec["asks"], slots, [advice_turn], advice_turn.text)

    def events(self, speaker: str, topics: list[str]) -> None:
        for topic in topics:
            spec = T.EVENTS[topic]
            phrase, key = self.rng.choice(T.WHEN)
            slots = self.slots_for(spec, {**self.base(speaker), "when": phrase})
            session = self.session()
            turn = Turn(speaker, fill(spec["says"], slots))
            self.place(session, turn, *self.reaction(speaker, T.REACTIONS, {"Y": speaker}))
            answer = when_answer(key, self.conv.dates[session].date())
            self.ask("temporal", topic, speaker, spec["asks"], slots, [turn], answer)

    def corrections(self, speaker: str, topics: list[str]) -> None:
        for topic in topics:
            spec = T.CORRECTIONS[topic]
            slots = draw_slots(self.draw, spec["slots"], self.base(speaker))
            early = self.session(0, N_SESSIONS - 3)
            late = self.session(early + 2, N_SESSIONS - 1)
            first = Turn(speaker, fill(spec["first"], slots))
            then = Turn(speaker, fill(spec["then"], slots))
            self.place(early, first, *self.reaction(speaker, T.REACTIONS, {"Y": speaker}))
            self.place(late, then, *self.reaction(speaker, T.REACTIONS, {"Y": speaker}))
            self.ask(
                "temporal", f"{topic}.latest", speaker, spec["ask_latest"], slots, [then], fill(spec["answer_latest"], slots)
            )
            if "ask_changed" in spec:
                self.ask(
                    "temporal",
                    f"{topic}.changed",
                    speaker,
                    spec["ask_changed"],
                    slots,
                    [first, then],
                    f"{first.text} -> {then.text}",
                )
            else:
                self.ask(
                    "temporal", f"{topic}.first", speaker, spec["ask_first"], slots, [first], fill(spec["answer_first"], slots)
                )

    def multi_hop(self, speaker: str, topics: list[str]) -> None:
        for topic in topics:
            spec = T.MULTI_HOP[topic]
            if topic == "trips":
                self.trips(speaker, spec)
                continue
            known = self.facts[speaker]
            slots = self.slots_for(spec, {**self.base(speaker), **known})
            early = self.session(0, N_SESSIONS - 2)
            late = self.session(early + 1, N_SESSIONS - 1)
            first_speaker = self.other(speaker) if topic == "book_rec" else speaker
            first = Turn(first_speaker, fill(spec["first"], slots))
            then = Turn(speaker, fill(spec["then"], slots))
            self.place(early, first, *self.reaction(first_speaker, T.REACTIONS, {"Y": first_speaker}, chance=0.5))
            self.place(late, then, *self.reaction(speaker, T.REACTIONS, {"Y": speaker}, chance=0.5))
            self.ask("multi-hop", topic, speaker, spec["asks"], slots, [first, then], fill(spec["answer"], slots))

    def trips(self, speaker: str, spec: dict) -> None:
        count = self.rng.choice([2, 3])
        sessions = sorted(self.rng.sample(range(N_SESSIONS), count))
        lines = self.rng.sample(T.TRIP_LINES, count)
        turns, cities = [], []
        for session, line in zip(sessions, lines, strict=True):
            city = self.draw(T.CITIES)
            cities.append(city)
            turn = Turn(speaker, line.format(city=city))
            turns.append(turn)
            self.place(session, turn, *self.reaction(speaker, T.REACTIONS, {"Y": speaker}, chance=0.5))
        self.ask("multi-hop", "trips", speaker, spec["asks"], self.base(speaker), turns, ", ".join(cities))

    def shared_hobby(self) -> None:
        hobby, line_a, line_b = self.rng.choice(T.HOBBY_PAIRS)
        a, b = self.conv.speakers
        first, second = self.rng.sample(range(N_SESSIONS), 2)
        turn_a, turn_b = Turn(a, line_a), Turn(b, line_b)
        self.place(first, turn_a, *self.reaction(a, T.REACTIONS, {"Y": a}, chance=0.5))
        self.place(second, turn_b, *self.reaction(b, T.REACTIONS, {"Y": b}, chance=0.5))
        self.ask("multi-hop", "shared_hobby", a, T.MULTI_HOP["shared_hobby"]["asks"], self.base(a), [turn_a, turn_b], hobby)

    # -- small talk
    def small_talk(self, speaker: str) -> Turn:
        """A small-talk turn; a core is used once per session, and its prefix and suffix vary so the
        same remark in two sessions is not the same text."""
        other = self.other(speaker)
        text = ""
        for _ in range(50):
            raw = self.rng.choice(T.SMALL_TALK)
            if raw in self.session_cores:
                continue
            core = raw.format(Y=other)
            question = core.endswith("?")
            prefix = "" if question or core.startswith(("Oh", other)) else self.rng.choice(T.PREFIXES)
            suffix = "" if question else self.rng.choice(T.SUFFIXES)
            if prefix and core.split()[0] not in ("I", "I'm", "I've", "I'd"):
                core = core[0].lower() + core[1:]
            text = prefix + core + suffix
            if text not in self.used_text:
                break
        self.used_text.add(text)
        self.session_cores.add(raw)
        return Turn(speaker, text)

    def finish_sessions(self) -> None:
        for blocks in self.conv.blocks:
            target = self.rng.randint(*SESSION_TURNS) - 4  # greeting pair and goodbye pair added below
            self.session_cores = set()
            while sum(len(block) for block in blocks) < target:
                speaker = self.rng.choice(self.conv.speakers)
                block = [self.small_talk(speaker)]
                if self.rng.random() < 0.4:
                    block.append(Turn(self.other(speaker), self.rng.choice(T.REACTIONS).format(Y=speaker)))
                blocks.append(block)
            self.rng.shuffle(blocks)
            opener = self.rng.choice(self.conv.speakers)
            closer = self.rng.choice(self.conv.speakers)
            blocks.insert(
                0,
                [
                    Turn(opener, self.rng.choice(T.GREETINGS).format(Y=self.other(opener))),
                    Turn(self.other(opener), self.rng.choice(T.GREETING_REPLIES).format(Y=opener)),
                ],
            )
            blocks.append(
                [
                    Turn(closer, self.rng.choice(T.GOODBYES).format(Y=self.other(closer))),
                    Turn(self.other(closer), self.rng.choice(T.GOODBYES).format(Y=closer)),
                ]
            )


def plan_speakers(rng: random.Random, speakers: tuple[str, str]) -> dict[str, dict]:
    """Each speaker's topics. Events, corrections, advice and multi-hop stories differ between the
    two speakers (a conversation where both move house the same way reads oddly); single facts and
    opinions may share a topic, said in different words, which makes the other's turn a hard decoy."""
    plans: dict[str, dict] = {}
    taken: set[str] = set()
    open_variants: dict[str, int] = {}

    def pick(options, count: int) -> list[str]:
        chosen = rng.sample([o for o in sorted(options) if o not in taken], count)
        taken.update(chosen)
        return chosen

    for speaker in speakers:
        corrections = pick(T.CORRECTIONS, CORRECTIONS_PER_SPEAKER)
        events = pick(set(T.EVENTS) - ({"engaged"} if "relationship" in corrections else set()), EVENTS_PER_SPEAKER)
        advice = pick(T.ADVICE_TOPICS, 1)[0]
        multi = pick(set(T.MULTI_HOP) - {"shared_hobby"}, MULTI_PER_SPEAKER)
        excluded = {"job"} if "job_change" in corrections else set()
        singles = rng.sample([t for t in sorted(T.SINGLE_TOPICS) if t not in excluded], SINGLE_PER_SPEAKER)
        opens = {}
        for topic in rng.sample(sorted(T.OPEN_TOPICS), OPEN_PER_SPEAKER):
            opens[topic] = 1 - open_variants[topic] if topic in open_variants else rng.randint(0, 1)
            open_variants[topic] = opens[topic]
        plans[speaker] = {
            "singles": singles,
            "opens": opens,
            "advice": advice,
            "events": events,
            "corrections": corrections,
            "multi": multi,
        }
    return plans


def session_dates(rng: random.Random, start: datetime, count: int, gap_days: tuple[int, int] = (6, 24)) -> list[datetime]:
    """`count` session times from `start`, each `gap_days` (a range) after the one before, at a
    random hour and quarter."""
    dates = [start]
    for _ in range(count - 1):
        nxt = dates[-1] + timedelta(days=rng.randint(*gap_days))
        dates.append(nxt.replace(hour=rng.randint(8, 21), minute=rng.choice([0, 15, 30, 45])))
    return dates


def first_session(rng: random.Random) -> datetime:
    return datetime(2023, rng.randint(1, 6), rng.randint(1, 28), rng.randint(8, 21), rng.choice([0, 15, 30, 45]))


def build_conversation(rng: random.Random, index: int, speakers: tuple[str, str]) -> Conversation:
    dates = session_dates(rng, first_session(rng), N_SESSIONS)
    conv = Conversation(id=f"rc-{index:02d}", speakers=speakers, dates=dates)
    builder = Builder(rng, conv)
    plans = plan_speakers(rng, speakers)
    for speaker in speakers:
        plan = plans[speaker]
        builder.facts[speaker] = {}
        builder.singles(speaker, plan["singles"])
        builder.opens(speaker, plan["opens"], plan["advice"])
        builder.events(speaker, plan["events"])
        builder.corrections(speaker, plan["corrections"])
        builder.multi_hop(speaker, plan["multi"])
    builder.shared_hobby()
    builder.finish_sessions()
    return conv


def to_json(conv: Conversation) -> dict:
    sessions = []
    for number, (blocks, when) in enumerate(zip(conv.blocks, conv.dates, strict=True), start=1):
        session_id = f"{conv.id}-s{number}"
        turns = [turn for block in blocks for turn in block]
        for position, turn in enumerate(turns, start=1):
            turn.id = f"{session_id}-t{position}"
        sessions.append(
            {
                "id": session_id,
                "date": when.strftime("%Y-%m-%dT%H:%M:00Z"),
                "turns": [{"id": t.id, "speaker": t.speaker, "text": t.text} for t in turns],
            }
        )
    questions = [
        {
            "id": f"{conv.id}-q{n:02d}",
            "category": q.category,
            "topic": q.topic,
            "about": q.speaker,
            "question": q.question,
            "evidence": [t.id for t in q.evidence],
            "answer": q.answer,
        }
        for n, q in enumerate(conv.questions, start=1)
    ]
    return {
        "id": conv.id,
        "subject": f"dialogue/{conv.id}",
        "speakers": list(conv.speakers),
        "sessions": sessions,
        "questions": questions,
    }


def generate() -> dict[str, dict]:
    rng = random.Random(SEED)
    names = rng.sample(T.SPEAKERS, 2 * N_CONVERSATIONS)
    conversations = [to_json(build_conversation(rng, i + 1, (names[2 * i], names[2 * i + 1]))) for i in range(N_CONVERSATIONS)]
    header = {"format": 1, "seed": SEED, "generator": "bench.recall_eval.generate"}
    return {
        "dev": {**header, "part": "dev", "conversations": conversations[:N_DEV]},
        "blind": {**header, "part": "blind", "conversations": conversations[N_DEV:]},
    }


def extra_parts(
    kind: str,
    *,
    seed: int,
    generator: str,
    speakers: list[str],
    first_index: int,
    per_part: int,
    build: Callable[[random.Random, int, tuple[str, str]], Conversation],
) -> dict[str, dict]:
    """An extra part's dev and blind files (`dev-<kind>`, `blind-<kind>`): 2 x `per_part`
    conversations numbered from `first_index`, each built by `build` with two speakers of
    `speakers`, from a random stream of its own (`seed`)."""
    rng = random.Random(seed)
    names = rng.sample(speakers, 4 * per_part)
    conversations = [to_json(build(rng, first_index + i, (names[2 * i], names[2 * i + 1]))) for i in range(2 * per_part)]
    header = {"format": 1, "seed": seed, "generator": generator}
    halves = {"dev": conversations[:per_part], "blind": conversations[per_part:]}
    return {f"{part}-{kind}": {**header, "part": f"{part}-{kind}", "conversations": chunk} for part, chunk in halves.items()}


def serialise(part: dict) -> bytes:
    return (json.dumps(part, indent=1, ensure_ascii=False) + "\n").encode()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=str(DATA_DIR))
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    parts = generate()
    for name, part in parts.items():
        (out / f"{name}.json").write_bytes(serialise(part))
        questions = sum(len(c["questions"]) for c in part["conversations"])
        turns = sum(len(s["turns"]) for c in part["conversations"] for s in c["sessions"])
        print(f"{name}: {len(part['conversations'])} conversations, {turns} turns, {questions} questions")
    from bench.recall_eval import dated, noanswer, reply

    for name, part in {**reply.generate(), **dated.generate()}.items():
        (out / f"{name}.json").write_bytes(serialise(part))
        questions = sum(len(c["questions"]) for c in part["conversations"])
        print(f"{name}: {len(part['conversations'])} conversations, {questions} questions")

    for name, part in noanswer.generate(parts, serialise).items():
        (out / f"{name}.json").write_bytes(serialise(part))
        questions = sum(len(c["questions"]) for c in part["conversations"])
        print(f"{name}: {questions} no-answer questions")


if __name__ == "__main__":
    main()
