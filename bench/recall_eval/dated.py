"""Builds the dated part of the recall evaluation set: conversations of their own in which a speaker
does the same kind of thing session after session (cooks, runs, goes to the cinema), said alike each
time with another value, and questions that name the date or period of one occurrence ("What did
Mirela cook on 14 May 2023?"). The turns of one topic match the question's words alike; only the
date tells the one that answers (the tables are in `templates_dated.py`).

    .venv/bin/python -m bench.recall_eval.generate     # writes every part, these included

Three conversations per part (`rc-17` … `rc-19` dev, `rc-20` … `rc-22` blind) of sixteen sessions
over a year, built like the others (every turn prefixed by its speaker, small talk, greetings) with
a seed of its own, so the other parts' files stay as they were. Questions have category `dated`;
their evidence is every occurrence of the topic observed in the period the question names (a day,
a week from Monday, or a month), at least one.
"""

import random
from datetime import datetime, timedelta

from bench.recall_eval import templates as T
from bench.recall_eval import templates_dated as D
from bench.recall_eval.generate import Builder, Conversation, Turn, extra_parts, fill, session_dates

DATED_SEED = 20261204
CONVERSATIONS_PER_PART = 3
FIRST_INDEX = 17  # rc-17 onwards: after the reply part's rc-11 to rc-16
SESSIONS = 16
GAP_DAYS = (14, 26)
TOPICS_PER_SPEAKER = 3
OCCURRENCES = (11, 14)  # sessions a topic comes up in, of SESSIONS
QUESTIONS_PER_TOPIC = 2
CATEGORY = "dated"


def within(granularity: str, named: datetime, observed: datetime) -> bool:
    """Whether `observed` lies in the period a question names around `named`'s date."""
    if granularity == "day":
        return observed.date() == named.date()
    if granularity == "month":
        return (observed.year, observed.month) == (named.year, named.month)
    monday = named.date() - timedelta(days=named.weekday())
    return monday <= observed.date() < monday + timedelta(days=7)


def when(form: str, day: datetime) -> str:
    return form.format(day=day.day, month=day.strftime("%B"), year=day.year, iso=day.date().isoformat())


def build_conversation(rng: random.Random, index: int, speakers: tuple[str, str]) -> Conversation:
    start = datetime(2023, 1, rng.randint(2, 20), rng.randint(8, 21), rng.choice([0, 15, 30, 45]))
    dates = session_dates(rng, start, SESSIONS, GAP_DAYS)
    conv = Conversation(id=f"rc-{index:02d}", speakers=speakers, dates=dates, blocks=[[] for _ in range(SESSIONS)])
    builder = Builder(rng, conv)
    topics = rng.sample(sorted(D.DATED_TOPICS), 2 * TOPICS_PER_SPEAKER)
    for number, topic in enumerate(topics):
        speaker = speakers[number % 2]
        spec = D.DATED_TOPICS[topic]
        occurrences: list[tuple[int, Turn, str]] = []
        for session in sorted(rng.sample(range(SESSIONS), rng.randint(*OCCURRENCES))):
            value = builder.draw(spec["values"])
            turn = Turn(speaker, fill(rng.choice(spec["says"]), {"value": value}))
            builder.place(session, turn, *builder.reaction(speaker, T.REACTIONS, {"Y": speaker}, chance=0.5))
            occurrences.append((session, turn, value))
        for session, _, _ in rng.sample(occurrences, QUESTIONS_PER_TOPIC):
            form, granularity = rng.choice(D.WHEN_FORMS)
            named = dates[session]
            answering = [(turn, value) for s, turn, value in occurrences if within(granularity, named, dates[s])]
            slots = {**builder.base(speaker), "when": when(form, named)}
            builder.ask(
                CATEGORY,
                f"{topic}.{granularity}",
                speaker,
                spec["asks"],
                slots,
                [t for t, _ in answering],
                "; ".join(v for _, v in answering),
            )
    builder.finish_sessions()
    return conv


def generate() -> dict[str, dict]:
    return extra_parts(
        CATEGORY,
        seed=DATED_SEED,
        generator="bench.recall_eval.dated",
        speakers=D.DATED_SPEAKERS,
        first_index=FIRST_INDEX,
        per_part=CONVERSATIONS_PER_PART,
        build=build_conversation,
    )
