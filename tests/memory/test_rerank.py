"""Recall's second stage (memory.search.rerank): conversation neighbours and the time a query names,
each shown in score_parts, each changing the ranking only when it is on; neighbours only from the
hard-filtered scope."""

import itertools
import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from memory.models import MemoryRecord
from memory.recall import RecallQuery, recall
from memory.search import active_index
from memory.search.build import build_and_promote, request_rebuild
from memory.search.recipes import SECOND_STAGE_DEFAULTS, lexical_recipe, second_stage
from memory.search.rerank import ListedRecords, ScopedRecords, Settings
from memory.services import memory_retire

pytestmark = pytest.mark.django_db


_built = itertools.count()


def _with_recipe(**keys):
    """A lexical index with these second-stage keys (the rest as the active one's), made active."""
    return build_and_promote(request_rebuild(name=f"second-stage-{next(_built)}", recipe={**active_index().recipe, **keys}).pk)


def _ask(credential, query: str, limit: int = 3, **fields):
    return recall(credential=credential, q=RecallQuery(query=query, purpose="support", limit=limit, min_relevance=0, **fields))


def _turn(write, session: str, turn: int, content: str, **overrides):
    return write(
        content=content,
        provenance={"session_id": session, "turn_id": f"{session}-t{turn}", "uri": None, **overrides.pop("provenance", {})},
        **overrides,
    )


@pytest.fixture
def conversation(write):
    """Ana says she quit (the question's words), the next turn says why (none of them); other
    records share some of the words, outside any session."""
    asked = _turn(write, "s-9", 9, "Ana: I quit my job last week, finally!")
    reply = _turn(write, "s-9", 10, "Ana: My manager took credit for my project one time too many.")
    _turn(write, "s-9", 11, "Ben: That is awful, I am sorry.")
    for text in ("Ana: The job fair was crowded.", "Ana: I quit sugar in May.", "Ana: My job has a new canteen."):
        write(content=text, provenance={"session_id": None, "turn_id": None})
    return asked, reply


def test_the_reply_to_the_matching_turn_is_returned_only_with_the_neighbour_signal(credential, conversation):
    asked, reply = conversation
    _with_recipe(neighbour_window=0)
    without = _ask(credential, "Why did Ana quit her job?")
    assert without.items[0].record.pk == asked.pk and reply.pk not in [i.record.pk for i in without.items]

    _with_recipe(neighbour_window=1, neighbour_weight=0.8)
    found = _ask(credential, "Why did Ana quit her job?")
    ranked = [i.record.pk for i in found.items]
    assert ranked[0] == asked.pk and reply.pk in ranked
    item = found.items[ranked.index(reply.pk)]
    assert item.score_parts["neighbour"] > 0 and "neighbour" not in found.items[0].score_parts  # the best match gains nothing
    assert item.score == pytest.approx(sum(item.score_parts.values()), abs=1e-3)


def test_neighbours_come_only_from_the_hard_filtered_scope(credential, write, reviewer_actor, make_credential, tenant):
    _with_recipe(neighbour_window=1, neighbour_weight=0.8)
    asked = _turn(write, "s-7", 1, "Ana: I quit my job last week, finally!")
    retired = _turn(write, "s-7", 2, "Ana: Retired: my manager took credit.")
    expired = _turn(write, "s-7", 3, "Ana: Expired: my manager took credit.")
    other_kind = _turn(write, "s-7", 4, "Ana: Other kind: my manager took credit.", kind="episodic")
    foreign = _turn(write, "s-7", 5, "Ana: Other agent.", credential_=make_credential(tenant, agent_slug="other-bot"))
    reply = _turn(write, "s-7", 6, "Ana: My manager took credit for my project one time too many.")
    for n in range(3):
        write(content=f"Ana: job note {n}.", provenance={"session_id": None, "turn_id": None})
    memory_retire(record_id=retired.pk, expected_version=retired.version, actor=reviewer_actor, note="gone")
    MemoryRecord.objects.filter(pk=expired.pk).update(
        created_at=timezone.now() - timedelta(hours=2), expires_at=timezone.now() - timedelta(seconds=1)
    )
    ranked = [i.record.pk for i in _ask(credential, "Why did Ana quit her job?", limit=10, kinds=["preference"]).items]
    assert {retired.pk, expired.pk, other_kind.pk, foreign.pk}.isdisjoint(ranked)
    # the out-of-scope turns in between take no place: the reply is the asked turn's next neighbour
    assert ranked[:2] == [asked.pk, reply.pk]


def test_scoped_and_listed_records_order_a_session_alike(credential, write):
    # turn ids in natural order (t9 before t10); a batch writes one created_at for all its records
    records = [_turn(write, "s-3", n, f"Turn {n}.") for n in (10, 9, 11, 1)]
    MemoryRecord.objects.filter(pk__in=[r.pk for r in records]).update(created_at=timezone.now() - timedelta(minutes=5))
    scoped = ScopedRecords(MemoryRecord.objects.filter(session_id="s-3"))
    listed = ListedRecords(MemoryRecord.objects.filter(session_id="s-3"))
    middle = records[0]  # t10: neighbours t9 and t11
    for found in (scoped.around([middle.pk], 1), listed.around([middle.pk], 1)):
        places = {f.record_id: f.position for f in found}
        assert set(places) == {records[1].pk, middle.pk, records[2].pk}
        assert places[records[1].pk] < places[middle.pk] < places[records[2].pk]


def test_neighbours_come_from_the_candidates_own_sequences_in_two_reads(write, django_assert_num_queries):
    # Candidates in (ana, s-1) and (ben, s-2): the records of (ana, s-2) and (ben, s-1) share a
    # subject with one candidate and a session with the other, and are nobody's neighbours.
    def turn(subject: str, session: str, n: int):
        return write(subject=subject, content=f"{subject} turn {n}.", provenance={"session_id": session, "turn_id": f"t{n}"})

    ana = [turn("customer/ana", "s-1", n) for n in (1, 2, 3)]
    ben = [turn("customer/ben", "s-2", n) for n in (1, 2, 3)]
    crossed = [turn("customer/ana", "s-2", n) for n in (1, 2)] + [turn("customer/ben", "s-1", n) for n in (1, 2)]
    alone = write(subject="customer/ana", content="no session", provenance={"session_id": None})
    scoped = ScopedRecords(MemoryRecord.objects.all())
    with django_assert_num_queries(2):
        found = scoped.around([ana[1].pk, ben[0].pk, alone.pk], 1)
    assert {f.record_id for f in found} == {*(r.pk for r in ana), ben[0].pk, ben[1].pk, alone.pk}
    assert not {f.record_id for f in found} & {r.pk for r in crossed}
    listed = ListedRecords(MemoryRecord.objects.select_related("kind"))
    assert {f.record_id for f in listed.around([ana[1].pk, ben[0].pk, alone.pk], 1)} == {f.record_id for f in found}


def test_a_record_observed_in_the_period_the_query_names_gains_time(credential, write):
    def noted(observed: str):
        return write(content="Ana went hiking with Tom.", provenance={"session_id": None, "observed_at": observed})

    in_march = noted("2024-03-10T10:00:00Z")
    other = noted("2023-06-01T10:00:00Z")  # newer: first on the priors alone
    MemoryRecord.objects.filter(pk=in_march.pk).update(confirmed_at=timezone.now() - timedelta(days=30))
    _with_recipe(time_weight=0.0)
    assert _ask(credential, "what did Ana do in March 2024").items[0].record.pk == other.pk
    _with_recipe(time_weight=0.3)
    found = _ask(credential, "what did Ana do in March 2024")
    assert found.items[0].record.pk == in_march.pk
    assert found.items[0].score_parts["time"] > 0 and "time" not in found.items[1].score_parts  # nine months away
    # a query naming no time adds no time part
    assert all("time" not in i.score_parts for i in _ask(credential, "what did Ana do").items)


def test_a_record_valid_during_the_period_counts_as_in_it(credential, write):
    valid = write(
        content="Ana lives in Porto.",
        valid_from="2021-01-01T00:00:00Z",
        provenance={"session_id": None, "observed_at": "2025-01-01T00:00:00Z"},
    )
    write(content="Ana lives in Porto now.", provenance={"session_id": None, "observed_at": "2025-01-01T00:00:00Z"})
    item = next(i for i in _ask(credential, "where did Ana live in 2022").items if i.record.pk == valid.pk)
    assert item.score_parts["time"] > 0


@pytest.mark.parametrize("query", ["in the year 99999", "on 31 February 2023", "between May and", "\x00 May \ud800 2023"])
def test_dates_in_a_query_never_break_recall(credential, write, query):
    write(content="Ana went hiking with Tom.")
    assert _ask(credential, query).items is not None


def test_an_index_stored_before_the_second_stage_reads_its_defaults():
    old = {"stemmer": "english", "stop_words": "english", "k1": 1.2, "b": 0.0, "analyser": lexical_recipe()["analyser"]}
    assert second_stage(old) == SECOND_STAGE_DEFAULTS
    settings = Settings.of(old)
    assert settings.neighbour_window == SECOND_STAGE_DEFAULTS["neighbour_window"]
    assert settings.min_relevance == SECOND_STAGE_DEFAULTS["min_relevance"]


@pytest.mark.parametrize(
    ("keys", "field"),
    [
        ({"neighbour_window": 9}, "neighbour_window"),
        ({"neighbour_window": 1.5}, "neighbour_window"),
        ({"neighbour_weight": -1}, "neighbour_weight"),
        ({"time_weight": "a lot"}, "time_weight"),
        ({"strip_periods": "yes"}, "strip_periods"),
        ({"min_relevance": 2}, "min_relevance"),
        ({"min_relevance": {"lexical": 0.1}}, "min_relevance"),
        ({"relevance": {"lexical": {"coverage": 1}}}, "relevance"),
        ({"relevance": {"other": {}}}, "relevance"),
        ({"rerank_depth": 0}, "rerank_depth"),
        ({"semantic_common_share": 1.5}, "semantic_common_share"),
        ({"semantic_common_share": "half"}, "semantic_common_share"),
    ],
)
def test_bad_second_stage_keys_are_refused(keys, field):
    from memory.errors import ValidationFailed

    with pytest.raises(ValidationFailed) as raised:
        lexical_recipe(keys)
    assert field in raised.value.errors


def test_one_floor_number_sets_both_modes():
    assert lexical_recipe({"min_relevance": 0.2})["min_relevance"] == {"lexical": 0.2, "hybrid": 0.2}


def test_reads_are_skipped_only_when_no_neighbour_could_lift_a_row_over_the_floor():
    # A head row a little under the floor could pass it with a strongly relevant neighbour's support,
    # so the records are read; with no neighbour weight, or a floor above any lift, they need not be.
    from memory.search.ranking import Ranked
    from memory.search.rerank import Query, _all_under_floor, _logistic

    coefficients = {"bias": -6.0, "coverage": 8.0, "neighbour": 4.0}
    query = Query(idfs={"gelato": 2.0, "flavour": 2.0})
    strong = Ranked(record_id=uuid.uuid4(), parts={"lexical": 2.0}, confirmed=0.0)  # half the query: coverage 0.5
    own = _logistic(-6.0 + 8.0 * 0.5)
    assert not _all_under_floor([strong], query, coefficients, own)  # it passes on its own
    lifted = _logistic(-6.0 + 8.0 * 0.5 + 4.0 * own)
    assert not _all_under_floor([strong], query, coefficients, (own + lifted) / 2)  # a neighbour could lift it
    assert _all_under_floor([strong], query, {**coefficients, "neighbour": 0.0}, (own + lifted) / 2)
    assert _all_under_floor([strong], query, coefficients, lifted * 1.001)


def test_a_reply_next_to_a_strong_match_keeps_the_relevance_its_own_words_would_not_give_it(credential, conversation):
    # The reply shares no word with the question but "Ana": its neighbour's support (the recipe's
    # relevance "neighbour") lifts its relevance, so a floor its own words would not pass keeps it.
    asked, reply = conversation
    question = "Why did Ana quit her job?"
    relevance = SECOND_STAGE_DEFAULTS["relevance"]
    without = {**relevance, "lexical": {**relevance["lexical"], "neighbour": 0.0}}
    assert relevance["lexical"]["neighbour"] > 0

    def judged(coefficients, floor=0.0):
        _with_recipe(relevance=coefficients)
        found = recall(credential=credential, q=RecallQuery(query=question, purpose="support", limit=5, min_relevance=floor))
        return {item.record.pk: item.relevance for item in found.items}

    alone, supported = judged(without), judged(relevance)
    assert supported[reply.pk] > 2 * alone[reply.pk] and supported[asked.pk] >= alone[asked.pk]  # support only raises
    floor = (alone[reply.pk] + supported[reply.pk]) / 2
    assert reply.pk in judged(relevance, floor) and reply.pk not in judged(without, floor)
