"""Backups and restores: a consistent backup with a manifest, and a restore that re-applies every
forget the backup lacks (from the forget ledger, outside the database) before it returns, so a
forgotten subject never comes back from an old backup."""

import io
import json
import stat
import tarfile
import threading
import time
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.test import Client

from governance.forget.services import forget_request_create
from governance.jobs import run_job
from governance.models import ForgetRequest, ForgetTombstone, JobRun
from governance.portability import backups
from memory.actors import Actor
from memory.models import MemoryRecord, Status, Tenant
from memory.search.build import ensure_active_index
from tests.governance.test_forget_propagation import canary, full_dump
from tests.portability.conftest import bytes_on_disk

pytestmark = pytest.mark.django_db(transaction=True)


def backup(path: Path) -> dict:
    out = io.StringIO()
    call_command("backup", str(path), stdout=out)
    return json.loads(out.getvalue().strip().splitlines()[-1])


def restore(path: Path) -> tuple[dict, list[str]]:
    out = io.StringIO()
    call_command("restore", str(path), "--yes", stdout=out)
    lines = out.getvalue().strip().splitlines()
    return json.loads(lines[-1]), lines[:-1]


def recalled(credential, query: str) -> str:
    """Everything an agent is served for the query: recall through the API, as one text."""
    response = Client().post(
        "/api/v1/recall/",
        {"query": query, "purpose": "support", "limit": 50},
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {credential.raw_token}",
    )
    assert response.status_code == 200
    return "\n".join(item["content"] for item in response.json()["items"])


class Reader(threading.Thread):
    """Recalls the same query over and over (its own database connection) until stopped."""

    def __init__(self, credential, query: str):
        super().__init__(daemon=True)
        self.credential, self.query = credential, query
        self.served, self.errors, self.answers = [], [], 0
        self.done = threading.Event()

    def run(self) -> None:
        try:
            while not self.done.is_set():
                try:
                    self.served.append(recalled(self.credential, self.query))
                    self.answers += 1
                except Exception as exc:  # recorded for the test to show
                    self.errors.append(repr(exc))
                time.sleep(0.02)
        finally:
            connection.close()

    def __enter__(self):
        self.start()
        time.sleep(0.2)
        return self

    def __exit__(self, *exc):
        time.sleep(0.2)
        self.done.set()
        self.join(timeout=30)


def test_canary_backed_up_then_forgotten_is_never_served_after_the_restore_and_no_dump_holds_it(
    tenant,
    credential,
    write,
    reviewer_actor,
    forget_ledger,
    tmp_path,
):
    secret, control = canary(), canary()
    write(subject="customer/erin", content=f"Erin's door code is {secret}.")
    write(subject="customer/frank", content=f"Frank's note {control}.")
    assert secret in recalled(credential, f"door code {secret}")
    manifest = backup(tmp_path / "before-forget.tar")

    request = forget_request_create(actor=reviewer_actor, tenant=tenant, subject="customer/erin", reason="erasure #7")
    run_job("propagate_forgets", trigger="run_job")
    assert secret not in full_dump()
    ledger_lines = [json.loads(line) for line in forget_ledger.read_text().splitlines()]
    assert [line["request"] for line in ledger_lines] == [str(request.pk)]
    assert "erin" not in forget_ledger.read_text().lower()  # fingerprints only

    with Reader(credential, f"door code {secret}") as reader:  # an agent recalling all through the restore
        summary, lines = restore(tmp_path / "before-forget.tar")

    assert reader.answers > 0 and reader.errors == []
    assert not any(secret in text for text in reader.served)
    assert secret not in recalled(credential, f"door code {secret}")
    assert secret not in full_dump()
    assert control in full_dump() and control in recalled(credential, control)  # the rest of the backup is back
    assert (summary["backup"], summary["reapplied_forgets"], summary["records_reforgotten"]) == (manifest["id"], 1, 1)
    assert any(line.startswith("re-forgot") and str(request.pk) in line for line in lines)
    # the restored database says what happened: a re-forget request with a restore receipt, its
    # records forgotten and propagated, the tombstone back, a restore JobRun
    reforget = ForgetRequest.objects.get()
    assert reforget.pk != request.pk and reforget.status == ForgetRequest.Status.COMPLETED
    assert reforget.subject.startswith("forgotten:") and str(request.pk) in reforget.reason
    receipt = reforget.receipts.get(artifact="restore")
    assert receipt.removed == 1 and str(request.pk) in receipt.note and manifest["id"] in receipt.note
    assert MemoryRecord.objects.get(subject__startswith="forgotten:").status == Status.FORGOTTEN
    assert ForgetTombstone.objects.filter(tenant=tenant).count() == 1
    run = JobRun.objects.get(job="restore")
    assert (run.status, run.counts["reapplied_forgets"]) == (JobRun.Status.SUCCEEDED, 1)
    # the ledger keeps the restore, and the re-forget, for the next restore
    kinds = [json.loads(line)["type"] for line in forget_ledger.read_text().splitlines()]
    assert kinds.count("restore") == 1 and kinds.count("forget") == 2


def test_a_backup_holds_a_manifest_of_time_schema_and_counts_readable_only_by_its_owner(tenant, write, tmp_path):
    write(content="One.")
    write(content="Two.", authority="third_party", provenance={"source_type": "web_page", "uri": "https://e.example"})
    manifest = backup(tmp_path / "b.tar")
    assert manifest["vendor"] == connection.vendor
    assert manifest["counts"]["records"] == 2
    assert manifest["counts"]["records_by_status"] == {"active": 1, "quarantined": 1}
    assert manifest["counts"]["history_rows"] == 2 and manifest["counts"]["tenants"] == 1
    assert set(manifest["schema"]) >= {"memory", "governance"} and manifest["started_at"] <= manifest["finished_at"]
    assert stat.S_IMODE((tmp_path / "b.tar").stat().st_mode) == 0o600
    with tarfile.open(tmp_path / "b.tar") as archive:
        assert sorted(archive.getnames()) == sorted(["manifest.json", manifest["dump"]["name"]])
        assert json.load(archive.extractfile("manifest.json"))["dump"]["sha256"] == manifest["dump"]["sha256"]
    assert JobRun.objects.filter(job="backup", status=JobRun.Status.SUCCEEDED).count() == 1


def test_a_restore_of_a_damaged_or_foreign_file_changes_nothing(tenant, write, tmp_path):
    write(content="Stays.")
    backup(tmp_path / "good.tar")
    (tmp_path / "junk.tar").write_bytes(b"not a tar")
    with tarfile.open(tmp_path / "good.tar") as good, tarfile.open(tmp_path / "damaged.tar", "w") as damaged:
        for member in good.getmembers():
            data = good.extractfile(member).read()
            if member.name != "manifest.json":
                data = data[:-10] + b"0123456789"
            member.size = len(data)
            damaged.addfile(member, io.BytesIO(data))
    with tarfile.open(tmp_path / "good.tar") as good, tarfile.open(tmp_path / "newer.tar", "w") as newer:
        manifest = json.load(good.extractfile("manifest.json"))
        manifest["schema"]["applied"].append("memory.9999_from_the_future")
        data = json.dumps(manifest).encode()
        info = tarfile.TarInfo("manifest.json")
        info.size = len(data)
        newer.addfile(info, io.BytesIO(data))
    write(content="Written after the backup.")
    for name, message in (("junk.tar", "not a backup"), ("damaged.tar", "damaged"), ("newer.tar", "newer version")):
        with pytest.raises(CommandError, match=message):
            call_command("restore", str(tmp_path / name), "--yes", stdout=io.StringIO())
    assert MemoryRecord.objects.count() == 2  # nothing was rolled back
    with pytest.raises(CommandError, match="--yes"):
        call_command("restore", str(tmp_path / "good.tar"), stdout=io.StringIO())


def test_restore_re_applies_only_forgets_the_backup_lacks_and_skips_tenants_it_does_not_have(
    tenant,
    write,
    reviewer_actor,
    make_reviewer,
    forget_ledger,
    tmp_path,
):
    write(subject="customer/old", content="Forgotten before the backup.")
    write(subject="customer/new", content="Forgotten after the backup.")
    forget_request_create(actor=reviewer_actor, tenant=tenant, subject="customer/old", reason="before")
    run_job("propagate_forgets", trigger="run_job")
    backup(tmp_path / "b.tar")
    later = Tenant.objects.create(slug="later")
    later_reviewer = make_reviewer(later, username="lena")
    forget_request_create(actor=reviewer_actor, tenant=tenant, subject="customer/new", reason="after")
    forget_request_create(actor=Actor.for_user(later_reviewer), tenant=later, subject="customer/x", reason="after, new tenant")
    summary, lines = restore(tmp_path / "b.tar")
    assert (summary["reapplied_forgets"], summary["skipped_forgets"]) == (1, 1)
    assert any(line.startswith("skipped") and "tenant not in the backup" in line for line in lines)
    assert not Tenant.objects.filter(slug="later").exists()
    assert set(MemoryRecord.objects.values_list("status", flat=True)) == {Status.FORGOTTEN}
    assert ForgetRequest.objects.count() == 2  # the one in the backup, and the re-forget


def test_a_restore_of_an_older_backup_rewrites_the_re_forgotten_rows_out_of_the_table_files_at_once(
    tenant,
    write,
    reviewer_actor,
    tmp_path,
    monkeypatch,
):
    ensure_active_index()  # its tables get copies too
    secret, who, control = canary(), canary(), canary()
    write(subject=f"customer/{who}", content=f"Door code {secret}.")
    write(subject="customer/frank", content=f"Frank's note {control}.")
    backup(tmp_path / "older.tar")
    forget_request_create(actor=reviewer_actor, tenant=tenant, subject=f"customer/{who}", reason="erasure")
    run_job("propagate_forgets", trigger="run_job")
    run_job("disk_rewrite", trigger="run_job")
    assert bytes_on_disk(secret) == bytes_on_disk(who) == 0  # clean on disk before the restore

    # Without the rewrite that follows it, the restore's re-forget leaves the rows' old versions
    # in PostgreSQL's new table files (SQLite's secure_delete zeroed them at commit).
    monkeypatch.setattr(
        backups,
        "_rewrite_disk_now",
        lambda: {
            "run": None,
            "status": "not run",
            "requests": 0,
            "requests_completed": 0,
            "tables_verified": 0,
            "tables_pending": 0,
            "errors": [],
            "complete": False,
        },
    )
    restore(tmp_path / "older.tar")
    if connection.vendor == "postgresql":
        assert bytes_on_disk(secret) > 0 and bytes_on_disk(who) > 0
    else:
        assert bytes_on_disk(secret) == bytes_on_disk(who) == 0
    monkeypatch.undo()

    summary, lines = restore(tmp_path / "older.tar")

    # no scheduled run: the restore ran the rewrite itself, and says so
    assert bytes_on_disk(secret) == bytes_on_disk(who) == 0
    assert bytes_on_disk(control) > 0
    if connection.vendor == "postgresql":
        assert bytes_on_disk(secret, scope="database") == 0
    outcome = summary["disk_rewrite"]
    assert outcome["complete"] and outcome["requests"] == outcome["requests_completed"] >= 1
    assert list(JobRun.objects.filter(job="disk_rewrite").values_list("trigger", flat=True)) == ["restore"]
    line = next(line for line in lines if line.startswith("disk"))
    if connection.vendor == "postgresql":
        assert outcome["tables_verified"] >= 5 and outcome["tables_pending"] == 0
        assert f"{outcome['tables_verified']} tables rewritten and verified" in line
    else:
        assert "write-ahead log was checkpointed and truncated" in line
    for reforget in ForgetRequest.objects.all():  # the ledger's forget, and the first restore's re-forget of it
        receipt = reforget.receipts.get(artifact="disk")
        assert receipt.note.startswith("On disk at") and receipt.completed_at > reforget.completed_at


def test_a_disk_rewrite_the_restore_could_not_finish_is_said_and_sent_to_the_workers(
    tenant,
    write,
    reviewer_actor,
    tmp_path,
    monkeypatch,
):
    write(subject="customer/erin", content=f"Erin {canary()}.")
    backup(tmp_path / "older.tar")
    forget_request_create(actor=reviewer_actor, tenant=tenant, subject="customer/erin", reason="erasure")
    run_job("propagate_forgets", trigger="run_job")
    sent = []
    monkeypatch.setattr("governance.tasks.run_disk_rewrite.apply_async", lambda **kwargs: sent.append(kwargs))
    if connection.vendor == "postgresql":
        monkeypatch.setattr("shutil.which", lambda name: None)  # no pg_repack: plain VACUUM verifies nothing
    else:
        monkeypatch.setattr("memory.engine.sqlite.ops.checkpoint", lambda: False)  # a reader held the write-ahead log

    summary, lines = restore(tmp_path / "older.tar")

    outcome = summary["disk_rewrite"]
    assert not outcome["complete"] and outcome["requests_completed"] == 0 and outcome["sent_to_workers"]
    assert sent == [{"kwargs": {"trigger": "restore"}, "retry": False}]
    line = next(line for line in lines if line.startswith("disk"))
    assert "stay pending" in line and "sent to the workers" in line
    receipt = ForgetRequest.objects.get().receipts.get(artifact="disk")
    assert receipt.note.startswith("Pending: not verified")
