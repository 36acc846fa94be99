"""The optional semantic index: embeddings from the packaged all-MiniLM-L6-v2 model, computed after
commit by a Celery task, backfilled by a rebuild, fused with the lexical ranking at recall, and
removed by forget. Runs with the `semantic` extra installed (bin/test installs it)."""

import functools
import json

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from rest_framework.test import APIClient

from governance.forget.propagation import propagate_forget_request
from governance.forget.services import forget_request_create
from governance.models import PropagationReceipt
from memory.engine import current
from memory.models import ReviewerToken
from memory.recall import RecallQuery, recall
from memory.search import (
    IndexKind,
    IndexStatus,
    SearchIndex,
    active_index,
    ann,
    gates,
    register_promotion_gate,
    semantic,
    storage,
    vectors,
)
from memory.search.build import build_and_promote, repair_storage, request_rebuild
from memory.services import memory_promote, memory_retire
from memory.tasks import embed_records
from tests.conftest import memory_body
from tests.processes import CeleryStack, GunicornServer, wait_for

pytestmark = pytest.mark.django_db

QUESTION = "how does acme want to be contacted"
ANSWER = "Prefers email over phone."
# Share no word with the question (nor its stems): lexical ranking can only order them by the priors.
OTHERS = [
    "The office is in Berlin.",
    "Invoices leave on Mondays.",
    "Deploys run through staging first.",
    "Lunch is at noon on Fridays.",
    "The VPN certificate renews every spring.",
]


@pytest.fixture(autouse=True)
def no_gates(monkeypatch):
    """Each test registers the gates it needs (governance's golden gate is tested with governance)."""
    monkeypatch.setattr(gates, "_GATES", {})


@pytest.fixture
def answer_and_others(write):
    """The answer first, so that the others are newer and rank above it by recency alone."""
    return write(content=ANSWER), [write(content=text) for text in OTHERS]


def build_semantic(name: str = "semantic") -> SearchIndex:
    return build_and_promote(request_rebuild(name=name, kind=IndexKind.SEMANTIC).pk)


def ask(credential, query: str = QUESTION, min_relevance: float | None = 0, **options):
    """Recall as the agent asks (no relevance floor unless given: these tests hold the fusion; the
    floor's own are in tests/memory/test_relevance_floor.py)."""
    q = RecallQuery(query=query, purpose="support", subject="customer/acme", min_relevance=min_relevance)
    return recall(credential=credential, q=q, **options)


def embedded(index: SearchIndex) -> int:
    return vectors.count_rows(index.storage_name, embedded=True)


def queued_embeddings(callbacks) -> list:
    """The record ids of every `embed_records` message the transaction queued for after its commit."""
    return [
        callback.args[0]
        for callback in callbacks
        if isinstance(callback, functools.partial) and callback.func == embed_records.delay
    ]


def test_a_question_sharing_no_words_with_the_memory_is_found_through_the_semantic_part(credential, answer_and_others):
    answer, _others = answer_and_others
    lexical = ask(credential)
    assert lexical.terms and not any(item.score_parts["lexical"] for item in lexical.items)
    assert lexical.items[0].record.pk != answer.pk and "semantic" not in lexical.items[0].score_parts

    index = build_semantic()
    assert index.status == IndexStatus.ACTIVE and index.recipe == {
        "model": "all-MiniLM-L6-v2",
        "version": semantic.installed_version(),
        "dims": 384,
        "normalisation": "l2",
        "ann": {"library": "faiss-cpu", "version": ann.library_version(), **ann.DEFAULTS},
    }
    hybrid = ask(credential)
    assert hybrid.semantic == index.name and hybrid.index == active_index().name
    top = hybrid.items[0]
    assert top.record.pk == answer.pk
    assert list(top.score_parts) == ["lexical", "semantic", "fusion", "authority", "confidence", "recency"]
    assert top.score_parts["lexical"] == 0 and top.score_parts["semantic"] > max(
        item.score_parts["semantic"] for item in hybrid.items[1:]
    )
    for item in hybrid.items:
        assert item.score == pytest.approx(sum(item.score_parts.values()), abs=1e-3)
    # the priors are the lexical ranking's own
    lexical_parts = {item.record.pk: item.score_parts for item in lexical.items}
    for item in hybrid.items:
        for prior in ("authority", "confidence", "recency"):
            assert item.score_parts[prior] == pytest.approx(lexical_parts[item.record.pk][prior], abs=1e-3)


def test_a_word_match_still_leads_when_the_query_shares_it(credential, answer_and_others):
    build_semantic()
    result = ask(credential, "invoices mondays")
    assert result.items[0].record.content == "Invoices leave on Mondays."
    assert result.items[0].score_parts["lexical"] > 0


def test_the_hard_filters_come_first_for_the_semantic_part(credential, write, make_credential, tenant, answer_and_others):
    elsewhere = write(content=ANSWER, subject="customer/globex")
    other_agent = make_credential(tenant, agent_slug="other-bot")
    foreign = write(credential_=other_agent, content=ANSWER)
    build_semantic()
    found = [item.record.pk for item in ask(credential).items]
    assert elsewhere.pk not in found and foreign.pk not in found
    assert [item.record.pk for item in ask(other_agent).items] == [foreign.pk]


def test_the_write_enqueues_embedding_after_commit_and_the_task_embeds_it(
    credential, write, answer_and_others, django_capture_on_commit_callbacks
):
    index = build_semantic()
    assert embedded(index) == 1 + len(OTHERS)
    with django_capture_on_commit_callbacks() as callbacks:
        record = write(content="Wants invoices as PDF attachments.")
    assert queued_embeddings(callbacks) == [[str(record.pk)]]
    assert embedded(index) == 1 + len(OTHERS)  # nothing was embedded inside the write
    assert vectors.count_rows(index.storage_name) == 2 + len(OTHERS)  # its row waits, pending

    assert embed_records([str(record.pk)]) == {index.name: 1}  # what the worker runs
    assert embed_records([str(record.pk)]) == {index.name: 0}  # a second delivery changes nothing
    assert embedded(index) == 2 + len(OTHERS)
    found = ask(credential, "document format for billing")
    assert found.items[0].record.pk == record.pk and found.items[0].score_parts["semantic"] > 0


def test_a_record_whose_vector_is_pending_is_still_found_by_its_words(credential, write, answer_and_others):
    build_semantic()
    pending = write(content="Acme asked to be contacted by fax.")  # its task has not run
    top = ask(credential).items[0]
    assert top.record.pk == pending.pk and top.score_parts["lexical"] > 0 and top.score_parts["semantic"] == 0


def test_a_quarantined_write_is_not_embedded_until_promoted(
    credential, write, reviewer_actor, django_capture_on_commit_callbacks
):
    index = build_semantic()
    with django_capture_on_commit_callbacks() as callbacks:
        claim = write(content="Acme wants calls only.", authority="agent", provenance={"source_type": "agent_inference"})
    assert queued_embeddings(callbacks) == [] and vectors.count_rows(index.storage_name) == 0
    with django_capture_on_commit_callbacks() as callbacks:
        memory_promote(record_id=claim.pk, expected_version=claim.version, actor=reviewer_actor, note="checked")
    assert queued_embeddings(callbacks) == [[str(claim.pk)]]
    embed_records(queued_embeddings(callbacks)[0])
    assert embedded(index) == 1


def test_a_record_that_leaves_active_loses_its_vector_at_once(credential, answer_and_others, reviewer_actor):
    answer, _ = answer_and_others
    index = build_semantic()
    memory_retire(record_id=answer.pk, expected_version=answer.version, actor=reviewer_actor, note="outdated")
    assert embedded(index) == len(OTHERS)
    assert answer.pk not in [item.record.pk for item in ask(credential).items]


def test_without_a_semantic_index_nothing_is_queued(write, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks() as callbacks:
        write(content="A plain note.")
    assert queued_embeddings(callbacks) == []


def test_a_lost_message_is_made_good_by_the_next_task(write):
    index = build_semantic()
    first = write(content="First note, its message lost.")
    second = write(content="Second note.")
    assert embed_records([str(second.pk)]) == {index.name: 2}  # the sweep takes the first one too
    assert vectors.pending(index.storage_name, record_ids=[first.pk], limit=5) == []


def test_repair_restores_the_triggers_and_keeps_the_vectors(write, answer_and_others):
    index = build_semantic()
    with connection.cursor() as cursor:  # what a migration that rebuilds the records table does on SQLite
        for trigger in current().search.RECORD_TRIGGERS:
            cursor.execute(
                f"DROP TRIGGER {index.storage_name}_{trigger}"
                + (f" ON {storage.RECORDS}" if connection.vendor == "postgresql" else "")
            )
    assert not storage.triggers_present(index.storage_name)
    missed = write(content="Written while the triggers were gone.")
    assert repair_storage() == [index.name]
    assert storage.triggers_present(index.storage_name)
    assert embedded(index) == 1 + len(OTHERS)  # kept, not recomputed
    assert [pk for pk, _, _ in vectors.pending(index.storage_name, limit=10)] == [missed.pk]


def test_rebuild_index_backfills_every_active_record(credential, answer_and_others, capsys):
    call_command("rebuild_index", "semantic", "--kind", "semantic", "--wait")
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["kind"] == "semantic" and summary["status"] == "active"
    assert summary["inputs"]["records"] == 1 + len(OTHERS) and summary["coverage"] == 1.0
    assert embedded(SearchIndex.objects.get(name="semantic")) == 1 + len(OTHERS)


def test_a_semantic_rebuild_builds_beside_the_active_index_which_serves_until_the_gates_pass(credential, answer_and_others):
    old = build_semantic()
    register_promotion_gate(lambda candidate, active: (False, {"hit_at_k": 0.1}), name="golden")
    successor = build_and_promote(request_rebuild(name=old.name, kind=IndexKind.SEMANTIC).pk)
    old.refresh_from_db()
    assert successor.status == IndexStatus.CANDIDATE and old.status == IndexStatus.ACTIVE
    assert embedded(successor) == embedded(old) == 1 + len(OTHERS)
    assert ask(credential).semantic == old.name
    assert ask(credential, index=successor).semantic == successor.name  # a golden run names the candidate
    register_promotion_gate(lambda candidate, active: (True, {}), name="golden")
    promoted = build_and_promote(request_rebuild(name=successor.name, kind=IndexKind.SEMANTIC).pk)
    assert promoted.status == IndexStatus.ACTIVE and ask(credential).semantic == promoted.name


def test_a_semantic_recipe_accepts_only_the_packaged_model():
    with pytest.raises(Exception) as caught:
        request_rebuild(name="other-model", kind=IndexKind.SEMANTIC, recipe={"model": "bge-large", "dims": 1024})
    assert set(caught.value.errors) == {"model", "dims"}
    assert not SearchIndex.objects.filter(name="other-model").exists()


def test_forget_leaves_no_vector_of_the_subject(credential, write, reviewer_actor, answer_and_others):
    answer, others = answer_and_others
    kept = write(content=ANSWER, subject="customer/globex")
    index = build_semantic()
    subject_ids = [answer.pk, *(record.pk for record in others)]
    request = forget_request_create(
        actor=reviewer_actor, tenant=credential.agent.tenant, subject="customer/acme", reason="erasure request"
    )
    assert embedded(index) == 1  # gone in the forget's own transaction (the triggers)
    # A row left behind (an index built from a snapshot taken just before the forget): propagation removes it.
    with connection.cursor() as cursor:
        key = answer.pk if connection.vendor == "postgresql" else answer.pk.hex
        cursor.execute(
            f"INSERT INTO {index.storage_name} (record_id, tenant_id, agent_id, purpose, subject, kind_id, "
            f"authority, confidence, confirmed_at, expires_at, content_hash, vector) "
            f"SELECT %s, tenant_id, agent_id, purpose, subject, kind_id, authority, confidence, confirmed_at, "
            f"expires_at, content_hash, vector FROM {index.storage_name}",
            [key],
        )
    propagate_forget_request(request)
    receipt = PropagationReceipt.objects.get(forget_request=request, artifact="search_indexes")
    assert f"{index.name}: 1" in receipt.note and receipt.removed >= 1
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT record_id, subject FROM {index.storage_name}")
        rows = cursor.fetchall()
    assert len(rows) == 1 and rows[0][1] == "customer/globex"
    assert str(rows[0][0]).replace("-", "") == kept.pk.hex and not set(subject_ids) & {kept.pk}


def test_without_the_extra_recall_is_lexical_and_the_index_list_says_so(
    monkeypatch, credential, reviewer, answer_and_others, capsys
):
    index = build_semantic()
    reason = "The semantic extra is not installed (sentence_transformers missing): install the extra."
    monkeypatch.setattr(semantic, "extra_missing", lambda: reason)
    result = ask(credential)
    assert result.semantic == "" and result.semantic_unavailable == reason
    assert all(set(item.score_parts) == {"lexical", "authority", "confidence", "recency"} for item in result.items)

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {ReviewerToken.issue(user=reviewer)[1]}")
    listed = {entry["name"]: entry for entry in client.get("/api/v1/indexes/").json()}
    assert listed[index.name]["available"] is False and listed[index.name]["unavailable_reason"] == reason
    assert listed[active_index().name]["available"] is True

    with pytest.raises(CommandError, match="semantic extra is not installed"):
        call_command("rebuild_index", "another", "--kind", "semantic", "--wait")


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_real_worker_embeds_a_write_made_through_the_api_after_it_commits(credential, tmp_path):
    index = build_semantic()
    stack = CeleryStack(tmp_path)
    server = GunicornServer(tmp_path / "gunicorn.log", CELERY_QUEUE=stack.queue, APP_VAR_DIR=stack.env["APP_VAR_DIR"])
    try:
        server.start()
        status, payload = server.call("POST", "/api/v1/memories/", credential.raw_token, memory_body(content=ANSWER))
        assert status == 201 and payload["status"] == "active"
        assert vectors.count_rows(index.storage_name) == 1 and embedded(index) == 0  # the response came first
        stack.start_worker()
        with stack.explained():
            wait_for(lambda: embedded(index) == 1, timeout=300, interval=0.5, what="the worker to embed the write")
        assert [str(item.record.pk) for item in ask(credential).items] == [payload["id"]]
    finally:
        server.stop()
        stack.stop_all()
        # The flush after this test empties the tables but leaves the indexes' own tables and
        # triggers: drop them now, so the tests after it start without copies of these records.
        storage.drop_storage_except(())


def test_retire_index_switches_the_semantic_index_off_and_refuses_the_active_lexical_one(
    credential, answer_and_others, capsys, django_capture_on_commit_callbacks
):
    index = build_semantic()
    assert ask(credential).semantic == index.name
    with django_capture_on_commit_callbacks(execute=True):  # the storage is dropped after the commit
        call_command("retire_index", index.name)
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["status"] == IndexStatus.RETIRED
    assert ask(credential).semantic == "" and not storage.storage_exists(index.storage_name)
    lexical = active_index(IndexKind.LEXICAL)
    with pytest.raises(CommandError, match="cannot be retired"):
        call_command("retire_index", lexical.name)
    lexical.refresh_from_db()
    assert lexical.status == IndexStatus.ACTIVE
    with pytest.raises(CommandError, match="no index named"):
        call_command("retire_index", "no-such-index")
