"""The approximate nearest-neighbour partitions of a semantic index (`memory.search.ann`): built per
tenant, taken by a recall wider than one subject, never trusted for the hard filters, never hiding
a new vector, reached by forget byte for byte, a cache that falls back to the exact scan, dropped
with the index, refreshed by its job, and validated in the recipe. Runs with the `semantic` extra
(the packaged model and faiss-cpu) on both databases."""

import dataclasses
import shutil
import uuid
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.utils import timezone

from governance.forget.propagation import propagate_forget_request
from governance.forget.services import forget_request_create
from governance.jobs.registry import job_function
from governance.models import PropagationReceipt
from governance.retention.refresh_ann import refresh_semantic_ann
from memory.actors import Actor
from memory.engine import current
from memory.errors import ValidationFailed
from memory.models import MemoryRecord
from memory.recall import RecallQuery, recall
from memory.scope import Scope
from memory.search import IndexKind, SearchIndex, ann, gates, semantic, storage, vectors
from memory.search.build import build_and_promote, request_rebuild, retire_index
from memory.search.models import storage_name
from memory.services import memory_expire_due, memory_retire
from memory.tasks import embed_records
from tests.memory.test_search_storage import _definitions

pytestmark = pytest.mark.django_db

# Several subjects, so that a purpose-wide recall spans them.
TEXTS = [
    ("customer/acme", "Prefers email over phone."),
    ("customer/acme", "The office is in Berlin."),
    ("customer/acme", "Invoices leave on Mondays."),
    ("customer/globex", "Deploys run through staging first."),
    ("customer/globex", "Lunch is at noon on Fridays."),
    ("customer/globex", "The VPN certificate renews every spring."),
    ("customer/initech", "The printer on the third floor jams often."),
    ("customer/initech", "Quarterly reviews happen in March."),
    ("customer/initech", "Support tickets are answered within a day."),
    ("customer/umbrella", "The database backups run every night."),
    ("customer/umbrella", "New hires get a laptop on their first day."),
    ("customer/umbrella", "Passwords rotate every ninety days."),
]
QUERIES = [
    "how does acme want to be contacted",
    "when are bills sent out",
    "where is the company located",
    "backup schedule",
]


@pytest.fixture(autouse=True)
def no_gates(monkeypatch):
    """Each test registers the gates it needs (governance's golden gate is tested with governance)."""
    monkeypatch.setattr(gates, "_GATES", {})


@pytest.fixture(autouse=True)
def ann_dir(settings, tmp_path) -> Path:
    settings.SEMANTIC_ANN_DIR = str(tmp_path / "ann")
    settings.SEMANTIC_ANN_SEARCH = True
    return tmp_path / "ann"


@pytest.fixture
def no_margin(monkeypatch):
    """Rows embedded just before a build count as fresh (FRESH_MARGIN, for writes not yet
    committed): with no margin the graph alone answers for them, so a test sees the graph's work."""
    monkeypatch.setattr(ann, "FRESH_MARGIN", timedelta(0))


@pytest.fixture
def records(write):
    return [write(content=content, subject=subject) for subject, content in TEXTS]


@pytest.fixture
def paths(monkeypatch):
    """Which way each `semantic.similar` went: the graphs searched (the ids each proposed), the
    exact scans, and the fresh rows read."""
    taken = {"searched": [], "exact": 0, "fresh": []}
    search, exact, checked = ann.Partition.search, semantic._exact, vectors.read_checked

    def spied_search(self, query, count):
        found = search(self, query, count)
        taken["searched"].append([pk for pk, _ in found])
        return found

    def spied_exact(*args, **kwargs):
        taken["exact"] += 1
        return exact(*args, **kwargs)

    def spied_checked(*args, **kwargs):
        rows = checked(*args, **kwargs)
        taken["fresh"].append([_uuid(row[0]) for row in rows if row[1] is not None])  # the rows with the table's vector
        return rows

    monkeypatch.setattr(ann.Partition, "search", spied_search)
    monkeypatch.setattr(semantic, "_exact", spied_exact)
    monkeypatch.setattr(vectors, "read_checked", spied_checked)
    taken["exact_scan"] = exact
    return taken


def _uuid(value) -> uuid.UUID:
    return uuid.UUID(str(value))  # as the engine returns a record id: a UUID, or hex text


def _due(*records) -> None:
    now = timezone.now()
    MemoryRecord.objects.filter(pk__in=[r.pk for r in records]).update(
        created_at=now - timedelta(hours=1), expires_at=now - timedelta(seconds=1)
    )


def build(name: str = "semantic", **options) -> SearchIndex:
    return build_and_promote(
        request_rebuild(name=name, kind=IndexKind.SEMANTIC, recipe={"ann": {"min_partition": 1, **options}}).pk
    )


def scope_of(credential) -> Scope:
    return Scope(tenant_id=credential.agent.tenant_id, agent_id=credential.agent_id, purpose="support", now=timezone.now())


def same_ranking(found, expected) -> bool:
    """The same records in the same order, with the same cosines (to float precision)."""
    assert [hit.record_id for hit in found.top] == [hit.record_id for hit in expected.top]
    assert [hit.cosine for hit in found.top] == pytest.approx([hit.cosine for hit in expected.top], abs=1e-5)
    return True


def ask(credential, query: str):
    """A purpose-wide recall (no subject), with no relevance floor."""
    return recall(credential=credential, q=RecallQuery(query=query, purpose="support", min_relevance=0))


def closest(result):
    """The recalled record the semantic part scored highest (the fused order weighs priors too)."""
    return max(result.items, key=lambda item: item.score_parts["semantic"]).record.pk


def same_answer(found, expected) -> bool:
    assert [item.record.pk for item in found.items] == [item.record.pk for item in expected.items]
    for mine, theirs in zip(found.items, expected.items, strict=True):
        assert mine.score_parts == pytest.approx(theirs.score_parts, abs=1e-4)
    return True


def files_of(index: SearchIndex) -> dict[str, bytes]:
    directory = ann.index_dir(index.storage_name)
    return {path.name: path.read_bytes() for path in sorted(directory.iterdir()) if path.is_file()}


def stored_vectors(index: SearchIndex, tenant_id: int) -> dict:
    """record id -> vector bytes of the tenant's embedded rows, as the table holds them."""
    return {pk: bytes(vector) for pk, vector in vectors.read_partition(index.storage_name, tenant_id, after=None, limit=10_000)}


# --------------------------------------------------------------------------------------------
# 1. built per tenant, taken by a purpose-wide recall, the exact scan's answer


def test_a_partition_is_built_per_tenant_and_a_purpose_wide_recall_takes_it_with_the_exact_answer(
    credential, records, no_margin, paths, ann_dir, settings
):
    index = build()
    tenant_id = credential.agent.tenant_id
    assert set(files_of(index)) == {
        ".lock",
        f"tenant-{tenant_id}.g1.faiss",
        f"tenant-{tenant_id}.g1.ids",
        f"tenant-{tenant_id}.json",
    }
    assert ann.index_dir(index.storage_name) == ann_dir / index.storage_name
    meta = ann.partitions(index.storage_name)[tenant_id]
    assert (meta["count"], meta["dead"], meta["generation"], meta["tenant"]) == (len(TEXTS), 0, 1, tenant_id)
    assert meta["recipe"] == index.recipe["ann"] and index.recipe["ann"]["min_partition"] == 1
    ids = files_of(index)[f"tenant-{tenant_id}.g1.ids"]
    assert {ids[p : p + 16] for p in range(0, len(ids), 16)} == {record.pk.bytes for record in records}

    scope = scope_of(credential)
    for query in QUERIES:
        for depth in (1, 3, 100):  # a depth of 1 asks the graph for a third of the records
            approximate = semantic.similar(index, scope, query, depth=depth)
            exact = paths["exact_scan"](index, scope, query, depth=depth)
            assert same_ranking(approximate, exact) and len(approximate.top) == min(depth, len(TEXTS))
            # the cosine of a record the graph did not propose is read from the table, as the scan has it
            for record in records:
                assert approximate.cosine(record.pk) == pytest.approx(exact.cosine(record.pk), abs=1e-5)
    assert paths["exact"] == 0 and len(paths["searched"]) == 3 * len(QUERIES)
    assert min(len(found) for found in paths["searched"]) == ann.DEFAULTS["oversample"] < len(TEXTS)
    assert all(fresh == [] for fresh in paths["fresh"])  # every candidate came from the graph

    with_graph = {query: ask(credential, query) for query in QUERIES}
    assert paths["exact"] == 0
    settings.SEMANTIC_ANN_SEARCH = False
    scanned = {query: ask(credential, query) for query in QUERIES}
    assert paths["exact"] == len(QUERIES)
    assert all(same_answer(with_graph[query], scanned[query]) for query in QUERIES)
    assert closest(with_graph[QUERIES[0]]) == records[0].pk


def test_a_recall_within_one_subject_scans_exactly(credential, records, paths):
    index = build()
    scope = dataclasses.replace(scope_of(credential), subject="customer/acme")
    top = semantic.similar(index, scope, QUERIES[0], depth=5).top
    assert paths["searched"] == [] and paths["exact"] == 1
    assert {hit.record_id for hit in top} == {record.pk for record in records[:3]}


def test_tenants_below_the_threshold_get_no_partition_and_are_scanned_exactly(
    credential, records, other_tenant, make_credential, write, paths
):
    elsewhere = make_credential(other_tenant)
    write(credential_=elsewhere, content="Prefers email over phone.")
    index = build(min_partition=2)
    assert set(ann.partitions(index.storage_name)) == {credential.agent.tenant_id}
    assert [hit.record_id for hit in semantic.similar(index, scope_of(elsewhere), QUERIES[0], depth=5).top] != []
    assert paths["searched"] == [] and paths["exact"] == 1


# --------------------------------------------------------------------------------------------
# 2. the hard filters stay exact


def test_records_the_scope_excludes_are_never_returned_though_the_graph_proposes_them(
    credential, write, make_credential, tenant, reviewer_actor, no_margin, paths
):
    kept = write(content="Prefers email over phone.")
    for subject, content in TEXTS[1:]:
        write(content=content, subject=subject)
    other_agent = make_credential(tenant, agent_slug="other-bot")
    foreign = write(credential_=other_agent, content="Wants to be contacted by email only.")
    lapsing = write(content="Prefers contact by phone calls.")  # expired in time, not yet by the job
    expired = write(content="Likes to be contacted by letter.")  # expired by the job
    invalid = write(content="Likes to be reached on Slack for contact.")
    forgotten = write(content="Asks to be contacted through the portal.", subject="customer/gone")
    retired = write(content="Prefers text messages for contact.")
    excluded = {foreign.pk, lapsing.pk, expired.pk, invalid.pk, forgotten.pk, retired.pk}
    index = build()
    graph = b"".join(files_of(index).values())
    assert all(pk.bytes in graph for pk in excluded)

    now = timezone.now()
    _due(expired)
    assert memory_expire_due(actor=Actor.job("expire")) == 1
    _due(lapsing)  # the job has not run since
    MemoryRecord.objects.filter(pk=invalid.pk).update(valid_from=now - timedelta(days=2), valid_to=now - timedelta(days=1))
    memory_retire(record_id=retired.pk, expected_version=retired.version, actor=reviewer_actor, note="outdated")
    forget_request_create(actor=reviewer_actor, tenant=tenant, subject="customer/gone", reason="erasure request")
    assert b"".join(files_of(index).values()) == graph  # the files still hold every one of them

    for query in ("how does acme want to be contacted", "contact preference", "reach them by phone or message"):
        top = semantic.similar(index, scope_of(credential), query, depth=5).top
        assert not {hit.record_id for hit in top} & excluded and top
        assert not {item.record.pk for item in ask(credential, query).items} & excluded
    assert paths["exact"] == 0
    proposed = set().union(*paths["searched"])
    assert excluded <= proposed  # the graph proposed each of them; the table's check dropped it
    assert kept.pk in {hit.record_id for hit in semantic.similar(index, scope_of(credential), QUERIES[0], depth=3).top}
    # the same partition serves the other agent its own record
    assert [item.record.pk for item in ask(other_agent, QUERIES[0]).items] == [foreign.pk]


def test_candidates_are_checked_best_first_and_no_further_than_the_answer_needs(
    credential, records, reviewer_actor, no_margin, paths, monkeypatch
):
    index = build()
    checked, asked = vectors.read_checked, []  # (the paths fixture's spy, wrapped)

    def counting(name, record_ids, *args, **kwargs):
        asked.append(len(record_ids))
        return checked(name, record_ids, *args, **kwargs)

    monkeypatch.setattr(vectors, "read_checked", counting)
    query, depth = QUERIES[0], 3
    found = semantic.similar(index, scope_of(credential), query, depth=depth)
    assert same_ranking(found, paths["exact_scan"](index, scope_of(credential), query, depth=depth))
    assert paths["searched"][-1] and len(paths["searched"][-1]) == len(TEXTS)  # oversample x depth proposed
    assert asked == [4]  # checked: the best 1.25 x depth of them, all in the scope

    # The two best leave the scope (the graph still proposes them): of the first four checked, two
    # count, so the rest are checked too, and the answer is still the exact scan's.
    gone = [hit.record_id for hit in found.top[:2]]
    for record in MemoryRecord.objects.filter(pk__in=gone):
        memory_retire(record_id=record.pk, expected_version=record.version, actor=reviewer_actor, note="outdated")
    asked.clear()
    found = semantic.similar(index, scope_of(credential), query, depth=depth)
    assert asked == [4, len(TEXTS) - 4]
    assert same_ranking(found, paths["exact_scan"](index, scope_of(credential), query, depth=depth))
    assert not {hit.record_id for hit in found.top} & set(gone) and len(found.top) == depth


# --------------------------------------------------------------------------------------------
# 3. a vector stored after the snapshot is found at once


def test_a_record_embedded_after_the_build_is_found_by_the_next_recall(credential, records, write, no_margin, paths):
    index = build()
    tenant_id = credential.agent.tenant_id
    before = ann.partitions(index.storage_name)[tenant_id]
    late = write(content="Wants invoices sent as PDF attachments.", subject="customer/globex")
    assert embed_records([str(late.pk)]) == {index.name: 1}

    top = semantic.similar(index, scope_of(credential), "document format for billing", depth=3).top
    assert top[0].record_id == late.pk
    assert paths["fresh"] == [[late.pk]] and late.pk not in set().union(*paths["searched"])
    assert closest(ask(credential, "document format for billing")) == late.pk
    assert paths["exact"] == 0 and ann.partitions(index.storage_name)[tenant_id] == before  # no rebuild


# --------------------------------------------------------------------------------------------
# 4. forget reaches the files, byte for byte


def _forget(actor, tenant, subject: str) -> PropagationReceipt:
    request = forget_request_create(actor=actor, tenant=tenant, subject=subject, reason="erasure request")
    result = propagate_forget_request(request)
    assert result.completed
    return PropagationReceipt.objects.get(forget_request=request, artifact="search_indexes")


def test_after_a_forget_no_file_holds_a_forgotten_id_or_vector(credential, records, tenant, reviewer_actor, paths):
    index = build()
    tenant_id = credential.agent.tenant_id
    held = stored_vectors(index, tenant_id)
    forgotten = [record for record in records if record.subject == "customer/acme"]
    kept = [record for record in records if record.subject != "customer/acme"]
    assert all(held[record.pk] in b"".join(files_of(index).values()) for record in records)

    receipt = _forget(reviewer_actor, tenant, "customer/acme")

    files = files_of(index)
    assert files and all(name.startswith(("tenant-", ".lock")) for name in files)
    for name, data in files.items():
        for record in forgotten:
            assert record.pk.bytes not in data, name
            assert held[record.pk] not in data, name
    graph = b"".join(files.values())
    assert all(record.pk.bytes in graph and held[record.pk] in graph for record in kept)
    assert f"{len(forgotten)} vectors overwritten" in receipt.note
    assert f"all {len(files)} files read back, none holds a forgotten id or vector" in receipt.note
    meta = ann.partitions(index.storage_name)[tenant_id]
    assert (meta["generation"], meta["count"], meta["dead"]) == (2, len(records), len(forgotten))

    # the partition still serves the others
    result = ask(credential, QUERIES[3])
    assert closest(result) == records[9].pk
    assert not {item.record.pk for item in result.items} & {record.pk for record in forgotten}
    assert paths["exact"] == 0 and paths["searched"]


def test_a_kept_record_sharing_a_forgotten_one_s_content_keeps_its_vector_and_the_forget_completes(
    credential, records, write, tenant, reviewer_actor
):
    twin = write(content="Prefers email over phone.", subject="customer/globex")  # records[0]'s content
    index = build()
    held = stored_vectors(index, credential.agent.tenant_id)
    assert held[twin.pk] == held[records[0].pk]

    receipt = _forget(reviewer_actor, tenant, "customer/acme")

    graph = b"".join(files_of(index).values())
    assert records[0].pk.bytes not in graph and twin.pk.bytes in graph
    assert graph.count(held[twin.pk]) == 1  # the twin's own copy, nothing more
    assert "none holds a forgotten id or vector" in receipt.note
    assert closest(ask(credential, QUERIES[0])) == twin.pk


def test_a_forget_deletes_a_partition_it_cannot_read(credential, records, tenant, reviewer_actor):
    index = build()
    tenant_id = credential.agent.tenant_id
    directory = ann.index_dir(index.storage_name)
    (directory / f"tenant-{tenant_id}.g1.ids").write_bytes(b"\x01" * 7)  # not a whole id
    (directory / "tenant-1.g7.faiss.tmp").write_bytes(records[0].pk.bytes)  # an interrupted publish's
    receipt = _forget(reviewer_actor, tenant, "customer/acme")
    assert set(files_of(index)) == {".lock"} and ann.partitions(index.storage_name) == {}
    assert "all 1 files read back" in receipt.note


# --------------------------------------------------------------------------------------------
# 5. a build racing with a forget


def test_a_build_that_read_a_vector_before_its_record_was_forgotten_does_not_publish_it(credential, records, monkeypatch):
    index = build()
    tenant_id = credential.agent.tenant_id
    victim = records[4]
    vector = stored_vectors(index, tenant_id)[victim.pk]
    read, original = [], vectors.read_partition

    def racing(name, tenant, *, after, limit):
        rows = original(name, tenant, after=after, limit=limit)
        if rows and not read:
            read.extend(pk for pk, _ in rows)
            assert vectors.purge_records(name, [victim.pk]) == 1  # the forget commits here
        return rows

    monkeypatch.setattr(vectors, "read_partition", racing)
    assert ann.build(index.storage_name, index.recipe) == {tenant_id: len(records) - 1}
    assert victim.pk in read  # its vector was read
    files = files_of(index)
    assert set(files) == {".lock", f"tenant-{tenant_id}.g2.faiss", f"tenant-{tenant_id}.g2.ids", f"tenant-{tenant_id}.json"}
    for name, data in files.items():
        assert victim.pk.bytes not in data and vector not in data, name
    meta = ann.partitions(index.storage_name)[tenant_id]
    assert (meta["count"], meta["dead"]) == (len(records), 1)


# --------------------------------------------------------------------------------------------
# 6. a cache: unreadable files mean an exact scan


def _garble(directory: Path, name: str, data: bytes) -> None:
    """Replace a file (a new file: a process may map the old one)."""
    (directory / name).unlink()
    (directory / name).write_bytes(data)


@pytest.mark.parametrize("damage", ["graph", "ids", "description", "description-keys", "missing", "other-dims"])
def test_unreadable_partition_files_mean_an_exact_scan(credential, records, paths, damage):
    index = build()
    tenant_id = credential.agent.tenant_id
    directory = ann.index_dir(index.storage_name)
    if damage == "graph":
        _garble(directory, f"tenant-{tenant_id}.g1.faiss", b"not a graph" * 100)
    elif damage == "ids":
        _garble(directory, f"tenant-{tenant_id}.g1.ids", files_of(index)[f"tenant-{tenant_id}.g1.ids"][:-16])
    elif damage == "description":
        _garble(directory, f"tenant-{tenant_id}.json", b"{not json")
    elif damage == "description-keys":
        _garble(
            directory,
            f"tenant-{tenant_id}.json",
            b'{"faiss": "tenant-%d.g1.faiss", "ids": "tenant-%d.g1.ids"}' % (tenant_id, tenant_id),
        )
    elif damage == "missing":
        (directory / f"tenant-{tenant_id}.g1.faiss").unlink()
    else:  # a graph of other vectors than the recipe's, as many as the ids
        import faiss
        import numpy as np

        other = faiss.IndexHNSWFlat(8, 4, faiss.METRIC_INNER_PRODUCT)
        other.add(np.ones((len(records), 8), dtype=np.float32))
        (directory / f"tenant-{tenant_id}.g1.faiss").unlink()
        faiss.write_index(other, str(directory / f"tenant-{tenant_id}.g1.faiss"))
    expected = paths["exact_scan"](index, scope_of(credential), QUERIES[0], depth=5)
    for _ in range(2):
        assert same_ranking(semantic.similar(index, scope_of(credential), QUERIES[0], depth=5), expected)
    assert paths["searched"] == [] and paths["exact"] == 2
    assert closest(ask(credential, QUERIES[0])) == records[0].pk


# --------------------------------------------------------------------------------------------
# 7. the files go with the index


def test_dropping_or_retiring_the_index_removes_its_files(credential, records, django_capture_on_commit_callbacks):
    index = build()
    directory = ann.index_dir(index.storage_name)
    assert directory.is_dir()
    with django_capture_on_commit_callbacks(execute=True):  # the storage is dropped after the commit
        retire_index(index.name)
    assert not directory.exists() and not storage.storage_exists(index.storage_name)
    assert ask(credential, QUERIES[0]).semantic == ""

    again = build(name="semantic-again")
    directory = ann.index_dir(again.storage_name)
    assert directory.is_dir()
    storage.drop_storage(again.storage_name)
    assert not directory.exists()


def test_files_whose_index_tables_are_gone_are_dropped_with_the_other_leftovers(credential, records, ann_dir):
    index = build()
    kept = ann.index_dir(index.storage_name)
    orphan = ann.index_dir("memory_search_sem_99999")  # as a restore or a flush leaves them
    shutil.copytree(kept, orphan)
    unrelated = Path(ann_dir) / "notes"
    unrelated.mkdir()
    served = {i.storage_name for i in SearchIndex.objects.all()}
    assert storage.drop_storage_except(served) == ["memory_search_sem_99999"]
    assert not orphan.exists() and kept.is_dir() and unrelated.is_dir()
    assert ask(credential, QUERIES[0]).semantic == index.name


def test_an_index_without_partitions_leaves_no_directory(credential, records):
    index = build(min_partition=len(TEXTS) + 1)
    assert not ann.index_dir(index.storage_name).exists()
    exact_only = build_and_promote(request_rebuild(name="exact", kind=IndexKind.SEMANTIC, recipe={"ann": False}).pk)
    assert "ann" not in exact_only.recipe and not ann.index_dir(exact_only.storage_name).exists()


# --------------------------------------------------------------------------------------------
# 8. the refresh job


def _embed_new(write, credential, count: int, start: int = 0) -> list:
    written = [
        write(credential_=credential, content=f"Note {start + n}: the parking garage closes at {start + n} pm.")
        for n in range(count)
    ]
    embed_records([str(record.pk) for record in written])
    return written


def test_the_refresh_job_rebuilds_drifted_partitions_only_and_removes_those_below_the_threshold(
    credential, records, write, other_tenant, make_credential, reviewer_actor
):
    assert job_function("refresh_semantic_ann") is refresh_semantic_ann
    index = build(min_partition=5)
    tenant_id = credential.agent.tenant_id

    def refresh() -> dict:
        return refresh_semantic_ann(now=timezone.now(), batch_size=100)

    first = ann.partitions(index.storage_name)[tenant_id]
    assert refresh() == {"rebuilt": 0, "removed": 0}
    _embed_new(write, credential, 1)  # a tenth of the partition: within the share
    assert refresh() == {"rebuilt": 0, "removed": 0} and ann.partitions(index.storage_name)[tenant_id] == first

    _embed_new(write, credential, 1, start=1)
    assert refresh() == {"rebuilt": 1, "removed": 0}
    second = ann.partitions(index.storage_name)[tenant_id]
    assert second["generation"] == 2 and second["count"] == len(TEXTS) + 2
    assert datetime.fromisoformat(second["snapshot"]) > datetime.fromisoformat(first["snapshot"])
    assert refresh() == {"rebuilt": 0, "removed": 0}

    # as many rows leaving as arriving leaves the count alone, yet the graph drifted
    for record in records[:2]:
        memory_retire(record_id=record.pk, expected_version=record.version, actor=reviewer_actor, note="outdated")
    _embed_new(write, credential, 2, start=10)
    assert vectors.tenant_counts(index.storage_name)[tenant_id] == second["count"]
    assert refresh() == {"rebuilt": 1, "removed": 0}
    assert ann.partitions(index.storage_name)[tenant_id]["generation"] == 3

    # another tenant reaching the threshold gets a partition; one falling below loses it
    elsewhere = make_credential(other_tenant)
    arrived = _embed_new(write, elsewhere, 5, start=20)
    assert refresh() == {"rebuilt": 1, "removed": 0}
    assert set(ann.partitions(index.storage_name)) == {tenant_id, other_tenant.pk}
    _due(arrived[0])
    assert memory_expire_due(actor=Actor.job("expire")) == 1
    assert refresh() == {"rebuilt": 0, "removed": 1}
    assert set(ann.partitions(index.storage_name)) == {tenant_id}
    assert not any(name.startswith(f"tenant-{other_tenant.pk}.") for name in files_of(index))


# --------------------------------------------------------------------------------------------
# 9. the recipe


@pytest.mark.parametrize(
    ("given", "key"),
    [
        ({"m": 0}, "ann.m"),
        ({"oversample": True}, "ann.oversample"),
        ({"ef_search": "128"}, "ann.ef_search"),
        ({"min_partition": 0}, "ann.min_partition"),
        ({"colour": "blue"}, "ann.colour"),
        ({"library": "hnswlib"}, "ann.library"),
        ("fast", "ann"),
    ],
)
def test_a_bad_ann_recipe_is_refused_naming_the_key_and_creates_nothing(given, key):
    with pytest.raises(ValidationFailed) as caught:
        request_rebuild(name="bad-ann", kind=IndexKind.SEMANTIC, recipe={"ann": given})
    assert set(caught.value.errors) == {key}
    assert not SearchIndex.objects.filter(name="bad-ann").exists()


def test_the_rebuild_command_refuses_a_bad_ann_recipe_and_creates_nothing(ann_dir):
    with pytest.raises(CommandError, match=r"ann\.m: An integer from 4 to 128"):
        call_command("rebuild_index", "bad-ann", "--kind", "semantic", "--recipe", '{"ann": {"m": 0}}', "--wait")
    assert not SearchIndex.objects.filter(name="bad-ann").exists() and not ann_dir.exists()


def test_a_recipe_completed_once_is_accepted_again():
    complete = semantic.semantic_recipe({"ann": {"m": 16}})
    assert complete["ann"] == {"library": "faiss-cpu", "version": ann.library_version(), **ann.DEFAULTS, "m": 16}
    assert semantic.semantic_recipe(complete) == complete


# --------------------------------------------------------------------------------------------
# 10. storage version 3


def _columns(name: str) -> set[str]:
    with connection.cursor() as cursor:
        return {column.name for column in connection.introspection.get_table_description(cursor, name)}


def test_upgrading_a_version_2_semantic_index_gives_what_version_3_builds_and_stores_embedding_times(write, records):
    engine, name = current(), storage_name("semantic", 9998)
    try:
        with connection.cursor() as cursor:
            for sql in (*engine.ddl_v2.semantic_table(name), *engine.ddl_v2.semantic_triggers(name)):
                cursor.execute(sql)
        assert "embedded_at" not in _columns(name)
        engine.ddl_v3.semantic_upgrade(name)
        engine.ddl_v3.semantic_upgrade(name)  # twice: a migration run again changes nothing
        upgraded = _definitions(name)
        assert "embedded_at" in _columns(name)
        engine.ddl_v3.drop(name)
        with connection.cursor() as cursor:
            for sql in (*engine.ddl_v3.semantic_table(name), *engine.ddl_v3.semantic_triggers(name)):
                cursor.execute(sql)
        assert _definitions(name) == upgraded and upgraded

        vectors.reconcile(name)
        since = vectors.clock() - timedelta(seconds=1)
        assert vectors.read_fresh(name, since, "1 = 1", {}) == []  # pending rows have no time
        record = records[0]
        assert vectors.store_vectors(name, [(record.pk, record.content_hash, b"\x00" * 16)]) == 1
        assert [_uuid(row[0]) for row in vectors.read_fresh(name, since, "1 = 1", {})] == [record.pk]
        assert vectors.read_fresh(name, vectors.clock() + timedelta(seconds=1), "1 = 1", {}) == []
    finally:
        engine.ddl_v3.drop(name)


def test_the_migration_upgrades_a_version_2_semantic_index(credential, records):
    index = build()
    engine = current()
    engine.ddl_v3.drop(index.storage_name)
    with connection.cursor() as cursor:
        for sql in (*engine.ddl_v2.semantic_table(index.storage_name), *engine.ddl_v2.semantic_triggers(index.storage_name)):
            cursor.execute(sql)
    SearchIndex.objects.filter(pk=index.pk).update(storage_version=2)
    assert index.pk in engine.ddl_v3.upgrade_indexes(SearchIndex)
    assert "embedded_at" in _columns(index.storage_name) and storage.triggers_present(index.storage_name)
