""" "Nothing relevant" is an answer: each recall item carries a calibrated `relevance` in [0, 1], a
floor (`min_relevance`, the request's or the index recipe's) leaves out what falls under it, and
the response counts those (`below_floor`). Through the function and golden runs (the HTTP API's
side: tests/api/test_recall_relevance.py)."""

import pytest

from governance.golden.runner import run_golden_sets
from governance.golden.services import golden_question_create
from memory.recall import RecallQuery, recall
from memory.search import active_index
from memory.search.rerank import Settings

pytestmark = pytest.mark.django_db

NOTES = [
    "Acme's billing contact is the finance team.",
    "Prefers email over phone for routine updates.",
    "Deploys go through staging and need one approval.",
    "Acme runs on the Enterprise plan.",
    "Travelling this week; reply slower than usual.",
    "Lunch is at noon on Fridays.",
]


@pytest.fixture
def notes(write):
    return [write(content=text, provenance={"session_id": None}) for text in NOTES]


def _ask(credential, query: str, **fields):
    return recall(credential=credential, q=RecallQuery(query=query, purpose="support", **fields))


def test_a_query_nothing_answers_gets_no_items_and_counts_what_fell_under_the_floor(credential, notes):
    result = _ask(credential, "which flavour of gelato do they pick")
    floor = Settings.of(active_index().recipe).min_relevance["lexical"]
    assert result.items == [] and result.below_floor > 0 and result.min_relevance == floor > 0
    everything = _ask(credential, "which flavour of gelato do they pick", min_relevance=0)
    assert len(everything.items) == len(NOTES) and everything.below_floor == 0
    assert all(0 <= item.relevance < floor for item in everything.items if item.score_parts["lexical"] == 0)


def test_records_that_match_nothing_are_not_filler_any_more(credential, notes):
    # The demo: "contact" returned every record, those matching nothing included.
    result = _ask(credential, "contact")
    assert [item.record.content for item in result.items] == [NOTES[0]]
    assert result.below_floor == len(NOTES) - 1


def test_relevance_grows_with_the_share_of_the_query_a_record_matches(credential, notes):
    items = _ask(credential, "billing contact at acme", min_relevance=0).items
    by_content = {item.record.content: item.relevance for item in items}
    assert by_content[NOTES[0]] > by_content[NOTES[3]] > by_content[NOTES[5]]  # all three words, one, none
    assert all(0.0 <= value <= 1.0 for value in by_content.values())


def test_a_higher_floor_returns_fewer_items_in_the_same_order(credential, notes):
    low = _ask(credential, "acme billing plan", min_relevance=0)
    floor = low.items[1].relevance - 0.00005  # items show relevance rounded to 4 places; the floor reads it unrounded
    high = _ask(credential, "acme billing plan", min_relevance=floor)
    assert [i.record.pk for i in high.items] == [i.record.pk for i in low.items if i.relevance >= floor]
    assert high.below_floor == len(low.items) - len(high.items) > 0


def test_a_query_without_terms_is_not_judged(credential, notes):
    result = _ask(credential, "")
    assert len(result.items) == len(NOTES) and all(item.relevance == 1.0 for item in result.items)


def test_a_golden_question_whose_record_falls_under_the_floor_is_a_miss(credential, notes, reviewer_actor):
    agent = credential.agent
    for question, expected in (("who is the billing contact", notes[0]), ("which flavour of gelato", notes[5])):
        golden_question_create(
            actor=reviewer_actor,
            tenant=agent.tenant,
            agent=agent,
            purpose="support",
            question=question,
            expected=[expected.pk],
            k=10,
        )
    (run,) = run_golden_sets(tenants=[agent.tenant])
    assert (run.questions, run.hits) == (2, 1)  # the lunch note answers nothing about gelato: not silently passed


def test_relevance_is_the_same_whichever_way_the_database_counts_the_words(credential, notes):
    # Within a subject PostgreSQL counts each word's df in the statement that scores the records
    # (and reports it to the ranking), across a purpose it looks them up: the relevance must agree.
    everywhere = _ask(credential, "billing contact plan", min_relevance=0)
    in_subject = _ask(credential, "billing contact plan", min_relevance=0, subject="customer/acme")
    assert [(i.record.pk, i.relevance) for i in in_subject.items] == [(i.record.pk, i.relevance) for i in everywhere.items]
    assert everywhere.items[0].relevance > 0.01


def test_a_recall_nothing_answers_reads_no_records_around_its_candidates(credential, write, monkeypatch):
    # Every candidate and any neighbour of one is under the floor whatever the records say, and the
    # floor's scan stays within the candidates: the second stage's reads could change no answer.
    from memory.search import rerank

    for n in range(12):
        write(content=f"Routine note {n} about the weather.", provenance={"session_id": "s-1", "turn_id": f"t{n}"})
    reads: list[int] = []
    around = rerank.ScopedRecords.around
    monkeypatch.setattr(
        rerank.ScopedRecords, "around", lambda self, ids, window: reads.append(len(ids)) or around(self, ids, window)
    )
    result = _ask(credential, "which flavour of gelato do they pick", limit=2)
    assert result.items == [] and result.below_floor == 10 and reads == []  # SCAN_DEPTH x limit rows judged
    monkeypatch.setattr(rerank, "_all_under_floor", lambda *args: False)
    read = _ask(credential, "which flavour of gelato do they pick", limit=2)
    assert (read.items, read.below_floor) == (result.items, result.below_floor) and reads == [12]
    everything = _ask(credential, "which flavour of gelato do they pick", limit=2, min_relevance=0)
    assert len(everything.items) == 2 and reads == [12, 12]  # no floor: the neighbours and brevity rank them
