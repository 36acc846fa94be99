"""Forgetting reaches a semantic index on disk: after a forget, its propagation and the disk step,
no copy of a forgotten record's embedding is left in the database's files nor in the index's
approximate-search files, and no copy of its id in the vector table's files nor in those files
(the records table keeps the id as a tombstone). A kept subject's vectors stay in both, so the
search would find a copy that was left. Checked byte for byte on both databases, with an encoder
whose vectors are random (seeded by the text), so that no other bytes match them by chance."""

import hashlib
import uuid
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest
from django.db import connection

from governance.jobs import run_job
from governance.models import ForgetRequest, JobRun
from memory.models import MemoryRecord
from memory.search import ann, semantic, storage
from memory.search.build import build_index, ensure_active_index, promote_index, request_rebuild
from memory.search.models import IndexKind, IndexStatus, SearchIndex
from tests.portability.conftest import database_files
from tests.portability.test_disk import forget, is_pending

pytestmark = pytest.mark.django_db(transaction=True)
PG = "postgresql"
WAL_FRAME_HEADER = 24  # SQLite

FORGOTTEN, KEPT = "customer/erin", "customer/frank"
CONTENTS = {
    FORGOTTEN: ["Erin's door code is on the card.", "Erin prefers calls after six.", "Erin's invoices go to her home."],
    KEPT: ["Frank's office is on the fourth floor.", "Frank wants a weekly summary."],
}


def seeded_vectors(texts: list[str]) -> np.ndarray:
    """The test's encoder: a random unit vector per text, from a generator seeded by the text (the
    same text, the same vector), so that each vector's bytes are the record's alone."""
    rows = []
    for text in texts:
        seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
        vector = np.random.default_rng(seed).standard_normal(semantic.DIMS).astype(np.float32)
        rows.append(vector / np.linalg.norm(vector))
    return np.asarray(rows, dtype=np.float32).reshape(len(texts), semantic.DIMS)


@pytest.fixture(autouse=True)
def search_storage_of_existing_indexes_only(transactional_db):
    """An earlier transactional test's flush leaves search tables no index row names (as in test_disk)."""
    storage.drop_storage_except({index.storage_name for index in SearchIndex.objects.all()})


@pytest.fixture
def ann_dir(settings, tmp_path, monkeypatch) -> Path:
    settings.SEMANTIC_ANN_DIR = str(tmp_path / "ann")
    settings.SEMANTIC_ANN_SEARCH = True
    monkeypatch.setattr(ann, "FRESH_MARGIN", timedelta(0))  # the build need not wait for its last vectors to settle
    return tmp_path / "ann"


@pytest.fixture
def semantic_index(ann_dir):
    """Build (with the seeded encoder) and promote a semantic index holding the records written
    so far, with a partition for every tenant that has a vector; its storage goes afterwards (a
    transactional test's flush leaves the table behind)."""
    made: list[SearchIndex] = []

    def build() -> SearchIndex:
        index = request_rebuild(name="semantic", kind=IndexKind.SEMANTIC, recipe={"ann": {"min_partition": 1}})
        build_index(index.pk, encode=seeded_vectors)
        index, promoted = promote_index(index.pk)
        assert promoted and index.status == IndexStatus.ACTIVE
        made.append(index)
        return index

    yield build
    for index in made:
        storage.drop_storage(index.storage_name)


def stored_rows(table: str) -> dict[uuid.UUID, tuple[bytes, bytes]]:
    """record id -> (the id's bytes as the table stores them: a uuid's 16 bytes on PostgreSQL, hex
    text on SQLite; the vector's bytes) of the embedded rows."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT record_id, vector FROM {table} WHERE vector IS NOT NULL")
        rows = cursor.fetchall()
    return {
        uuid.UUID(str(stored)): (stored.bytes if isinstance(stored, uuid.UUID) else str(stored).encode(), bytes(vector))
        for stored, vector in rows
    }


def checkpoint() -> None:
    """PostgreSQL: what is in shared buffers reaches the files (and files the rewrite replaced go)."""
    if connection.vendor == PG:
        with connection.cursor() as cursor:
            cursor.execute("CHECKPOINT")


def database_bytes() -> dict[str, bytes]:
    """Every file of the database: PostgreSQL, every file of its directory under the data
    directory; SQLite, the database file and its write-ahead log."""
    checkpoint()
    return {str(path): path.read_bytes() for path in database_files("database" if connection.vendor == PG else "schema")}


def vector_table_bytes(table: str) -> dict[str, bytes]:
    """What of the database holds the vector table's rows, by where. PostgreSQL: every file (fork,
    segment) of the table, its indexes, its TOAST table and TOAST index. SQLite: each page of the
    table and its indexes, and each page that no table or index owns (the free list), read from the
    file, and the write-ahead log's frames of those pages (the job's own writes follow its
    checkpoint)."""
    checkpoint()
    with connection.cursor() as cursor:
        if connection.vendor == PG:
            cursor.execute("SHOW data_directory")
            data = Path(cursor.fetchone()[0])
            cursor.execute(
                """WITH t AS (SELECT oid, reltoastrelid FROM pg_class WHERE oid = %s::regclass),
                        rels AS (SELECT oid FROM t UNION SELECT reltoastrelid FROM t WHERE reltoastrelid <> 0
                                 UNION SELECT i.indexrelid FROM pg_index i JOIN t ON i.indrelid IN (t.oid, t.reltoastrelid))
                   SELECT pg_relation_filepath(oid) FROM rels""",
                [table],
            )
            bases = [data / row[0] for row in cursor.fetchall() if row[0]]
            assert len(bases) >= 4  # the table, its primary key and its other indexes at least
            paths = {
                path
                for base in bases
                for path in base.parent.glob(base.name + "*")
                if path.name == base.name or path.name[len(base.name)] in "._"
            }
            return {str(path): path.read_bytes() for path in sorted(paths)}
        cursor.execute("PRAGMA page_size")
        size = cursor.fetchone()[0]
        cursor.execute("SELECT name FROM sqlite_master WHERE tbl_name = %s", [table])
        own = {row[0] for row in cursor.fetchall()}
        cursor.execute("SELECT name, pageno FROM dbstat")
        owners = {pageno: name for name, pageno in cursor.fetchall()}
    path = Path(connection.settings_dict["NAME"])
    data = path.read_bytes()

    def ours(number: int) -> bool:
        return owners.get(number, table) in own  # a page no one owns is free

    assert table in owners.values()
    numbers = [number for number in range(1, len(data) // size + 1) if ours(number)]
    pages = {f"{path.name} page {number}": data[(number - 1) * size : number * size] for number in numbers}
    read = set(numbers)
    # The log's frames (a 24-byte header naming the page, then the page) after its 32-byte header.
    wal = Path(f"{path}-wal").read_bytes() if Path(f"{path}-wal").exists() else b""
    for at in range(32, len(wal) - WAL_FRAME_HEADER - size + 1, WAL_FRAME_HEADER + size):
        number = int.from_bytes(wal[at : at + 4], "big")
        if ours(number):
            read.add(number)
            pages[f"{path.name}-wal frame at {at} (page {number})"] = wal[at + WAL_FRAME_HEADER : at + WAL_FRAME_HEADER + size]
    assert {number for number, name in owners.items() if name in own} <= read  # every page of the table was read
    return pages


def ann_bytes(index: SearchIndex) -> dict[str, bytes]:
    """Every file under the index's approximate-search directory."""
    directory = ann.index_dir(index.storage_name)
    return {str(path.relative_to(directory)): path.read_bytes() for path in sorted(directory.rglob("*")) if path.is_file()}


def filenode(table: str) -> int | None:
    """PostgreSQL: the file number the table lives in now (None on SQLite)."""
    if connection.vendor != PG:
        return None
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_relation_filenode(%s::regclass)", [table])
        return cursor.fetchone()[0]


def holding(files: dict[str, bytes], needle: bytes) -> list[str]:
    return [name for name, data in files.items() if needle in data]


def test_a_forgotten_record_s_vector_leaves_the_database_files_and_the_approximate_files(
    tenant, write, reviewer_actor, semantic_index
):
    ensure_active_index()  # the lexical index a deployment always has: its tables are rewritten too
    written = {subject: [write(subject=subject, content=text) for text in texts] for subject, texts in CONTENTS.items()}
    index = semantic_index()
    table = index.storage_name
    assert set(ann.partitions(table)) == {tenant.pk}

    rows = stored_rows(table)
    forgotten = {record.pk: rows[record.pk] for record in written[FORGOTTEN]}
    kept = {record.pk: rows[record.pk] for record in written[KEPT]}
    # The table holds the encoder's vectors; they, and the ids, are in the files before the forget.
    approximate, database, vector_table = ann_bytes(index), database_bytes(), vector_table_bytes(table)
    for record in [*written[FORGOTTEN], *written[KEPT]]:
        stored_id, vector = rows[record.pk]
        assert vector == seeded_vectors([record.content])[0].tobytes() and len(vector) == 4 * semantic.DIMS
        assert stored_id == (record.pk.bytes if connection.vendor == PG else record.pk.hex.encode())
        assert holding(approximate, vector) and holding(approximate, record.pk.bytes)
        assert holding(database, vector) and holding(vector_table, vector) and holding(vector_table, stored_id)

    filenode_before = filenode(table)
    request = forget(tenant, reviewer_actor, FORGOTTEN)
    run = run_job("disk_rewrite", trigger="run_job")

    assert (run.status, run.counts["requests_completed"], run.counts["tables_pending"]) == (JobRun.Status.SUCCEEDED, 1, 0)
    assert MemoryRecord.objects.filter(pk__in=forgotten, status="forgotten").count() == len(forgotten)
    approximate, database, vector_table = ann_bytes(index), database_bytes(), vector_table_bytes(table)
    left = {}  # what of a forgotten record is where (record number: 0, 1, 2)
    for number, (pk, (stored_id, vector)) in enumerate(forgotten.items()):
        left[f"{number}: vector in the database"] = holding(database, vector)
        left[f"{number}: id in the vector table"] = holding(vector_table, stored_id)
        left[f"{number}: vector in the approximate files"] = holding(approximate, vector)
        left[f"{number}: id in the approximate files"] = sorted(
            {*holding(approximate, pk.bytes), *holding(approximate, stored_id)}
        )
    assert {where: files for where, files in left.items() if files} == {}
    for pk, (stored_id, vector) in kept.items():  # the searches above do find what is there
        assert holding(vector_table, vector) and holding(vector_table, stored_id)
        assert holding(approximate, vector) and holding(approximate, pk.bytes)
        assert holding(database, vector)
    meta = ann.partitions(table)[tenant.pk]
    assert (meta["generation"], meta["count"], meta["dead"]) == (2, len(forgotten) + len(kept), len(forgotten))

    request.refresh_from_db()
    assert request.status == ForgetRequest.Status.COMPLETED
    receipts = {receipt.artifact: receipt for receipt in request.receipts.all()}
    assert all(receipt.completed_at is not None for receipt in receipts.values()), [
        name for name, receipt in receipts.items() if receipt.completed_at is None
    ]
    search = receipts["search_indexes"].note
    assert f"{index.name}: 0" in search  # the triggers took the rows when the records were forgotten
    assert f"Approximate-search files: {len(forgotten)} vectors overwritten" in search
    assert "none holds a forgotten id or vector" in search
    disk = receipts["disk"]
    assert not is_pending(disk) and disk.note.startswith("On disk at")
    if connection.vendor == PG:
        assert "rewritten and verified" in disk.note and (table in disk.note or "more)" in disk.note)
        assert filenode(table) != filenode_before  # the table itself was rewritten into new files
    else:
        assert "truncated to 0 bytes" in disk.note
