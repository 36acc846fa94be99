"""Every status change, bulk ones included, takes its source and target statuses from
`memory.models.TRANSITIONS`. Each test edits the table for one transition and checks that the path
under test obeys the edit: a path that wrote a status of its own, or selected records by a status
literal, would ignore it and fail here. A static check keeps literal statuses out of the writes."""

import ast
import importlib
import re
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from memory import services
from memory.actors import Actor
from memory.engine import ENGINES
from memory.errors import Conflict
from memory.models import TRANSITIONS, MemoryRecord, Status
from tests.conftest import memory_body

pytestmark = pytest.mark.django_db

SERVICES = Path(services.__file__).parent
UNTRUSTED = {"authority": "agent", "provenance": {"source_type": "agent_inference"}}


def _status(record) -> str:
    return MemoryRecord.objects.values_list("status", flat=True).get(pk=record.pk)


def _reasons(record) -> list[str]:
    return list(record.history.order_by("history_date", "history_id").values_list("history_change_reason", flat=True))


@pytest.mark.parametrize(
    "walk",
    [None, *(pytest.param(walk, marks=pytest.mark.postgresql(reason="a PostgreSQL walk")) for walk in ("index", "blocks"))],
)
def test_the_expire_job_moves_what_the_table_says_to_where_it_says(write, monkeypatch, walk):
    """Bulk expiry (chunked on SQLite, one statement per batch along either PostgreSQL walk)."""
    active, quarantined = write(ttl_seconds=60), write(ttl_seconds=60, **UNTRUSTED)
    assert (active.status, quarantined.status) == (Status.ACTIVE, Status.QUARANTINED)
    monkeypatch.setitem(TRANSITIONS, "expire", (frozenset({Status.QUARANTINED}), Status.REJECTED))

    moved = services.memory_expire_due(actor=Actor.job("expire"), now=timezone.now() + timedelta(hours=1), walk=walk)

    assert moved == 1
    assert (_status(active), _status(quarantined)) == (Status.ACTIVE, Status.REJECTED)
    assert _reasons(quarantined)[-1] == "job.expire"


def test_forgetting_a_subject_moves_what_the_table_says_to_where_it_says(credential, write, reviewer_actor, monkeypatch):
    """Bulk forget, the subject's records and their lineage (in place on PostgreSQL, chunked on SQLite)."""
    kept, moved = write(subject="customer/zed"), write(subject="customer/zed")
    summary = services.memory_write(
        credential=credential, data=memory_body(subject="customer/other", derived_from=[str(moved.pk)], **UNTRUSTED)
    ).record
    kept = services.memory_retire(record_id=kept.pk, expected_version=1, actor=reviewer_actor)  # now expired
    monkeypatch.setitem(TRANSITIONS, "forget", (frozenset({Status.ACTIVE, Status.QUARANTINED}), Status.REJECTED))

    outcome = services.memory_forget_subject(tenant_id=credential.agent.tenant_id, subject="customer/zed", actor=reviewer_actor)

    assert (outcome.subject_count, outcome.lineage_count) == (1, 1)
    assert (_status(kept), _status(moved), _status(summary)) == (Status.EXPIRED, Status.REJECTED, Status.REJECTED)
    assert _reasons(summary)[-1] == "review.forget_lineage"


def test_revoking_a_source_moves_what_the_table_says_to_where_it_says(credential, write, reviewer_actor, monkeypatch):
    """Bulk revocation, and the preview that counts it."""
    active, quarantined = write(), write(**UNTRUSTED)
    rejected = services.memory_reject(record_id=write(**UNTRUSTED).pk, expected_version=1, actor=reviewer_actor)
    monkeypatch.setitem(TRANSITIONS, "revoke", (frozenset({Status.ACTIVE, Status.QUARANTINED}), Status.REJECTED))
    source = services.RevokedSource(tenant_id=credential.agent.tenant_id, credential_id=credential.pk)

    direct, derived = services.revocation_targets(source=source, actor=reviewer_actor)
    outcome = services.memory_revoke_source(source=source, actor=reviewer_actor, note="leaked")

    assert sorted(direct) == sorted(outcome.record_ids) == sorted([active.pk, quarantined.pk]) and derived == []
    assert (_status(active), _status(quarantined), _status(rejected)) == (Status.REJECTED, Status.REJECTED, Status.REJECTED)
    assert _reasons(active)[-1] == _reasons(quarantined)[-1] == "review.revoke"
    assert _reasons(rejected)[-1] == "review.reject"


def test_a_correction_supersedes_what_the_table_says_to_where_it_says(credential, write, reviewer_actor, monkeypatch):
    """The supersession a correction, a promoted correction and a reviewer's replacement make."""
    monkeypatch.setitem(TRANSITIONS, "supersede", (frozenset({Status.ACTIVE}), Status.EXPIRED))
    old = write()
    services.memory_write(credential=credential, data=memory_body(supersedes=str(old.pk), supersedes_version=1))
    assert _status(old) == Status.EXPIRED

    old = write()
    fix = services.memory_write(
        credential=credential, data=memory_body(supersedes=str(old.pk), supersedes_version=1, **UNTRUSTED)
    ).record
    services.memory_promote(record_id=fix.pk, expected_version=1, actor=reviewer_actor)
    assert _status(old) == Status.EXPIRED

    loser, winner = write(), write()
    services.memory_supersede_by(record_id=loser.pk, expected_version=1, by_record_id=winner.pk, actor=reviewer_actor)
    assert _status(loser) == Status.EXPIRED

    monkeypatch.setitem(TRANSITIONS, "supersede", (frozenset({Status.QUARANTINED}), Status.SUPERSEDED))
    active = write()
    with pytest.raises(Conflict) as refused:
        services.memory_write(credential=credential, data=memory_body(supersedes=str(active.pk), supersedes_version=1))
    assert refused.value.code == "supersedes_not_active"


def _literal_status(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "Status"


def test_no_service_writes_a_literal_status_onto_an_existing_record():
    """A status written onto a record (`record.status = ...`, `.update(status=...)`) comes from
    TRANSITIONS, never a `Status.X` literal; new records (a write's admission decision, a reviewer's
    correction) are not transitions and are not checked here."""
    offenders = []
    for path in sorted(SERVICES.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            assigned = (
                isinstance(node, ast.Assign)
                and any(isinstance(t, ast.Attribute) and t.attr == "status" for t in node.targets)
                and _literal_status(node.value)
            )
            updated = (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "update"
                and any(k.arg == "status" and _literal_status(k.value) for k in node.keywords)
            )
            if assigned or updated:
                offenders.append(f"{path.name}:{node.lineno}")
    assert offenders == []


def test_no_engine_statement_names_a_status():
    """The engines' lifecycle statements select and write the statuses the services hand them from
    TRANSITIONS: an engine that named a status (`Status.X`, the table itself, a status as a value or
    quoted in SQL) would be a bulk path around the table."""
    quoted = re.compile("'(" + "|".join(re.escape(status.value) for status in Status) + ")'")
    offenders = []
    for package in ENGINES.values():
        path = Path(importlib.import_module(f"{package}.lifecycle").__file__)
        for node in ast.walk(ast.parse(path.read_text())):
            named = (isinstance(node, ast.Name) and node.id in {"Status", "TRANSITIONS"}) or (
                isinstance(node, ast.alias) and node.name in {"Status", "TRANSITIONS"}
            )
            in_sql = (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and (node.value in set(Status) or quoted.search(node.value))
            )
            if named or in_sql:
                offenders.append(f"{package}.lifecycle:{getattr(node, 'lineno', '?')}")
    assert offenders == []
