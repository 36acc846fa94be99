"""Markdown export and import: plain files any YAML parser and Markdown viewer read, a round trip
that reproduces content hashes, supersession chains and lineage, imports through the lifecycle
(quarantined unless trusted), idempotent, with a report per file and nothing written for a bad one."""

import contextlib
import io
import json
import time
import uuid
import zipfile
from pathlib import Path

import pytest
import yaml
from django.core.management import call_command
from django.core.management.base import CommandError

from governance.forget.services import forget_request_create
from governance.jobs import run_job
from memory.models import AgentCredential, MemoryRecord, SourceType, Status, Tenant, Trust, content_digest
from memory.portable.importer import import_source_version
from memory.services import memory_promote
from tests.portability.conftest import notes_under, read_plain

pytestmark = pytest.mark.django_db

EVERY_FIELD = {
    "id",
    "tenant",
    "agent",
    "kind",
    "subject",
    "purpose",
    "status",
    "version",
    "authority",
    "trust",
    "confidence",
    "generated",
    "origin",
    "sources",
    "provenance",
    "created_at",
    "observed_at",
    "confirmed_at",
    "expires_at",
    "valid_from",
    "valid_to",
    "supersedes",
    "superseded_by",
    "derived_from",
    "reviewed",
    "content_hash",
}


def export(tenant_slug: str, outdir: Path, *args) -> dict:
    out = io.StringIO()
    call_command("export_memories", str(outdir), "--tenant", tenant_slug, *args, stdout=out)
    return json.loads(out.getvalue().strip().splitlines()[-1])


def import_dir(directory: Path, tenant_slug: str, agent: str = "support-bot", *args) -> tuple[dict, list[str]]:
    out = io.StringIO()
    with contextlib.suppress(CommandError):  # files with errors: the report is on stdout all the same
        call_command("import_memories", str(directory), "--tenant", tenant_slug, "--agent", agent, *args, stdout=out)
    lines = out.getvalue().strip().splitlines()
    return json.loads(lines[-1]), lines[:-1]


def original_ids(tenant: Tenant) -> dict[str, MemoryRecord]:
    """Imported records of a tenant by the id of the record they were exported from."""
    return {
        record.source_version.split(" ", 1)[0]: record
        for record in MemoryRecord.objects.filter(tenant=tenant, source_type=SourceType.IMPORT).prefetch_related("derived_from")
    }


@pytest.fixture
def source_memory(tenant, write, reviewer_actor):
    """A tenant with a correction chain A <- B <- C, a summary of C and D, a quarantined web claim,
    a claim a reviewer verified, and a forgotten subject."""
    a = write(content="Plan is Basic.")
    b = write(content="Plan is Pro.", supersedes=str(a.pk), supersedes_version=1)
    c = write(content="Plan is Enterprise.\n\nSince *March*, with `SSO`.", supersedes=str(b.pk), supersedes_version=1)
    d = write(content="Prefers email over phone.")
    s = write(
        subject="digest/acme",
        content="Acme: Enterprise plan, email first.",
        authority="agent",
        provenance={"source_type": "agent_inference", "session_id": "s-9"},
        derived_from=[str(c.pk), str(d.pk)],
    )
    q = write(
        content="Forum says refunds are automatic.",
        authority="third_party",
        provenance={"source_type": "web_page", "uri": "https://forum.example/42"},
    )
    p = write(
        content="Docs say the SLA is 99.9%.",
        authority="third_party",
        provenance={"source_type": "web_page", "uri": "https://docs.example/sla"},
    )
    memory_promote(record_id=p.pk, expected_version=1, actor=reviewer_actor, note="Checked the docs.")
    gone = write(subject="customer/erin", content="Erin's phone is 555-0100.")
    forget_request_create(actor=reviewer_actor, tenant=tenant, subject="customer/erin", reason="erasure #1")
    run_job("propagate_forgets", trigger="run_job")
    return {"A": a, "B": b, "C": c, "D": d, "S": s, "Q": q, "P": p, "gone": gone}


def test_export_is_plain_markdown_with_yaml_front_matter_any_parser_reads(source_memory, tmp_path):
    summary = export("acme", tmp_path / "out")
    assert (summary["records"], summary["tombstones"]) == (7, 1)
    notes = {read_plain(path)[0]["id"]: (path, *read_plain(path)) for path in notes_under(tmp_path / "out")}
    assert len(notes) == 8
    by_name = {name: notes[str(record.pk)] for name, record in source_memory.items()}
    for name in ("A", "B", "C", "D", "S", "Q", "P"):
        path, meta, body = by_name[name]
        record = MemoryRecord.objects.get(pk=meta["id"])
        assert EVERY_FIELD <= set(meta), name
        assert body == record.content + "\n"  # the body is the content, byte for byte
        assert meta["content_hash"] == record.content_hash == content_digest(body[:-1])
        assert (meta["status"], meta["kind"], meta["subject"], meta["authority"]) == (
            record.status,
            record.kind.name,
            record.subject,
            record.authority,
        )
        assert path.parent.relative_to(tmp_path / "out").as_posix() == record.subject  # browsable by subject
    s_meta = by_name["S"][1]
    assert s_meta["generated"] is True and sorted(s_meta["derived_from"]) == sorted(
        [str(source_memory["C"].pk), str(source_memory["D"].pk)]
    )
    assert by_name["A"][1]["generated"] is False and by_name["A"][1]["superseded_by"] == str(source_memory["B"].pk)
    assert by_name["C"][1]["supersedes"] == str(source_memory["B"].pk)
    assert by_name["P"][1]["reviewed"]["by"] == "rita" and by_name["P"][1]["trust"] == Trust.VERIFIED
    assert by_name["Q"][1]["provenance"]["uri"] == "https://forum.example/42" and by_name["Q"][1]["sources"] == [
        "https://forum.example/42"
    ]
    # the forgotten record: a tombstone, no content, no subject in clear, no provenance strings
    path, meta, body = by_name["gone"]
    text = path.read_text()
    assert meta["status"] == Status.FORGOTTEN and meta["subject"].startswith("forgotten:")
    assert "555-0100" not in text and "erin" not in text.lower() and "content_hash" not in meta and "provenance" not in meta
    assert path.parent.name == "_forgotten"
    # index.md links every note by its relative path
    index = (tmp_path / "out" / "index.md").read_text()
    for note_path, _, _ in notes.values():
        assert note_path.relative_to(tmp_path / "out").as_posix() in index


def test_demo_tenant_exports_to_files_that_each_parse(tmp_path, settings):
    call_command("seed_demo", stdout=io.StringIO())
    summary = export("acme", tmp_path / "demo")
    paths = notes_under(tmp_path / "demo")
    assert len(paths) == summary["records"] == MemoryRecord.objects.filter(tenant__slug="acme").count() > 0
    for path in paths:
        meta, body = read_plain(path)
        assert EVERY_FIELD <= set(meta) and body.strip()
        assert content_digest(body[:-1]) == meta["content_hash"]


def test_round_trip_into_an_empty_tenant_reproduces_hashes_chains_lineage_and_counts(source_memory, tmp_path):
    export("acme", tmp_path / "out")
    counts, lines = import_dir(tmp_path / "out", "acme-copy", "support-bot", "--trusted")
    assert counts == {
        "directory": str(tmp_path / "out"),
        "tenant": "acme-copy",
        "agent": "support-bot",
        "files": 8,
        "imported": 7,
        "already_imported": 0,
        "skipped": 1,
        "refused": 0,
        "error": 0,
    }
    assert any(line.startswith("skipped") and "_forgotten/" in line and "tombstone" in line for line in lines)
    copy = original_ids(Tenant.objects.get(slug="acme-copy"))
    new = {name: copy[str(record.pk)] for name, record in source_memory.items() if name != "gone"}
    originals = {name: MemoryRecord.objects.get(pk=record.pk) for name, record in source_memory.items()}
    for name, record in new.items():
        assert record.content_hash == originals[name].content_hash and record.content == originals[name].content
        assert (record.kind_id, record.subject, record.purpose, record.authority) == (
            originals[name].kind_id,
            originals[name].subject,
            originals[name].purpose,
            originals[name].authority,
        )
        assert record.source_version.startswith(f"{originals[name].pk} {originals[name].source_type}")
    # supersession chain A <- B <- C and lineage S <- {C, D}, with the same statuses
    assert (new["B"].supersedes_id, new["C"].supersedes_id) == (new["A"].pk, new["B"].pk)
    assert set(new["S"].derived_from.values_list("pk", flat=True)) == {new["C"].pk, new["D"].pk}
    statuses = {name: record.status for name, record in new.items()}
    assert statuses == {name: originals[name].status for name in new if name != "P"} | {"P": Status.QUARANTINED}
    # trust and review are never taken from a file: the verified claim waits for a reviewer again
    assert (new["P"].trust, new["P"].reviewed_at) == (Trust.UNTRUSTED, None)
    assert MemoryRecord.objects.filter(tenant__slug="acme-copy").count() == 7
    # a second import of the same files writes nothing
    history = MemoryRecord.history.model.objects.count()
    again, _ = import_dir(tmp_path / "out", "acme-copy", "support-bot", "--trusted")
    assert (again["imported"], again["already_imported"], again["skipped"], again["error"]) == (0, 7, 1, 0)
    assert MemoryRecord.objects.filter(tenant__slug="acme-copy").count() == 7
    assert MemoryRecord.history.model.objects.count() == history


def test_an_untrusted_import_quarantines_every_claim_and_says_which_links_wait(source_memory, tmp_path):
    export("acme", tmp_path / "out")
    counts, lines = import_dir(tmp_path / "out", "acme-review", "importer")
    assert counts["imported"] == 7 and counts["error"] == 0
    records = MemoryRecord.objects.filter(tenant__slug="acme-review")
    assert set(records.values_list("status", flat=True)) == {Status.QUARANTINED}
    assert all(r.source_type == SourceType.IMPORT and r.trust == Trust.UNTRUSTED for r in records)
    user_claims = records.filter(authority="user")
    assert user_claims.count() == 4 and all("import" in r.quarantine_reason for r in user_claims)
    credential = AgentCredential.objects.get(agent__tenant__slug="acme-review", label="import")
    assert (credential.can_import_trusted, credential.purposes) == (False, ["support"])
    # a correction of a record that is quarantined here cannot carry its link through the lifecycle
    b_line = next(line for line in lines if str(source_memory["B"].pk) in line)
    assert "without the supersedes link" in b_line and "quarantined here" in b_line


def test_a_token_may_import_only_as_its_own_agent_and_purposes(source_memory, tmp_path, make_credential):
    export("acme", tmp_path / "out")
    other = make_credential(source_memory["A"].tenant, agent_slug="billing-bot", purposes=("billing",))
    with pytest.raises(CommandError, match="not a usable token"):
        call_command(
            "import_memories",
            str(tmp_path / "out"),
            "--tenant",
            "acme",
            "--agent",
            "support-bot",
            "--token",
            other.raw_token,
            stdout=io.StringIO(),
        )
    counts, lines = import_dir(tmp_path / "out", "acme", "billing-bot", "--token", other.raw_token)
    assert counts["imported"] == 0 and counts["error"] == 7
    errors = [line for line in lines if line.startswith("error")]
    assert sum("may not use purpose 'support'" in line for line in errors) == 6
    assert sum("Derived from records that were not imported" in line for line in errors) == 1  # the summary


def test_a_subject_forgotten_here_is_refused_on_import(tenant, write, reviewer_actor, tmp_path):
    write(subject="customer/erin", content="Erin prefers calls.")
    write(subject="customer/frank", content="Frank prefers mail.")
    export("acme", tmp_path / "before-forget")
    forget_request_create(actor=reviewer_actor, tenant=tenant, subject="customer/erin", reason="erasure")
    counts, lines = import_dir(tmp_path / "before-forget", "acme", "support-bot", "--trusted")
    assert (counts["refused"], counts["imported"]) == (1, 1)
    assert any(line.startswith("refused") and "forgotten here" in line for line in lines)
    assert not MemoryRecord.objects.filter(subject="customer/erin").exclude(status=Status.FORGOTTEN).exists()


def hand_note(i: int, **meta) -> bytes:
    """A note as another tool (or a person) would write it: no content hash, no times."""
    fields = {
        "id": str(uuid.uuid4()),
        "kind": "preference",
        "subject": f"customer/c{i % 50}",
        "purpose": "support",
        "authority": "user",
        "confidence": 0.8,
        "provenance": {"source_type": "user_turn", "session_id": f"s-{i}", "turn_id": str(i)},
        **meta,
    }
    return ("---\n" + yaml.safe_dump(fields, sort_keys=False) + "---\n" + f"Note number {i} of the bulk import.\n").encode()


MALFORMED = {
    "no-front-matter.md": b"Just a note, no front matter.\n",
    "unclosed.md": b"---\nid: 1b0b6a1e-0000-4000-8000-000000000001\nkind: preference\nNote without the closing line.\n",
    "bad-yaml.md": b"---\nid: [unclosed\nkind: preference\n---\nBody.\n",
    "list.md": b"---\n- a\n- b\n---\nBody.\n",
    "no-id.md": b"---\nkind: preference\nsubject: x\n---\nBody.\n",
    "latin1.md": "---\nid: 1b0b6a1e-0000-4000-8000-000000000002\n---\ncaf\u00e9\n".encode("latin-1"),
}


# The same with 1,000 notes, through the command in a fresh database: python -m bench.portable_import
BULK = 100


def test_many_notes_import_once_and_ten_malformed_are_reported_one_by_one(tenant, tmp_path):
    root = tmp_path / "bulk"
    (root / "customers").mkdir(parents=True)
    for i in range(BULK):
        (root / "customers" / f"note-{i:04d}.md").write_bytes(hand_note(i))
    bad = dict(MALFORMED)
    bad["unknown-kind.md"] = hand_note(2001, kind="gossip")
    bad["confidence.md"] = hand_note(2002, confidence=7)
    bad["edited.md"] = hand_note(2003, content_hash=content_digest("something else"))
    bad["orphan-summary.md"] = hand_note(
        2004, authority="agent", derived_from=[str(uuid.uuid4())], provenance={"source_type": "agent_inference"}
    )
    for name, data in bad.items():
        (root / "bad" / name).parent.mkdir(exist_ok=True)
        (root / "bad" / name).write_bytes(data)
    before = MemoryRecord.objects.count()

    started = time.monotonic()
    counts, lines = import_dir(root, "acme", "support-bot", "--trusted")
    first_seconds = time.monotonic() - started
    assert (counts["files"], counts["imported"], counts["error"]) == (BULK + 10, BULK, 10)
    assert MemoryRecord.objects.count() == before + BULK
    errors = {line.split()[1].rstrip(":"): line for line in lines if line.startswith("error")}
    assert set(errors) == {f"bad/{name}" for name in bad}
    expected_reason = {
        "no-front-matter.md": "No YAML front matter",
        "unclosed.md": "not closed",
        "bad-yaml.md": "not valid YAML",
        "list.md": "not a YAML mapping",
        "no-id.md": "needs the record's id",
        "latin1.md": "Not UTF-8",
        "unknown-kind.md": "kind: Unknown kind",
        "confidence.md": "confidence:",
        "edited.md": "does not match content_hash",
        "orphan-summary.md": "not imported",
    }
    for name, reason in expected_reason.items():
        assert reason in errors[f"bad/{name}"], errors[f"bad/{name}"]
    bad_contents = [f"Note number {i} of the bulk import." for i in range(2001, 2005)]
    assert not MemoryRecord.objects.filter(content__in=bad_contents).exists()  # nothing of the bad ones

    started = time.monotonic()
    again, _ = import_dir(root, "acme", "support-bot", "--trusted")
    assert (again["imported"], again["already_imported"], again["error"]) == (0, BULK, 10)
    assert MemoryRecord.objects.count() == before + BULK
    print(f"\n{BULK} notes: first import {first_seconds:.2f} s, second (nothing written) {time.monotonic() - started:.2f} s")


def test_the_source_version_keeps_the_original_id_and_kind_of_source(tenant, tmp_path, write):
    original = write(content="Kept provenance.", provenance={"source_type": "user_turn", "uri": "chat://s/1#t-2"})
    export("acme", tmp_path / "out")
    import_dir(tmp_path / "out", "acme-copy", "support-bot", "--trusted")
    copy = MemoryRecord.objects.get(tenant__slug="acme-copy")
    assert copy.source_version == import_source_version(original.pk, "user_turn", None)
    assert (copy.source_uri, copy.session_id, copy.turn_id) == ("chat://s/1#t-2", original.session_id, original.turn_id)
    assert copy.observed_at == original.observed_at and copy.expires_at == original.expires_at


# ------------------------------------------------------------------------------------------------
# the reviewer download


def test_a_reviewer_downloads_a_zip_of_the_same_notes_and_only_for_their_tenants(client, reviewer, source_memory, other_tenant):
    client.login(username=reviewer.username, password=reviewer.raw_password)
    home = client.get("/review/")
    assert b'href="/review/export/"' in home.content
    page = client.get("/review/export/")
    assert page.status_code == 200 and b"Download zip" in page.content
    response = client.get("/review/export/", {"tenant": "acme", "status": ["active", "superseded", "forgotten"]})
    assert response.status_code == 200 and response["Content-Type"] == "application/zip"
    assert response["Content-Disposition"].startswith('attachment; filename="acme-memories-')
    archive = zipfile.ZipFile(io.BytesIO(b"".join(response.streaming_content)))
    names = [name for name in archive.namelist() if not name.endswith("/index.md")]
    statuses = sorted(yaml.safe_load(archive.read(name).decode().split("\n---\n", 1)[0][4:])["status"] for name in names)
    assert statuses == ["active", "active", "active", "forgotten", "superseded", "superseded"]
    assert client.get("/review/export/", {"tenant": "globex"}).status_code == 404
    client.logout()
    assert client.get("/review/export/", {"tenant": "acme"}).status_code == 302  # to the login page
