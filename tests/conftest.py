"""Shared fixtures: tenants, agents, tokens and reviewers made through the real models and
services, plus a builder for valid write bodies."""

import importlib
import itertools
import os
from datetime import timedelta
from typing import Any

import pytest
from django.apps import apps as django_apps
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import connection
from django.test.utils import override_settings

from memory.actors import REVIEWERS_GROUP, Actor
from memory.models import Agent, AgentCredential, MemoryKind, Tenant
from memory.provenance import failures as signature_failures
from memory.search import ann
from memory.services import memory_write

_counter = itertools.count(1)

# Passwords made in the test process are hashed with a fast hasher: the production default
# (PBKDF2, 1,000,000 iterations) costs about 0.9 s a hash on a loaded CI core, paid by every
# reviewer fixture and again by every login through the form. The production hashers stay listed,
# so a hash a subprocess made (manage.py, seed_demo) still verifies. override_settings sends
# setting_changed, which clears Django's cached hasher list.
override_settings(PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher", *settings.PASSWORD_HASHERS]).enable()

# The semantic model's exported graph (memory.search.encoder) is a cache of the installed package:
# the processes the tests start (demos, workers, each with a var directory of its own) read the
# test process's, rather than each exporting one.
os.environ.setdefault("SEMANTIC_MODEL_DIR", str(settings.SEMANTIC_MODEL_DIR))


def pytest_runtest_setup(item: pytest.Item) -> None:
    """`@pytest.mark.postgresql(reason=...)` / `@pytest.mark.sqlite(reason=...)`: the test needs that
    database (DATABASE_URL picks it); on the other it is skipped, with the reason (`bin/test -m
    postgresql` runs only the PostgreSQL ones)."""
    for vendor in ("postgresql", "sqlite"):
        marker = item.get_closest_marker(vendor)
        if marker and connection.vendor != vendor:
            reason = marker.kwargs.get("reason")
            pytest.skip(f"{vendor} only: {reason}" if reason else f"{vendor} only")


@pytest.fixture(autouse=True)
def short_fresh_margin(monkeypatch) -> None:
    """A semantic build waits until its newest vector is FRESH_MARGIN old (5 s: for writes not yet
    committed) before it reads its snapshot (`memory.search.ann._settle`); a test's vectors were
    all committed before its build, so the same rule at a quarter of a second spares each build of
    the suite five seconds of sleep. Tests of the margin itself set their own."""
    monkeypatch.setattr(ann, "FRESH_MARGIN", timedelta(milliseconds=250))


@pytest.fixture(autouse=True)
def signature_failures_of_this_test(monkeypatch) -> None:
    """Refused signatures are tallied in the shared cache per tenant id (memory.provenance.failures),
    and SQLite gives a later test's tenant the id an earlier one had: each test keeps its own tally,
    so one test's refusals never raise another's alert."""
    monkeypatch.setattr(signature_failures, "TALLY_KEY", f"signature-failures-test-{next(_counter)}")


def memory_body(**overrides: Any) -> dict:
    """A valid write body (user preference from a clean user turn); override any field."""
    n = next(_counter)
    body = {
        "kind": "preference",
        "subject": "customer/acme",
        "purpose": "support",
        "content": f"Prefers email over phone ({n}).",
        "authority": "user",
        "confidence": 0.9,
        "provenance": {
            "source_type": "user_turn",
            "uri": f"chat://session/s-1#turn-{n}",
            "session_id": "s-1",
            "turn_id": str(n),
            "tool": None,
            "source_version": None,
            "observed_at": "2026-11-29T10:00:00Z",
            "contaminated": False,
        },
    }
    for key, value in overrides.items():
        if key == "provenance":
            body["provenance"] = {**body["provenance"], **value}
        else:
            body[key] = value
    return body


def restore_seed_rows() -> None:
    """A transactional test flushes the database when it ends, taking the rows the data migration
    seeded (memory kinds, the reviewers group) with it; put them back for the tests that follow."""
    if not MemoryKind.objects.exists():
        importlib.import_module("memory.migrations.0002_seed_kinds_and_reviewers").seed(django_apps, None)


@pytest.fixture
def tenant(db) -> Tenant:
    restore_seed_rows()
    return Tenant.objects.create(slug="acme", name="Acme")


@pytest.fixture
def other_tenant(db) -> Tenant:
    return Tenant.objects.create(slug="globex", name="Globex")


@pytest.fixture
def make_credential(db):
    def make(tenant: Tenant, agent_slug: str = "support-bot", purposes=("support",), **capabilities) -> AgentCredential:
        agent, _ = Agent.objects.get_or_create(tenant=tenant, slug=agent_slug)
        credential, raw = AgentCredential.issue(agent=agent, purposes=list(purposes), **capabilities)
        credential.raw_token = raw
        return credential

    return make


@pytest.fixture
def credential(tenant, make_credential) -> AgentCredential:
    return make_credential(tenant, can_forget=True, can_confirm=True)


@pytest.fixture
def make_reviewer(db):
    def make(*tenants: Tenant, username: str = "rita", password: str = "review-pass-123"):
        user = get_user_model().objects.create_user(username=username, password=password)
        user.groups.add(Group.objects.get_or_create(name=REVIEWERS_GROUP)[0])
        for t in tenants:
            t.reviewers.add(user)
        user.raw_password = password
        return user

    return make


@pytest.fixture
def reviewer(tenant, make_reviewer):
    return make_reviewer(tenant)


@pytest.fixture
def reviewer_actor(reviewer) -> Actor:
    return Actor.for_user(reviewer)


@pytest.fixture
def write(credential):
    """Write through the real service: write(**body_overrides) -> record."""

    def do(credential_=None, idempotency_key=None, **overrides):
        return memory_write(
            credential=credential_ or credential, data=memory_body(**overrides), idempotency_key=idempotency_key
        ).record

    return do
