"""Recall as a function: hard filters first, explainable ranking (BM25 within the scope, the same on
both databases), token budget."""

import itertools
import math
import re
import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from memory.engine.postgres import ranking as postgres_ranking
from memory.errors import ScopeDenied, ValidationFailed
from memory.models import MemoryRecord
from memory.recall import RecallQuery, parse_recall, recall, recall_for_agent
from memory.search import active_index, fusion, ranking
from memory.search.build import build_and_promote, request_rebuild
from memory.search.ranking import Ranked
from memory.search.semantic import Similar, Similarity
from memory.services import memory_retire

pytestmark = pytest.mark.django_db


@pytest.fixture
def small_pages(monkeypatch):
    """Read ranked rows a few at a time, so the paths that read further are taken."""
    monkeypatch.setattr(ranking, "FIRST_FETCH", 2)
    monkeypatch.setattr(postgres_ranking, "PAGE", 3)
    monkeypatch.setattr(postgres_ranking, "PAGE_BEST", 1)
    monkeypatch.setattr(postgres_ranking, "SMALL_SCOPE", 0)  # PostgreSQL: choose sources even for a test-sized scope


def _recall(credential, **body):
    """Recall with no relevance floor unless the body names one: most tests here hold the first
    stage's ranking, and test_relevance_floor.py the floor."""
    return recall(credential=credential, q=parse_recall({"purpose": "support", "min_relevance": 0, **body}))


def _alone(write, **overrides):
    """A record written outside any session: no neighbours in the second stage, so its rank is the
    first stage's (BM25 and the priors) alone."""
    return write(**overrides, provenance={"session_id": None, "turn_id": None})


# Within a subject, the statement that scores the records also counts the words among them,
# whatever their time: the time filters apply to what it returns.
@pytest.mark.parametrize("subject", [None, "customer/acme"])
def test_only_active_unexpired_valid_records_of_the_scope_are_recalled(subject, write, credential, tenant, make_credential):
    active = write(content="Acme prefers email for invoices.")
    write(content="Acme prefers email, quarantined.", authority="agent", provenance={"source_type": "agent_inference"})
    write(content="Acme prefers email, not valid yet.", valid_from=(timezone.now() + timedelta(days=1)).isoformat())
    expired = write(content="Acme prefers email, expired.", ttl_seconds=60)
    MemoryRecord.objects.filter(pk=expired.pk).update(
        created_at=timezone.now() - timedelta(hours=2), expires_at=timezone.now() - timedelta(seconds=1)
    )
    other_agent = make_credential(tenant, agent_slug="sales-bot")
    write(credential_=other_agent, content="Acme prefers email, other agent.")
    elsewhere = write(content="Acme prefers email, another subject.", subject="customer/globex")
    result = _recall(credential, query="email", **({"subject": subject} if subject else {}))
    assert {item.record.pk for item in result.items} == ({active.pk} if subject else {active.pk, elsewhere.pk})


@pytest.mark.parametrize("subject", [None, "customer/acme"])
def test_the_ranking_itself_yields_no_record_outside_its_time(subject, write, credential):
    # Recall's loading query would drop such rows anyway: this checks the index's own filter, which
    # within a subject applies after the words are counted over every record.
    timely = write(content="Acme prefers email for invoices.")
    write(content="Acme prefers email, not valid yet.", valid_from=(timezone.now() + timedelta(days=1)).isoformat())
    expired = write(content="Acme prefers email, expired.", ttl_seconds=60)
    MemoryRecord.objects.filter(pk=expired.pk).update(
        created_at=timezone.now() - timedelta(hours=2), expires_at=timezone.now() - timedelta(seconds=1)
    )
    scope = ranking.Scope(
        tenant_id=credential.agent.tenant_id, agent_id=credential.agent.pk, purpose="support", now=timezone.now(), subject=subject
    )
    ranked = ranking.rank(active_index(), scope, "email")
    assert [row.record_id for row in ranked] == [timely.pk]
    assert ranked.scope_size == 3  # the collection still counts them until the sweep


def test_lexical_relevance_ranks_matching_content_first(write, credential):
    write(content="The office plant needs water on Mondays.")
    match = write(content="Acme wants to be contacted by email, never by phone.")
    result = _recall(credential, query="how does acme want to be contacted by email")
    assert result.items[0].record.pk == match.pk
    first = result.items[0]
    assert first.score_parts["lexical"] > 0
    assert first.score == pytest.approx(sum(first.score_parts.values()), abs=1e-3)
    assert first.context.startswith("[preference | user | confirmed ")
    assert first.context.endswith(match.content)


def test_token_budget_skips_what_does_not_fit_and_counts_it(write, credential):
    write(content="short email note")
    write(content="email " + "very long text " * 60)
    write(content="another short email note")
    result = _recall(credential, query="email", token_budget=80)
    assert result.omitted_for_budget == 1
    assert len(result.items) == 2
    assert result.tokens_used == sum(item.tokens for item in result.items) <= 80


def test_purpose_not_allowed_is_denied(credential):
    with pytest.raises(ScopeDenied):
        _recall(credential, purpose="billing", query="x")


def test_bad_recall_requests_are_validation_errors(credential):
    with pytest.raises(ValidationFailed) as exc:
        parse_recall({"purpose": "support", "limit": 0, "kinds": ["nope"], "everything": True})
    assert {"limit", "kinds", "everything"} <= set(exc.value.errors)


def test_recall_items_are_written_out_as_their_declared_fields_say(write, credential):
    """RecallItemSerializer writes its items out directly (for speed): the same data, key for key,
    as DRF's generic walk over the fields it declares for the schema."""
    from rest_framework import serializers

    from memory.api.serializers import RecallItemSerializer

    write(content="Prefers email for invoices.")
    write(content="Prefers email, said once.", provenance={"uri": None, "source_version": "v2", "observed_at": None})
    items = recall(credential=credential, q=RecallQuery(query="prefers email", purpose="support")).items
    assert len(items) == 2 and {item.record.observed_at is None for item in items} == {True, False}
    serializer = RecallItemSerializer()
    written = [serializer.to_representation(item) for item in items]
    assert written == [serializers.Serializer.to_representation(serializer, item) for item in items]
    assert {item["provenance"]["uri"] is None for item in written} == {True, False}


def test_recall_marks_last_used(write, credential):
    record = write(content="email please")
    _recall(credential, query="email")
    record.refresh_from_db()
    assert record.last_used_at is not None


def test_a_record_sharing_only_some_query_words_still_ranks_first(write, credential):
    write(content="The office plant needs water on Mondays.")
    partial = write(content="Send the quarterly invoices by email.")
    result = _recall(credential, query="how should acme receive invoices and reminders")
    assert result.items[0].record.pk == partial.pk
    assert result.items[0].score_parts["lexical"] > 0
    assert result.items[1].score_parts["lexical"] == 0


# --------------------------------------------------------------------------------------------
# BM25 ranking, the same on both databases

# One scope: a rare word in one record, a common word repeated in most of the others. The old
# ranking (ts_rank_cd over an OR of the words: 0.1 per occurrence of any word) put the record
# saying "go" four times first; BM25 weighs the rare word.
CORPUS = [
    "Planning a roadtrip along the coast in June.",
    "Go home.",
    "Go to the office, go home.",
    "Go to the office, go home, go to bed.",
    "Go to the office, go home, go to bed, then go again.",
    "Lunch with the team on Friday.",
]


def _bm25(corpus: list[str], terms: list[str], k1: float, b: float) -> list[float]:
    """BM25 from first principles: within-scope idf, tf saturation (k1), length normalisation (b)
    over whitespace-separated words; these words stem to themselves on both databases."""
    words = [re.findall(r"[a-z]+", text.lower()) for text in corpus]
    lengths = [len(text.split()) for text in corpus]
    n, avgdl = len(corpus), sum(lengths) / len(corpus)
    scores = []
    for tokens, length in zip(words, lengths, strict=True):
        score = 0.0
        for term in terms:
            tf = tokens.count(term)
            if tf:
                df = sum(1 for other in words if term in other)
                idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
                score += idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * length / avgdl))
        scores.append(score)
    return scores


@pytest.mark.parametrize("recipe", [{}, {"k1": 1.2, "b": 0.75}], ids=["default recipe", "length-normalised"])
def test_a_rare_word_outranks_a_common_word_repeated_in_many_records(write, credential, recipe):
    records = [_alone(write, content=text) for text in CORPUS]
    if recipe:  # the active index rebuilt with this recipe (no golden question holds it back)
        build_and_promote(request_rebuild(name=active_index().name, recipe=recipe).pk)
    index = active_index()
    result = _recall(credential, query="did we go on that roadtrip?")

    expected = _bm25(CORPUS, ["go", "roadtrip"], index.recipe["k1"], index.recipe["b"])
    assert result.terms == ["go", "roadtrip"]  # stop words dropped, each term once
    assert result.items[0].record.pk == records[0].pk
    assert [item.record.pk for item in result.items] == [
        records[i].pk for i in sorted(range(len(CORPUS)), key=lambda i: -expected[i])
    ]
    by_id = {item.record.pk: item.score_parts["lexical"] for item in result.items}
    assert [by_id[record.pk] for record in records] == [pytest.approx(score, abs=1e-4) for score in expected]
    assert result.candidates == len(CORPUS)


def test_each_query_term_counts_once_whatever_its_form(write, credential):
    for text in CORPUS:
        write(content=text)
    once = _recall(credential, query="go roadtrip")
    repeated = _recall(credential, query="Going? go, GO... roadtrip roadtrip")
    assert repeated.terms == once.terms == ["go", "roadtrip"]
    assert [(i.record.pk, i.score_parts["lexical"]) for i in repeated.items] == [
        (i.record.pk, i.score_parts["lexical"]) for i in once.items
    ]


def test_term_rarity_is_counted_within_the_scope_not_across_agents(write, credential, tenant, make_credential):
    records = [write(content=text) for text in CORPUS]
    before = _recall(credential, query="go roadtrip")
    other = make_credential(tenant, agent_slug="travel-bot")
    for n in range(5):
        write(credential_=other, content=f"Roadtrip number {n}: the coast again.")
    after = _recall(credential, query="go roadtrip")
    assert [(i.record.pk, i.score_parts["lexical"]) for i in after.items] == [
        (i.record.pk, i.score_parts["lexical"]) for i in before.items
    ]
    assert after.items[0].record.pk == records[0].pk


def test_rarity_follows_the_subject_when_the_recall_names_one(write, credential):
    write(content="Roadtrip to the coast.", subject="customer/acme")
    for n in range(4):
        write(content=f"Roadtrip {n} planned.", subject="customer/globex")
    acme_only = _recall(credential, query="roadtrip", subject="customer/acme")
    everyone = _recall(credential, query="roadtrip")
    assert acme_only.candidates == 1 and everyone.candidates == 5
    # one record in one: rare there; in five of five it is no signal at all
    assert acme_only.items[0].score_parts["lexical"] > everyone.items[0].score_parts["lexical"]


def test_stemming_matches_other_forms_of_a_word(write, credential):
    write(content="The office plant needs water on Mondays.")
    contact = write(content="Acme contacts us through the ticket portal.")
    result = _recall(credential, query="how is acme contacted")
    assert result.items[0].record.pk == contact.pk and result.items[0].score_parts["lexical"] > 0


def test_a_query_of_stop_words_only_is_ranked_by_the_other_parts(write, credential):
    low, high, middle = (write(content=f"Note {n}.", confidence=c) for n, c in ((1, 0.2), (2, 0.9), (3, 0.5)))
    result = _recall(credential, query="what is the, and of it?")
    assert result.terms == []
    assert [item.record.pk for item in result.items] == [high.pk, middle.pk, low.pk]
    assert all(item.score_parts["lexical"] == 0 for item in result.items)


@pytest.mark.parametrize(
    "query",
    [
        "'' foo",
        "'",
        "''''",
        "foo'",
        "\\ foo \\\\",
        "foo & | ! ( ) : * <-> bar",
        'foo "bar',
        "NEAR(foo bar) OR AND NOT",
        "foo:* ^bar {baz} -qux +quux",
        "\x00foo",
        "\ud800foo",
        "ａｃｍｅ ｆｏｏ",
        "😀 foo",
        "x" * 1000,
    ],
)
def test_no_query_text_can_break_the_full_text_search(write, credential, query):
    match = write(content="The foo widget is blue.")
    # Straight to recall (the API refuses NUL and lone surrogates before this): never a database error.
    result = recall(credential=credential, q=RecallQuery(query=query, purpose="support", min_relevance=0))
    if "foo" in query.replace("ｆｏｏ", "foo"):
        assert result.items[0].record.pk == match.pk


def test_an_older_match_is_found_behind_many_newer_records(write, credential, small_pages):
    old = write(content="The roadtrip starts in Lisbon.")
    MemoryRecord.objects.filter(pk=old.pk).update(
        created_at=timezone.now() - timedelta(days=90), confirmed_at=timezone.now() - timedelta(days=90)
    )
    for n in range(12):
        write(content=f"Unrelated note number {n}.")
    result = _recall(credential, query="roadtrip", limit=3)
    assert result.items[0].record.pk == old.pk


def test_score_parts_name_every_part_and_the_score_is_their_sum(write, credential):
    write(content="Acme wants invoices by email.")
    write(content="Unrelated.")
    for item in _recall(credential, query="invoices").items:
        # the second stage adds `neighbour` (and `time`) only where they add something
        assert (
            {"lexical", "authority", "confidence", "recency"}
            <= set(item.score_parts)
            <= {
                "lexical",
                "authority",
                "confidence",
                "recency",
                "neighbour",
            }
        )
        assert item.score == pytest.approx(sum(item.score_parts.values()), abs=1e-9)


def test_ties_are_broken_by_relevance_before_age():
    older_but_relevant = Ranked(uuid.uuid4(), {"lexical": 1.0, "authority": 0.5, "confidence": 0.25, "recency": 0.25}, 1.0)
    newer = Ranked(uuid.uuid4(), {"lexical": 0.5, "authority": 1.0, "confidence": 0.25, "recency": 0.25}, 2.0)
    newest_same_relevance = Ranked(uuid.uuid4(), {"lexical": 0.5, "authority": 1.0, "confidence": 0.25, "recency": 0.25}, 3.0)
    ordered = sorted([newer, newest_same_relevance, older_but_relevant], key=Ranked.sort_key)
    assert ordered == [older_but_relevant, newest_same_relevance, newer]


def test_context_line_says_when_the_claim_was_observed_and_last_confirmed(write, credential):
    record = write(content="Acme wants invoices by email.", provenance={"observed_at": "2026-10-02T08:00:00Z"})
    (item,) = _recall(credential, query="invoices").items
    confirmed = f"{record.confirmed_at:%Y-%m-%d}"
    assert item.context == (
        f"[preference | user | confirmed {confirmed} | source user_turn {record.source_uri} | "
        f"observed 2026-10-02] Acme wants invoices by email."
    )


def test_a_record_leaves_recall_ranking_the_moment_it_stops_being_active(write, credential, reviewer_actor):
    kept = write(content="Roadtrip to the coast.")
    gone = write(content="Roadtrip to the mountains.")
    assert {i.record.pk for i in _recall(credential, query="roadtrip").items} == {kept.pk, gone.pk}
    memory_retire(record_id=gone.pk, expected_version=gone.version, actor=reviewer_actor, note="")
    result = _recall(credential, query="roadtrip")
    assert [i.record.pk for i in result.items] == [kept.pk] and result.candidates == 1


def test_recall_for_agent_applies_the_hard_filters_without_a_token(write, credential, tenant, make_credential):
    mine = write(content="Roadtrip to the coast.")
    write(content="Roadtrip for billing.", purpose="billing", credential_=make_credential(tenant, purposes=("billing",)))
    result = recall_for_agent(agent=credential.agent, q=RecallQuery(query="roadtrip", purpose="support"))
    assert [i.record.pk for i in result.items] == [mine.pk]
    mine.refresh_from_db()
    assert mine.last_used_at is None  # golden runs and reviewer tools do not count as use


def test_the_ranking_is_the_same_however_few_rows_are_read_at_a_time(write, credential, monkeypatch):
    words = ["roadtrip", "coast", "office", "invoice", "lunch", "go"]
    for n in range(24):
        text = " ".join(words[(n * k) % len(words)] for k in range(1, 2 + n % 5))
        write(
            content=f"{text} note {n}.",
            confidence=round(0.3 + (n % 7) / 10, 2),
            authority="agent" if n % 4 == 0 else "user",
            provenance={"source_type": "agent_inference"} if n % 4 == 0 else {},
        )
    query = {"query": "roadtrip coast go lunch", "limit": 50}
    full = _recall(credential, **query)
    monkeypatch.setattr(ranking, "FIRST_FETCH", 2)
    monkeypatch.setattr(postgres_ranking, "PAGE", 3)
    monkeypatch.setattr(postgres_ranking, "SMALL_SCOPE", 0)
    paged = _recall(credential, **query)
    assert [(i.record.pk, i.score_parts) for i in paged.items] == [(i.record.pk, i.score_parts) for i in full.items]
    scores = [item.score for item in full.items]
    assert scores == sorted(scores, reverse=True)
    assert len(full.items) == full.candidates == MemoryRecord.objects.filter(status="active").count()
    assert any(item.score_parts["lexical"] == 0 for item in full.items)  # non-matches follow, by their priors


def _stream(asked: list[int], size: int = 300):
    """A ranked stream of `size` rows read the way an engine's statements are (`ranking.paged`),
    each read's LIMIT recorded in `asked`."""
    ids = [uuid.UUID(int=n + 1) for n in range(size)]

    def read(limit: int) -> list[Ranked]:
        asked.append(limit)
        priors = {"authority": 0.8, "confidence": 0.4, "recency": 0.5}
        return [
            Ranked(record_id=pk, parts={"lexical": float(size - n), **priors}, confirmed=0.0) for n, pk in enumerate(ids[:limit])
        ]

    return ranking.paged(read)


def test_fusion_reads_its_pool_of_the_lexical_ranking_in_one_statement_per_stream():
    # Scoring a common word's records costs about the same for 50 rows as for 200: a stream read
    # 50 at first and then 200 ran its statement twice to give the 100 fusion takes.
    asked: list[int] = []
    assert len(list(itertools.islice(_stream(asked), 100))) == 100
    assert asked == [ranking.FIRST_FETCH, 4 * ranking.FIRST_FETCH]  # a reader that said nothing

    asked.clear()
    with ranking.reading(fusion.DEPTH):
        assert len(list(itertools.islice(_stream(asked), fusion.DEPTH))) == fusion.DEPTH
    assert asked == [fusion.DEPTH]
    asked.clear()
    list(itertools.islice(_stream(asked), 10))
    assert asked == [ranking.FIRST_FETCH]  # only within

    asked.clear()
    now = timezone.now()
    similarity = Similarity(top=[Similar(uuid.uuid4(), 0.5, "user", 0.9, now)])
    fused = list(itertools.islice(fusion.Fusion(_stream(asked), similarity, now=now), fusion.DEPTH + 1))
    assert asked == [fusion.DEPTH] and len(fused) == fusion.DEPTH + 1


# PostgreSQL chooses how to find the best rows (memory.engine.postgres.ranking.sources); each choice must give
# the same rows in the same order: the whole scope scored in one statement is the reference (within
# a subject: with each word's df counted by that statement). (On SQLite, which ranks in one way,
# the test checks reading a few rows at a time.)
STRATEGIES = {
    "within a subject: matches scored with their df counted, the rest walked": {"SMALL_SCOPE": 0},
    "within a subject: df counted through the GIN index first": {"NARROW_COUNTED": 0},
    "within a subject: df by GIN counts, per combination of terms": {"NARROW_COUNTED": 0, "SMALL_SCOPE": 0, "COMMON_SHARE": 2.0},
    "records holding any rarer term scored in one statement": {"SMALL_SCOPE": 0, "COMMON_SHARE": 2.0},
    "records holding any rarer term, some terms common": {"SMALL_SCOPE": 0, "COMMON_SHARE": 0.3},
    "per combination of terms": {"SMALL_SCOPE": 0, "COMMON_SHARE": 2.0, "SEVERAL_WHOLE": 0, "ANY_WHOLE": -1},
    "records holding two rarer terms found in one statement": {"SMALL_SCOPE": 0, "COMMON_SHARE": 2.0, "ANY_WHOLE": -1},
    "per term (MaxScore)": {"SMALL_SCOPE": 0, "COMMON_SHARE": 2.0, "SUBSET_TERMS": 0, "ANY_WHOLE": -1},
    "every term common (walk by priors)": {"SMALL_SCOPE": 0, "COMMON_SHARE": 0.0},
    "some terms common": {"SMALL_SCOPE": 0, "COMMON_SHARE": 0.3, "ANY_WHOLE": -1},
    "one-term sets walked, given up after a page": {"SMALL_SCOPE": 0, "COMMON_SHARE": 2.0, "WALK_SHARE": 0.0, "ANY_WHOLE": -1},
    "one-term sets walked as long as it helps": {"SMALL_SCOPE": 0, "COMMON_SHARE": 2.0, "WALK_SHARE": 1e9, "ANY_WHOLE": -1},
    "per term, some terms common": {"SMALL_SCOPE": 0, "COMMON_SHARE": 0.3, "SUBSET_TERMS": 0, "ANY_WHOLE": -1},
}


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_every_way_postgresql_finds_the_best_rows_gives_the_same_ranking(strategy, write, credential, monkeypatch):
    vocabulary = ["roadtrip", "coast", "office", "invoice", "lunch", "portal", "acme", "email"]
    now = timezone.now()
    for n in range(60):
        # Words from a skewed spread (the first ones in most records), some repeated (tf > 1).
        text = " ".join(vocabulary[min((n * 7 + k * 3) % 11, (n + k) % 8)] for k in range(1 + n % 6))
        record = write(
            content=f"{text} {'roadtrip' if n % 9 == 0 else ''} note {n}.",
            confidence=round(0.2 + (n % 8) / 10, 2),
            authority="agent" if n % 5 == 0 else "user",
            subject="customer/acme" if n % 3 else "customer/globex",
            provenance={"source_type": "agent_inference"} if n % 5 == 0 else {},
        )
        MemoryRecord.objects.filter(pk=record.pk).update(confirmed_at=now - timedelta(days=(n * 13) % 90, minutes=n))
    MemoryRecord.objects.filter(status="quarantined").update(status="active")  # the agent's own inferences too
    # (query, limit, subject): the subject's queries read past the matches into the records holding none of the words.
    queries = [
        ("roadtrip coast lunch acme", 50, None),
        ("roadtrip email portal office invoice", 7, None),
        ("coast", 4, None),
        ("unknown words", 5, None),
        ("roadtrip coast lunch acme", 40, "customer/acme"),
        ("email portal invoice", 12, "customer/acme"),
        ("coast office", 20, "customer/globex"),
    ]

    def ranked(query: str, limit: int, subject: str | None) -> list[tuple]:  # at one moment, so recency cannot move between calls
        body = {"purpose": "support", "query": query, "limit": limit, "min_relevance": 0}
        q = parse_recall({**body, **({"subject": subject} if subject else {})})
        return [(i.record.pk, i.score_parts) for i in recall(credential=credential, q=q, now=now).items]

    reference = {query: ranked(*query) for query in queries}
    monkeypatch.setattr(ranking, "FIRST_FETCH", 2)
    monkeypatch.setattr(postgres_ranking, "PAGE", 3)
    monkeypatch.setattr(postgres_ranking, "PAGE_BEST", 1)  # a page holds back its two weaker rows
    for name, value in STRATEGIES[strategy].items():
        monkeypatch.setattr(postgres_ranking, name, value)
    for query in queries:
        assert len(reference[query]) == query[1]
        assert ranked(*query) == reference[query], query


def test_a_record_without_the_words_comes_before_a_weaker_match_when_its_priors_are_higher(write, credential, monkeypatch):
    # The records holding none of the query's words are a source of their own (PostgreSQL walks
    # them by their priors): it must be read before any match it can beat is returned.
    monkeypatch.setattr(postgres_ranking, "SMALL_SCOPE", 0)
    now = timezone.now()
    weak = write(
        content="Roadtrip planning kept by the agent.",
        confidence=0.2,
        authority="agent",
        provenance={"source_type": "agent_inference"},
    )
    strong = write(content="Prefers email for every contact.", confidence=1.0)
    for n in range(6):
        write(content=f"Unrelated note number {n} about lunch.", confidence=0.1)
    MemoryRecord.objects.filter(status="quarantined").update(status="active")
    MemoryRecord.objects.update(confirmed_at=now - timedelta(days=200))
    MemoryRecord.objects.filter(pk=strong.pk).update(confirmed_at=now)
    q = parse_recall({"purpose": "support", "query": "roadtrip", "limit": 3, "min_relevance": 0})
    items = recall(credential=credential, q=q, now=now).items
    assert [item.record.pk for item in items[:2]] == [strong.pk, weak.pk]
    assert items[0].score_parts["lexical"] == 0 < items[1].score_parts["lexical"]
    assert items[0].score > items[1].score > items[2].score


def test_recall_runs_a_fixed_number_of_queries_whatever_the_scope_size(write, credential, django_assert_max_num_queries):
    for n in range(30):
        write(content=f"Roadtrip note {n} about the coast.", subject=f"customer/{n % 3}")
    _recall(credential, query="roadtrip coast", kinds=["preference"])  # warm: the default index exists
    with django_assert_max_num_queries(20):  # analysis, statistics, scoring, one load, mark used
        result = _recall(credential, query="roadtrip coast lunch", kinds=["preference"], limit=20)
    assert len(result.items) == 20


def test_a_token_budget_that_skips_rows_is_filled_from_one_load(write, credential, monkeypatch):
    """With a budget the first batch is the larger one: the rows the budget skips are made up from
    the same load, not from a second round trip."""
    from django.db.models.query import QuerySet

    for n in range(12):
        write(content=f"Coast note {n} " + "about the coast road " * (60 if n % 2 else 1))
    loads = []
    in_bulk = QuerySet.in_bulk
    monkeypatch.setattr(QuerySet, "in_bulk", lambda self, ids, **kw: loads.append(len(ids)) or in_bulk(self, ids, **kw))
    q = RecallQuery(query="coast", purpose="support", limit=5, token_budget=250, min_relevance=0)
    result = recall(credential=credential, q=q)
    assert result.omitted_for_budget > 0 and len(result.items) == 5  # the long notes skipped, short ones fill it
    assert loads == [12]  # every ranked row in one load (more than the limit, fewer than the batch)


def test_a_spent_budget_stops_the_scan_instead_of_reading_the_whole_scope(write, credential, django_assert_max_num_queries):
    from memory.recall import SCAN_DEPTH

    for n in range(SCAN_DEPTH * 3):
        write(content=f"Long note {n} " + "about the weather " * 40)
    with django_assert_max_num_queries(30):
        result = recall(
            credential=credential, q=RecallQuery(query="weather", purpose="support", limit=2, token_budget=5, min_relevance=0)
        )
    assert result.items == [] and result.omitted_for_budget == SCAN_DEPTH * 2
