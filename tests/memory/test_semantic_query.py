"""What the semantic index is asked: the query without the words common in the scope
(`ranking.common_words`, `semantic.query_text`, the recipe's `semantic_common_share`), in live and
as-of recall alike. Runs with the `semantic` extra installed (bin/test installs it)."""

import itertools

import pytest
from django.utils import timezone

from memory.asof import recall_as_of
from memory.recall import RecallQuery, recall
from memory.scope import Scope
from memory.search import IndexKind, active_index, gates, semantic
from memory.search.build import build_and_promote, request_rebuild
from memory.search.ranking import COMMON_MIN_RECORDS, rank

QUESTION = "What is Maya's profession?"
ANSWER = "Maya: I've been working as a veterinary nurse at the animal clinic for almost three years."
# Short turns that are mostly the speaker's name: with the name in the query they are nearer to it
# than the answer, which shares no other word with the question.
FILLER = ["Maya: I totally get that.", "Maya: Wait, really? Tell me everything.", "Maya: Same here.", "Maya: Ha, classic."]

_built = itertools.count()


@pytest.fixture(autouse=True)
def no_gates(monkeypatch):
    monkeypatch.setattr(gates, "_GATES", {})


def _with_share(share: float) -> None:
    """A lexical index whose recipe leaves out words in `share` of the scope (0: none), active."""
    recipe = {**active_index().recipe, "semantic_common_share": share}
    build_and_promote(request_rebuild(name=f"common-share-{next(_built)}", recipe=recipe).pk)


def _conversation(write, turns: int) -> None:
    write(content=ANSWER)
    for text in itertools.islice(itertools.cycle(FILLER), turns - 1):
        write(content=text)


def _scope(credential) -> Scope:
    agent = credential.agent
    return Scope(tenant_id=agent.tenant_id, agent_id=agent.pk, purpose="support", now=timezone.now(), subject="customer/acme")


def _common(credential, query: str, share: float = 0.25) -> frozenset[str]:
    ranking = rank(active_index(), _scope(credential), query)
    list(ranking)  # the words' frequencies are known once the rows are read
    return ranking.common_words(query, share)


@pytest.mark.parametrize(
    ("query", "common", "expected"),
    [
        (QUESTION, {"maya"}, "What is profession?"),
        ("What is Maya\u2019s profession?", {"maya"}, "What is profession?"),
        ("Did MAYA say maya twice?", {"maya"}, "Did say twice?"),
        ("Mayan food, Maya?", {"maya"}, "Mayan food, ?"),
        (QUESTION, set(), QUESTION),
        ("Maya's?", {"maya"}, "Maya's?"),  # nothing but common words: the query as it is
        ("Maya, Ben", {"maya", "ben"}, "Maya, Ben"),
    ],
)
def test_the_semantic_query_leaves_out_the_common_words_where_they_stand(query, common, expected):
    assert semantic.query_text(query, common) == expected


def test_words_in_a_share_of_the_scope_are_common_and_rarer_ones_are_not(credential, write):
    _conversation(write, COMMON_MIN_RECORDS + 4)  # "maya" in every record, "nurse" in one
    assert _common(credential, "Is Maya a nurse?") == {"maya"}
    assert _common(credential, "Is Maya a nurse?", share=0) == frozenset()
    assert _common(credential, "Is a nurse?") == frozenset()
    assert _common(credential, "Who is Maya?") == frozenset()  # only stop words would be left


def test_in_a_small_scope_no_word_is_common(credential, write):
    _conversation(write, COMMON_MIN_RECORDS - 1)  # "maya" in every record, but too few records
    assert _common(credential, "Is Maya a nurse?", share=0.01) == frozenset()


def test_the_answer_beats_turns_that_are_mostly_the_name_only_without_the_name(credential, write):
    _conversation(write, COMMON_MIN_RECORDS + 4)
    build_and_promote(request_rebuild(name="semantic", kind=IndexKind.SEMANTIC).pk)
    q = RecallQuery(query=QUESTION, purpose="support", subject="customer/acme", limit=3, min_relevance=0)

    _with_share(0)
    named = recall(credential=credential, q=q)
    assert named.semantic and named.items[0].record.content in FILLER

    _with_share(0.25)
    found = recall(credential=credential, q=q)
    top = found.items[0]
    assert top.record.content == ANSWER
    # the cosine is the answer's to the query without the name
    asked = semantic.query_text(QUESTION, {"maya"})
    expected = float(semantic.embed([ANSWER])[0] @ semantic.query_vector(asked))
    assert top.score_parts["semantic"] == pytest.approx(expected, abs=1e-4)

    then = recall_as_of(agent=credential.agent, q=q, at=timezone.now())
    assert then.result.items[0].record.content == ANSWER
    assert then.result.items[0].score_parts["semantic"] == pytest.approx(expected, abs=1e-4)
