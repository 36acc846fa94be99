"""Recall's second stage as fitted on the dev part: a short turn of a conversation says less
(`brevity`), a fused row is judged on the query's scale rather than the pool's, and the candidates'
facts come with their neighbours in one query."""

import itertools
import types
import uuid
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from memory.models import MemoryRecord
from memory.recall import RecallQuery, recall
from memory.search import active_index
from memory.search.build import build_and_promote, request_rebuild
from memory.search.fusion import WEIGHT
from memory.search.ranking import Ranked
from memory.search.recipes import SECOND_STAGE_DEFAULTS, lexical_recipe
from memory.search.rerank import BREVITY_CHARS, ListedRecords, Query, ScopedRecords, Settings, brevity, rerank

pytestmark = pytest.mark.django_db

_built = itertools.count()
LONG = (
    "Ana: On weekends I restore old bicycles in the garage with my neighbour; it takes hours, the tools are "
    "older than both of us, and every frame we finish goes to the school down the road for the kids to ride."
)
SHORT = "Ana: Weekends, wow!"


def _with_recipe(**keys):
    """A lexical index with these second-stage keys (the rest as the active one's), made active."""
    return build_and_promote(request_rebuild(name=f"fitted-{next(_built)}", recipe={**active_index().recipe, **keys}).pk)


def _ask(credential, query: str, limit: int = 5):
    return recall(credential=credential, q=RecallQuery(query=query, purpose="support", limit=limit, min_relevance=0))


def _turn(write, session: str, turn: int, content: str, kind: str = "episodic"):
    return write(content=content, kind=kind, provenance={"session_id": session, "turn_id": f"{session}-t{turn}", "uri": None})


@pytest.fixture
def turns(write):
    """Two turns of two sessions that match "Ana" and "weekends" alike; the short one is newer, so
    it comes first on the priors alone."""
    long = _turn(write, "s-1", 1, LONG)
    short = _turn(write, "s-2", 1, SHORT)
    MemoryRecord.objects.filter(pk=long.pk).update(confirmed_at=timezone.now() - timedelta(minutes=5))
    return long, short


def test_a_short_turn_loses_to_a_turn_that_matches_as_much_and_says_more(credential, turns):
    long, short = turns
    assert len(LONG) >= BREVITY_CHARS > len(SHORT)
    _with_recipe(brevity_weight=0.0)
    without = _ask(credential, "what does Ana do on weekends")
    assert [i.record.pk for i in without.items[:2]] == [short.pk, long.pk]
    assert all("brevity" not in i.score_parts for i in without.items)

    _with_recipe(brevity_weight=0.2)
    found = _ask(credential, "what does Ana do on weekends")
    assert [i.record.pk for i in found.items[:2]] == [long.pk, short.pk]
    penalised = found.items[1]
    assert penalised.score_parts["brevity"] < 0 and "brevity" not in found.items[0].score_parts  # long enough
    assert penalised.score == pytest.approx(sum(penalised.score_parts.values()), abs=1e-3)


def test_a_short_note_outside_a_session_or_a_short_preference_loses_nothing(credential, write):
    note = write(content="Ana: weekends off.", kind="episodic", provenance={"session_id": None})
    preference = _turn(write, "s-3", 1, "Ana prefers weekends off.", kind="preference")
    items = _ask(credential, "Ana weekends").items
    assert {i.record.pk for i in items} == {note.pk, preference.pk}
    assert all("brevity" not in i.score_parts for i in items)


def test_brevity_orders_but_leaves_relevance_to_the_words(credential, turns):
    # a short turn can be the answer ("Yes, last May."): no floor drops it for its length
    judged = []
    for weight in (0.0, 0.2):
        _with_recipe(brevity_weight=weight)
        judged.append({i.record.pk: i.relevance for i in _ask(credential, "what does Ana do on weekends").items})
    assert judged[0] == judged[1]
    long, short = turns
    assert judged[1][short.pk] == judged[1][long.pk]


def test_brevity_weight_is_part_of_the_recipe_and_bounded():
    from memory.errors import ValidationFailed

    assert lexical_recipe()["brevity_weight"] == SECOND_STAGE_DEFAULTS["brevity_weight"]
    assert Settings.of({}).brevity_weight == SECOND_STAGE_DEFAULTS["brevity_weight"]  # an older index reads the default
    for bad in (-0.1, 1.5, "short"):
        with pytest.raises(ValidationFailed) as raised:
            lexical_recipe({"brevity_weight": bad})
        assert "brevity_weight" in raised.value.errors


def _fused(record_id, *, lexical: float, cosine: float, fused: float) -> Ranked:
    priors = {"authority": 0.8, "confidence": 0.45, "recency": 1.0}
    return Ranked(
        record_id=record_id,
        parts={"lexical": lexical, "semantic": cosine, "fusion": fused - lexical - cosine, **priors},
        confirmed=0,
    )


def test_a_fused_row_is_judged_on_the_query_scale_not_the_pools():
    # "ana" opens every turn; "banjo" is the word asked about, and no candidate has it. On the
    # pool's scale the name-only match is a full lexical match (it is the pool's best BM25).
    name_only, paraphrase = uuid.uuid4(), uuid.uuid4()
    rows = [
        _fused(name_only, lexical=1.0, cosine=0.2, fused=WEIGHT * 0.5 * (1.0 + 0.0)),
        _fused(paraphrase, lexical=0.0, cosine=0.6, fused=WEIGHT * 0.5 * (0.0 + 1.0)),
    ]
    rows[0] = Ranked(record_id=name_only, parts={**rows[0].parts, "fusion": rows[0].parts["fusion"] + 0.1}, confirmed=0)
    assert rows[0].score > rows[1].score  # the first stage's order
    query = Query(idfs={"ana": 1.0, "banjo": 3.0}, mode="hybrid")
    settings = Settings.of({**SECOND_STAGE_DEFAULTS, "brevity_weight": 0.0})
    ranked = list(
        rerank(
            iter(rows),
            settings=settings,
            query=query,
            records=ListedRecords([]),
            now=timezone.now(),
            fusion=types.SimpleNamespace(size=len(rows)),
        )
    )
    assert [row.record_id for row in ranked] == [paraphrase, name_only]
    # fused relevance = WEIGHT x (ALPHA x share of the query's weight matched + (1 - ALPHA) x cosine)
    first, second = ranked
    assert first.parts["lexical"] + first.parts["semantic"] + first.parts["fusion"] == pytest.approx(WEIGHT * 0.5 * 0.6)
    assert second.parts["lexical"] + second.parts["semantic"] + second.parts["fusion"] == pytest.approx(
        WEIGHT * 0.5 * (0.25 + 0.2)
    )


def test_candidates_outside_a_session_come_with_their_facts_and_no_neighbours(write):
    notes = [write(content=f"Note {n} about the coast.", provenance={"session_id": None}) for n in range(3)]
    turn = _turn(write, "s-5", 1, "Ana: the coast was cold.")
    _turn(write, "s-5", 2, "Ben: it always is.")
    ids = [notes[1].pk, turn.pk]
    for records in (ScopedRecords(MemoryRecord.objects.all()), ListedRecords(MemoryRecord.objects.all())):
        found = {f.record_id: f for f in records.around(ids, 2)}
        assert notes[0].pk not in found and notes[2].pk not in found  # notes are nobody's neighbours
        assert found[notes[1].pk].group is None and found[notes[1].pk].length == len(notes[1].content)
        assert found[turn.pk].group is not None and len(found) == 3
        assert brevity(found[notes[1].pk]) == 0.0 and brevity(found[turn.pk]) > 0


def test_a_query_naming_a_date_runs_no_more_queries_than_one_that_does_not(credential, write):
    for n in range(4):
        _turn(write, "s-8", n, f"Ana: hiking note {n}.")
    _ask(credential, "hiking")  # warm: the default index exists
    counts = []
    for query in ("Ana hiking trip", "Ana hiking in March 2024"):
        with CaptureQueriesContext(connection) as captured:
            assert _ask(credential, query).items
        counts.append(len(captured))
    assert counts[1] == counts[0]


def test_the_whole_fused_pool_is_re_ranked_past_the_recipes_depth():
    # the first stage scored every row of its pool already: the best on the query's scale comes
    # first even when it lies beyond `rerank_depth`
    ids = [uuid.uuid4() for _ in range(3)]
    rows = [
        _fused(ids[0], lexical=1.0, cosine=0.2, fused=8.0),
        _fused(ids[1], lexical=1.0, cosine=0.1, fused=7.0),
        _fused(ids[2], lexical=0.0, cosine=0.7, fused=6.0),
    ]
    query = Query(idfs={"ana": 1.0, "banjo": 3.0}, mode="hybrid")
    settings = Settings.of({**SECOND_STAGE_DEFAULTS, "rerank_depth": 1, "brevity_weight": 0.0})

    def first(size: int) -> uuid.UUID:
        pool = types.SimpleNamespace(size=size)
        return next(
            rerank(iter(rows), settings=settings, query=query, records=ListedRecords([]), now=timezone.now(), fusion=pool)
        ).record_id

    assert first(size=1) == ids[0]  # a pool of one: the rest are the first stage's later rows
    assert first(size=3) == ids[2]
