"""Search indexes as rebuildable caches: recipes, side-by-side builds while the active index serves,
promotion gates, the rebuild command and task, forget propagation, the reviewers' index list."""

import json
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.utils import timezone
from rest_framework.test import APIClient

from governance.forget.propagation import propagate_forget_request
from governance.forget.search_indexes import SearchIndexesArtifact
from governance.forget.services import forget_request_create
from memory.actors import Actor
from memory.engine import current
from memory.engine.postgres import ddl_v1
from memory.errors import Conflict, ValidationFailed
from memory.models import MemoryRecord, ReviewerToken, Status
from memory.recall import RecallQuery, recall
from memory.search import active_index, gates, register_promotion_gate, storage
from memory.search.build import build_and_promote, ensure_active_index, repair_storage, request_rebuild
from memory.search.models import IndexStatus, SearchIndex
from memory.search.recipes import SECOND_STAGE_DEFAULTS, lexical_recipe, second_stage
from memory.services import memory_expire_due, memory_retire
from memory.tasks import build_search_index

pytestmark = pytest.mark.django_db

CORPUS = [
    "Acme contacts us through the ticket portal.",
    "Planning a roadtrip along the coast in June.",
    "Go to the office, go home, go to bed.",
    "Lunch with the team on Friday, then a roadtrip.",
    "Invoices go out by email on Mondays.",
]


@pytest.fixture(autouse=True)
def no_gates(monkeypatch):
    """Each test registers the gates it needs (governance's golden gate is tested with governance)."""
    monkeypatch.setattr(gates, "_GATES", {})


@pytest.fixture
def corpus(write):
    return [write(content=text) for text in CORPUS]


def _ranked(credential, query: str, index=None) -> list[tuple]:
    result = recall(credential=credential, q=RecallQuery(query=query, purpose="support"), index=index)
    return [(item.record.pk, item.score_parts["lexical"]) for item in result.items]


def _build(name: str, recipe=None) -> SearchIndex:
    return build_and_promote(request_rebuild(name=name, recipe=recipe).pk)


def _storage_rows(index: SearchIndex) -> int:
    return storage.count_rows(index.storage_name)


def test_every_database_starts_with_an_active_default_index_holding_the_active_records(corpus, write):
    write(content="Quarantined claim.", authority="agent", provenance={"source_type": "agent_inference"})
    index = active_index()
    assert index.name == "lexical-default" and index.status == IndexStatus.ACTIVE
    # The migration that made it wrote the recipe of its day: the second stage's keys, added since,
    # read their defaults (memory.search.recipes.second_stage).
    assert lexical_recipe(index.recipe) == lexical_recipe() and index.recipe["analyser"]["postgresql"] == "english"
    assert second_stage(index.recipe) == SECOND_STAGE_DEFAULTS
    assert _storage_rows(index) == MemoryRecord.objects.filter(status=Status.ACTIVE).count() == len(CORPUS)


def test_throwing_an_index_away_and_rebuilding_it_gives_the_same_recall(corpus, credential):
    queries = ["roadtrip", "how is acme contacted", "go", "invoices by email on monday", "the"]
    before = {q: _ranked(credential, q) for q in queries}
    old = active_index()
    rebuilt = _build(old.name)  # the active index: a successor is built beside it
    old.refresh_from_db()
    assert rebuilt.status == IndexStatus.ACTIVE and rebuilt.name.startswith(f"{old.name}-r")
    assert old.status == IndexStatus.RETIRED and rebuilt.report["replaces"] == old.name
    assert {q: _ranked(credential, q) for q in queries} == before
    assert rebuilt.inputs["records"] == len(CORPUS) and rebuilt.coverage == 1.0


def test_the_retired_index_storage_is_dropped_after_the_swap(corpus, django_capture_on_commit_callbacks):
    old = active_index()
    with django_capture_on_commit_callbacks(execute=True):
        _build(old.name)
    assert not storage.storage_exists(old.storage_name)
    assert storage.storage_exists(active_index().storage_name)


def test_a_candidate_that_fails_a_gate_stays_candidate_and_the_active_index_keeps_serving(corpus, credential):
    seen = []

    def golden_gate(candidate, active):
        seen.append((candidate.name, active.name))
        return False, {"hit_at_k": 0.4, "active_hit_at_k": 0.9}

    register_promotion_gate(golden_gate)
    active = active_index()
    candidate = _build("unstemmed", recipe={"stemmer": "none", "stop_words": "english"})
    assert seen == [("unstemmed", active.name)]
    assert candidate.status == IndexStatus.CANDIDATE and active_index() == active
    assert candidate.report["promotion"]["passed"] is False
    assert candidate.report["promotion"]["gates"]["golden_gate"] == {"hit_at_k": 0.4, "active_hit_at_k": 0.9, "passed": False}
    # Both serve side by side: the active one by default, the candidate when named.
    contacted = corpus[0].pk
    assert _ranked(credential, "contacted")[0][0] == contacted
    assert all(pk != contacted or lexical == 0 for pk, lexical in _ranked(credential, "contacted", index="unstemmed"))


def test_a_candidate_that_passes_every_gate_replaces_the_active_index(corpus, credential):
    register_promotion_gate(lambda candidate, active: (True, {"checked": candidate.name}), name="golden")
    register_promotion_gate(lambda candidate, active: (True, {}), name="coverage")
    old = active_index()
    candidate = _build("bm25-k2", recipe={"k1": 2.0, "b": 0.5})
    old.refresh_from_db()
    assert candidate.status == IndexStatus.ACTIVE and old.status == IndexStatus.RETIRED
    assert set(candidate.report["promotion"]["gates"]) == {"golden", "coverage"}
    assert recall(credential=credential, q=RecallQuery(query="roadtrip", purpose="support")).index == "bm25-k2"


def test_a_gate_that_raises_holds_the_candidate_back():
    def broken(candidate, active):
        raise RuntimeError("no golden sets today")

    register_promotion_gate(broken)
    candidate = _build("held-back")
    assert candidate.status == IndexStatus.CANDIDATE
    assert candidate.report["promotion"]["gates"]["broken"] == {"error": "RuntimeError", "passed": False}


def test_writes_and_transitions_reach_every_stored_index_at_once(corpus, write, credential, reviewer_actor):
    register_promotion_gate(lambda candidate, active: (False, {}), name="hold")
    candidate = _build("side-by-side")
    new = write(content="A roadtrip to the mountains.")
    quarantined = write(content="A roadtrip, says the agent.", authority="agent", provenance={"source_type": "agent_inference"})
    for index in (active_index(), candidate):
        ids = [pk for pk, _ in _ranked(credential, "roadtrip", index=index)]
        assert new.pk in ids and quarantined.pk not in ids
        assert _storage_rows(index) == len(CORPUS) + 1
    from memory.services import memory_retire

    memory_retire(record_id=new.pk, expected_version=new.version, actor=reviewer_actor, note="")
    for index in (active_index(), candidate):
        assert new.pk not in [pk for pk, _ in _ranked(credential, "roadtrip", index=index)]
        # Retiring moves expires_at, so the entry goes at once (only expiry in time waits for the sweep).
        assert _storage_rows(index) == len(CORPUS)


def test_rebuild_index_command_builds_and_reports_the_index(corpus, capsys):
    active_index_before = dict(active_index().recipe)
    call_command("rebuild_index", "tuned", "--recipe", '{"k1": 1.6}', "--wait")
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["name"] == "tuned" and summary["status"] == "active"
    assert summary["recipe"]["k1"] == 1.6 and summary["recipe"]["b"] == active_index_before["b"]  # the rest kept
    assert summary["inputs"]["records"] == len(CORPUS) and summary["coverage"] == 1.0


def test_rebuild_index_without_wait_queues_the_build_for_the_worker(monkeypatch, capsys):
    queued = []
    monkeypatch.setattr(build_search_index, "delay_on_commit", lambda index_id: queued.append(index_id))
    call_command("rebuild_index", "later")
    index = SearchIndex.objects.get(name="later")
    assert queued == [index.pk] and index.status == IndexStatus.BUILDING
    assert active_index().name == "lexical-default"  # serving meanwhile
    assert build_search_index(index.pk)["status"] == "active"  # what the worker runs
    assert build_search_index(index.pk)["status"] == "active"  # and a second delivery changes nothing


@pytest.mark.parametrize(
    "args, message",
    [
        (["x", "--recipe", "{nope"], "not valid JSON"),
        (["x", "--recipe", "[1]"], "JSON object"),
        (["x", "--recipe", '{"k1": 9, "colour": "blue"}'], "k1"),
        (["x", "--recipe", '{"stemmer": "english", "stop_words": "none"}'], "stop_words"),
        (["bad name!"], "name"),
    ],
)
def test_rebuild_index_refuses_bad_input_and_changes_nothing(args, message):
    before = list(SearchIndex.objects.values_list("name", "status"))
    with pytest.raises(CommandError, match=message):
        call_command("rebuild_index", *args, "--wait")
    assert list(SearchIndex.objects.values_list("name", "status")) == before


def test_an_index_that_is_still_building_cannot_answer_recall(credential):
    request_rebuild(name="unfinished")
    with pytest.raises(Conflict):
        recall(credential=credential, q=RecallQuery(query="x", purpose="support"), index="unfinished")
    with pytest.raises(ValidationFailed):
        request_rebuild(name="unfinished", recipe={"b": 2})


def test_recall_builds_the_default_index_when_none_exists_and_drops_leftover_storage(corpus, credential):
    leftover = active_index()
    SearchIndex.objects.all().delete()  # what a test database flush leaves: storage without rows
    assert storage.storage_exists(leftover.storage_name)
    ranked = _ranked(credential, "roadtrip")
    fresh = active_index()
    assert fresh is not None and fresh.pk != leftover.pk and fresh.name == "lexical-default"
    assert not storage.storage_exists(leftover.storage_name)
    assert {pk for pk, _ in ranked} >= {corpus[1].pk, corpus[3].pk}
    assert ensure_active_index() == fresh


def test_forget_removes_the_subject_from_every_index_with_a_receipt(write, tenant, reviewer_actor):
    register_promotion_gate(lambda candidate, active: (False, {}), name="hold")
    candidate = _build("second")
    write(content="Roadtrip for someone else.", subject="customer/other")
    for n in range(3):
        write(content=f"Roadtrip number {n}.", subject="customer/erin")
    indexes = [active_index(), candidate]
    request = forget_request_create(actor=reviewer_actor, tenant=tenant, subject="customer/erin", reason="erasure")
    for index in indexes:  # out of every index as soon as the forget commits
        assert _storage_rows(index) == 1
    propagate_forget_request(request)
    receipt = request.receipts.get(artifact="search_indexes")
    assert receipt.removed == 0 and "lexical-default: 0" in receipt.note and "second: 0" in receipt.note
    assert "erin" not in receipt.note and "Roadtrip" not in receipt.note


def test_the_forget_artifact_purges_leftover_entries_from_every_index(write, reviewer_actor, tenant):
    # An entry that outlived its record's forget (say, an index built from an older snapshot).
    register_promotion_gate(lambda candidate, active: (False, {}), name="hold")
    candidate = _build("second")
    record = write(content="A roadtrip.", subject="customer/erin")
    request = forget_request_create(actor=reviewer_actor, tenant=tenant, subject="customer/other", reason="x")
    removed, note = SearchIndexesArtifact().purge(request, [record.pk])
    assert removed == 2 and f"{candidate.name}: 1" in note
    assert all(_storage_rows(index) == 0 for index in (active_index(), candidate))


def _terms(name: str) -> dict:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT tenant_id, agent_id, purpose, lexeme, docs, max_tf FROM {name}_terms")
        return {row[:4]: row[4:] for row in cursor.fetchall()}


def _terms_recounted(name: str) -> dict:
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT tenant_id, agent_id, purpose, t.key, count(*), max(t.value::integer) FROM {name} "
            f"CROSS JOIN LATERAL jsonb_each_text(tf) t GROUP BY 1, 2, 3, 4"
        )
        return {row[:4]: row[4:] for row in cursor.fetchall()}


@pytest.mark.postgresql(reason="the terms table is PostgreSQL's (SQLite counts with FTS5)")
def test_postgresql_terms_table_follows_writes_and_transitions_and_forgets_a_subjects_words(write, tenant, reviewer_actor):
    name = active_index().storage_name
    write(content="Roadtrip roadtrip roadtrip along the coast.", subject="customer/ann")
    second = write(content="A roadtrip to the office.", subject="customer/bob")
    write(content="Zanzibarian roadtrip plans.", subject="customer/erin")
    terms = _terms(name)
    assert terms == _terms_recounted(name)
    scope = (second.tenant_id, second.agent_id, "support")
    assert terms[(*scope, "roadtrip")] == (3, 3) and terms[(*scope, "offic")] == (1, 1)
    memory_retire(record_id=second.pk, expected_version=second.version, actor=reviewer_actor)
    assert _terms(name)[(*scope, "roadtrip")] == (2, 3)  # the highest tf is a bound: never lowered
    # A record expired by the job because its time is up keeps its entry (no recall can return it)
    # until the sweep.
    due = write(content="One more roadtrip.", subject="customer/ann")
    MemoryRecord.objects.filter(pk=due.pk).update(
        created_at=timezone.now() - timedelta(hours=1), expires_at=timezone.now() - timedelta(seconds=1)
    )
    assert memory_expire_due(actor=Actor.job("expire")) == 1
    assert _terms(name)[(*scope, "roadtrip")] == (3, 3) and _storage_rows(active_index()) == 3
    assert storage.sweep_expired(name, now=timezone.now(), batch_size=1) == 1
    assert _terms(name)[(*scope, "roadtrip")] == (2, 3) and _storage_rows(active_index()) == 2
    forget_request_create(actor=reviewer_actor, tenant=tenant, subject="customer/erin", reason="erasure")
    terms = _terms(name)
    assert (*scope, "zanzibarian") not in terms and (*scope, "offic") not in terms  # no record holds them now
    assert {key: docs for key, (docs, _) in terms.items()} == {key: docs for key, (docs, _) in _terms_recounted(name).items()}
    # An index built before the table existed gets it from migration 0012 (ddl_v1.lexical_upgrade).
    with connection.cursor() as cursor:
        cursor.execute(f"DROP TABLE {name}_terms")
    ddl_v1.lexical_upgrade(name, active_index().recipe)
    ddl_v1.lexical_upgrade(name, active_index().recipe)  # twice changes nothing
    assert _terms(name) == _terms_recounted(name)
    write(content="Another roadtrip.", subject="customer/ann")
    assert _terms(name)[(*scope, "roadtrip")] == (2, 3)  # refilled from the rows there (ann's), then kept in step


def _stats(name: str, *, recounted: bool = False) -> dict:
    source = (
        f"SELECT tenant_id, agent_id, purpose, subject, kind_id, count(*), sum(doclen) FROM {name} GROUP BY 1, 2, 3, 4, 5"
        if recounted
        else f"SELECT tenant_id, agent_id, purpose, subject, kind_id, docs, words FROM {name}_stats"
    )
    with connection.cursor() as cursor:
        cursor.execute(source)
        return {row[:5]: row[5:] for row in cursor.fetchall()}


@pytest.mark.postgresql(reason="the statistics tables are PostgreSQL's (SQLite counts with FTS5)")
def test_postgresql_a_sweep_batch_that_empties_many_buckets_leaves_exact_statistics(write):
    # One statement removes every entry of some buckets and some of another's: the emptied buckets
    # (they name subjects) and the terms no entry holds any more are deleted, the rest decremented.
    name = active_index().storage_name
    kept = write(content="A roadtrip kept for ann.", subject="customer/ann")
    due = [
        write(content=f"Roadtrip {word} for {who}.", subject=f"customer/{who}")
        for who in ("bob", "erin", "kim")
        for word in ("xylophonic", "quasarish")
    ]
    due.append(write(content="Roadtrip zeppelinian for ann.", subject="customer/ann"))
    MemoryRecord.objects.filter(pk__in=[r.pk for r in due]).update(
        created_at=timezone.now() - timedelta(hours=1), expires_at=timezone.now() - timedelta(seconds=1)
    )
    assert memory_expire_due(actor=Actor.job("expire")) == len(due)
    assert storage.sweep_expired(name, now=timezone.now(), batch_size=100) == len(due)
    stats = _stats(name)
    assert stats == _stats(name, recounted=True)
    assert {subject for (_, _, _, subject, _) in stats} == {"customer/ann"}
    assert _terms(name) == _terms_recounted(name)
    lexemes = {lexeme for (*_, lexeme) in _terms(name)}
    assert "roadtrip" in lexemes and not lexemes & {"xylophon", "quasarish", "zeppelinian", "bob", "erin", "kim"}
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT record_id FROM {name}")
        assert [row[0] for row in cursor.fetchall()] == [kept.pk]


@pytest.mark.postgresql(reason="the statistics tables are PostgreSQL's")
def test_postgresql_statistics_tables_leave_room_for_in_place_updates():
    # Counters every write updates: half of each page free keeps their updates heap-only.
    index = active_index()
    ddl_v1.lexical_upgrade(index.storage_name, index.recipe)  # an index from before keeps the setting too
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT relname, reloptions FROM pg_class WHERE relname = ANY(%s)",
            [[f"{index.storage_name}_stats", f"{index.storage_name}_terms"]],
        )
        options = dict(cursor.fetchall())
    assert len(options) == 2 and all(value == ["fillfactor=50"] for value in options.values()), options


def test_the_sweep_job_deletes_the_entries_of_records_the_expire_job_expired_in_time(write, credential):
    from governance.jobs import run_job

    kept, due = write(content="A roadtrip kept."), write(content="A roadtrip that expires.")
    MemoryRecord.objects.filter(pk=due.pk).update(
        created_at=timezone.now() - timedelta(hours=1), expires_at=timezone.now() - timedelta(seconds=1)
    )
    assert run_job("expire").counts == {"expired": 1}
    assert [pk for pk, _ in _ranked(credential, "roadtrip")] == [kept.pk]
    lingering = 1  # on both databases, until the sweep
    assert _storage_rows(active_index()) == 1 + lingering
    run = run_job("sweep_indexes", batch_size=1)
    assert run.status == "succeeded" and run.counts == {"swept": lingering}
    assert _storage_rows(active_index()) == 1 and run_job("sweep_indexes").counts == {"swept": 0}


# --------------------------------------------------------------------------------------------
# GET /api/v1/indexes/


def _client(raw_token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw_token}")
    return client


def test_reviewers_list_the_indexes_with_recipe_inputs_and_their_golden_verdict(corpus, reviewer, other_tenant):
    register_promotion_gate(
        lambda candidate, active: (
            False,
            {
                "passed": False,
                "tenants": {"acme": {"passed": False}, "globex": {"passed": True}},
                "failed_tenants": ["acme"],
            },
        ),
        name="golden_promotion_gate",
    )
    _build("candidate-1", recipe={"b": 0.3})
    _, raw = ReviewerToken.issue(user=reviewer)
    response = _client(raw).get("/api/v1/indexes/")
    assert response.status_code == 200
    listed = {entry["name"]: entry for entry in response.json()}
    assert set(listed) == {"lexical-default", "candidate-1"}
    entry = listed["candidate-1"]
    assert {"name", "kind", "recipe", "status", "built_at", "inputs", "golden"} <= set(entry)
    assert entry["status"] == "candidate" and entry["recipe"]["b"] == 0.3
    assert entry["inputs"]["records"] == len(CORPUS) and entry["inputs"]["up_to"]
    assert entry["golden"]["tenants"] == {"acme": {"passed": False}}  # not the other tenant's entry
    assert listed["lexical-default"]["status"] == "active"


def test_agents_and_anonymous_callers_cannot_list_indexes(credential):
    assert _client(credential.raw_token).get("/api/v1/indexes/").status_code == 403
    assert APIClient().get("/api/v1/indexes/").status_code == 401


def test_an_index_whose_triggers_a_migration_dropped_is_rebuilt_after_migrating(corpus, write, credential):
    index = active_index()
    suffixes = current().search.RECORD_TRIGGERS
    with connection.cursor() as cursor:  # what SQLite does to them when a migration rebuilds the records table
        for suffix in suffixes:
            cursor.execute(
                f"DROP TRIGGER {index.storage_name}_{suffix}"
                + (f" ON {storage.RECORDS}" if connection.vendor == "postgresql" else "")
            )
    missed = write(content="A roadtrip nobody indexed.")
    assert not storage.triggers_present(index.storage_name)
    assert repair_storage() == [index.name]
    assert storage.triggers_present(index.storage_name)
    assert missed.pk in [pk for pk, _ in _ranked(credential, "roadtrip")]
    assert repair_storage() == []


@pytest.mark.django_db(transaction=True)  # two connections remove the last two records of one bucket
@pytest.mark.postgresql(reason="SQLite has one writer at a time")
def test_postgresql_statistics_stay_exact_when_two_transactions_empty_a_bucket_together(write):
    import threading

    import psycopg
    from django.conf import settings

    name = ensure_active_index().storage_name  # an earlier transactional test may have flushed the index rows
    first, second = (write(content=f"Roadtrip {n} for erin.", subject="customer/erin") for n in range(2))
    db = settings.DATABASES["default"]

    def connect():
        return psycopg.connect(
            host=db["HOST"],
            port=db["PORT"] or 5432,
            user=db["USER"],
            password=db["PASSWORD"] or None,
            dbname=connection.settings_dict["NAME"],
            autocommit=False,
        )

    with connect() as a, connect() as b:
        a.execute("UPDATE memory_memoryrecord SET status = 'superseded' WHERE id = %s", [first.pk])
        done = threading.Event()
        # b waits for a's locks on the bucket and its terms, then must see a's counts.
        worker = threading.Thread(
            target=lambda: (
                b.execute("UPDATE memory_memoryrecord SET status = 'superseded' WHERE id = %s", [second.pk]),
                b.commit(),
                done.set(),
            )
        )
        worker.start()
        assert not done.wait(0.5)  # queued behind a
        a.commit()
        worker.join(10)
        assert done.is_set()
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {name}_stats WHERE subject = 'customer/erin'")
        assert cursor.fetchone()[0] == 0  # the bucket named the subject: gone, not left at zero
        cursor.execute(f"SELECT count(*) FROM {name}_terms WHERE lexeme = 'erin'")
        assert cursor.fetchone()[0] == 0
