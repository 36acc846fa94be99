"""Builds the reply part of the recall evaluation set: conversations of their own in which each
question's words are in one turn and its answer in the reply to it (the tables and the two ways a
topic is told are in `templates_reply.py`).

    .venv/bin/python -m bench.recall_eval.generate     # writes every part, these included

Three conversations per part (`rc-11` … `rc-13` dev, `rc-14` … `rc-16` blind), built like the
others (eight dated sessions, every turn prefixed by its speaker, small talk, greetings, decoys that
use a topic's words without answering) with a seed of its own, so the other parts' files stay as
they were. Every question has category `reply` and one evidence turn, the answer; a check run on
every question (`overlap`) makes sure the answer shares no stemmed content word with the question,
speaker names aside.
"""

import random
import re

import snowballstemmer

from bench.recall_eval import templates as T
from bench.recall_eval import templates_reply as R
from bench.recall_eval.generate import (
    N_SESSIONS,
    Builder,
    Conversation,
    Turn,
    draw_slots,
    extra_parts,
    fill,
    first_session,
    session_dates,
)

REPLY_SEED = 20261203
CONVERSATIONS_PER_PART = 3
FIRST_INDEX = 11  # rc-11 onwards: after the ten conversations of dev.json and blind.json
TOPICS_PER_SPEAKER = 5
CATEGORY = "reply"
WAYS = ("asked", "announced")  # the answer one turn after the question's words, or two
_STEMMER = snowballstemmer.stemmer("english")
STOP_WORDS = frozenset(
    """a about after again all am an and any are as at be been before but by can could did do does
    doing done for from get got had has have he her here him his how i if in into is it its just
    me my no not now of off on once only or our out over own really same she so some such than that
    the their them then there these they this those to too up us very was we were what when where
    which who whom why will with would you your yes well oh go went going""".split()
)


def stems(text: str, names: set[str]) -> set[str]:
    """The text's content words, stemmed, without stop words and the given names."""
    words = re.findall(r"[a-z]+", text.lower())
    return {_STEMMER.stemWord(word) for word in words if word not in STOP_WORDS and word not in names and len(word) > 1}


def overlap(question: str, answer: str, names: set[str]) -> set[str]:
    """The stemmed content words a question shares with its answer turn (empty for a fair question)."""
    return stems(question, names) & stems(answer, names)


def build_conversation(rng: random.Random, index: int, speakers: tuple[str, str]) -> Conversation:
    conv = Conversation(id=f"rc-{index:02d}", speakers=speakers, dates=session_dates(rng, first_session(rng), N_SESSIONS))
    builder = Builder(rng, conv)
    topics = rng.sample(sorted(R.REPLY_TOPICS), 2 * TOPICS_PER_SPEAKER)
    names = {name.lower() for name in speakers}
    for number, topic in enumerate(topics):
        speaker = speakers[number % 2]
        spec = R.REPLY_TOPICS[topic]
        slots = draw_slots(builder.draw, {"value": spec["values"]}, builder.base(speaker))
        answer = Turn(speaker, fill(rng.choice(spec["answer"]), slots))
        if rng.choice(WAYS) == "asked":
            exchange = [Turn(builder.other(speaker), fill(rng.choice(spec["ask"]), slots)), answer]
        else:
            exchange = [
                Turn(speaker, fill(rng.choice(spec["announce"]), slots)),
                Turn(builder.other(speaker), rng.choice(R.PROMPTS)),
                answer,
            ]
        session = builder.session()
        builder.place(session, *exchange, *builder.reaction(speaker, T.REACTIONS, {"Y": speaker}, chance=0.5))
        if rng.random() < 0.8:  # the topic's words elsewhere, answering nothing
            decoy_session = rng.choice([s for s in range(N_SESSIONS) if s != session])
            builder.place(decoy_session, Turn(rng.choice(speakers), rng.choice(spec["decoy"])))
        builder.ask(CATEGORY, topic, speaker, spec["asks"], slots, [answer], slots["value"])
        shared = overlap(conv.questions[-1].question, answer.text, names)
        if shared:
            raise ValueError(f"{topic}: the answer shares {sorted(shared)} with the question {conv.questions[-1].question!r}")
    builder.finish_sessions()
    return conv


def generate() -> dict[str, dict]:
    return extra_parts(
        CATEGORY,
        seed=REPLY_SEED,
        generator="bench.recall_eval.reply",
        speakers=R.REPLY_SPEAKERS,
        first_index=FIRST_INDEX,
        per_part=CONVERSATIONS_PER_PART,
        build=build_conversation,
    )
