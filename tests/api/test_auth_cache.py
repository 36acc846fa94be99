"""The lean authentication path: an agent's credential is cached in the shared cache after its
first request (memory.credentials), and every way of revoking it refuses the token at the next
request, in this process and in any other (the cache is shared)."""

import pytest
from django.contrib.admin.sites import site
from django.db import connection
from django.test import RequestFactory
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from governance.revocations.services import resolve_source, revocation_create
from memory.credentials import _key, usable_credential
from memory.models import AgentCredential, hash_token
from tests.api.conftest import MEMORIES, RECALL, assert_problem

pytestmark = pytest.mark.django_db


def _queries(client, path=MEMORIES) -> list[str]:
    with CaptureQueriesContext(connection) as captured:
        assert client.get(path).status_code == 200
    return [query["sql"] for query in captured]


def _credential_lookups(statements: list[str]) -> int:
    return sum('FROM "memory_agentcredential"' in sql for sql in statements)


def test_the_credential_is_looked_up_once_then_served_from_the_cache(agent_client):
    assert _credential_lookups(_queries(agent_client)) == 1
    assert _credential_lookups(_queries(agent_client)) == 0
    assert _credential_lookups(_queries(agent_client)) == 0


def test_a_cached_credential_carries_its_agent_and_tenant(credential, agent_client):
    agent_client.get(MEMORIES)
    with CaptureQueriesContext(connection) as captured:
        cached = usable_credential(credential.raw_token)
    assert len(captured) == 0
    assert (cached.pk, cached.agent.slug, cached.agent.tenant.slug, cached.purposes) == (
        credential.pk,
        "support-bot",
        "acme",
        ["support"],
    )


def test_saving_a_revoked_credential_refuses_its_cached_token_at_once(credential, agent_client):
    agent_client.get(MEMORIES)
    credential.revoked_at = timezone.now()
    credential.save(update_fields=["revoked_at"])
    assert_problem(agent_client.get(MEMORIES), 401)


def test_revoking_the_credential_refuses_its_cached_token_at_once(tenant, credential, agent_client, reviewer_actor):
    agent_client.get(MEMORIES)
    source = resolve_source(actor=reviewer_actor, tenant=tenant, credential=credential.pk)
    assert revocation_create(actor=reviewer_actor, source=source, reason="leaked").token_revoked
    assert_problem(agent_client.get(MEMORIES), 401)
    assert_problem(agent_client.post(RECALL, {"purpose": "support"}), 401)


def test_revoking_an_agent_revokes_its_tokens_and_leaves_other_agents_tokens(
    tenant,
    credential,
    agent_client,
    make_credential,
    client_for,
    reviewer_actor,
):
    second = make_credential(tenant, purposes=("support",))  # the same agent's second token
    other = make_credential(tenant, agent_slug="sales-bot")
    second_client, other_client = client_for(second), client_for(other)
    for client in (agent_client, second_client, other_client):
        assert client.get(MEMORIES).status_code == 200
    source = resolve_source(actor=reviewer_actor, tenant=tenant, agent="support-bot")
    assert revocation_create(actor=reviewer_actor, source=source, reason="misbehaving").token_revoked
    assert_problem(agent_client.get(MEMORIES), 401)
    assert_problem(second_client.get(MEMORIES), 401)
    assert other_client.get(MEMORIES).status_code == 200
    assert set(AgentCredential.objects.filter(revoked_at__isnull=False).values_list("pk", flat=True)) == {
        credential.pk,
        second.pk,
    }


def test_the_admin_revoke_action_refuses_the_cached_token_at_once(credential, agent_client, django_user_model):
    agent_client.get(MEMORIES)
    admin = site._registry[AgentCredential]
    request = RequestFactory().post("/admin/")
    request.user = django_user_model.objects.create_superuser("root", password="x-long-password")
    request._messages = _Messages()
    admin.revoke(request, AgentCredential.objects.filter(pk=credential.pk))
    assert_problem(agent_client.get(MEMORIES), 401)


def test_unknown_and_revoked_tokens_are_never_cached(credential, agent_client):
    from django.core.cache import cache

    assert usable_credential("gma_not-a-token") is None
    assert cache.get(_key(hash_token("gma_not-a-token"))) is None
    AgentCredential.objects.filter(pk=credential.pk).update(revoked_at=timezone.now())
    assert usable_credential(credential.raw_token) is None
    assert cache.get(_key(credential.token_hash)) is None


class _Messages:
    def add(self, *args, **kwargs) -> None:
        pass


def test_a_revocation_made_by_another_process_refuses_the_token_here_within_a_second(credential, agent_client, monkeypatch):
    from django.core.cache import cache

    from memory import credentials

    agent_client.get(MEMORIES)  # this process now holds the credential for LOCAL_SECONDS
    # Another web process revokes it: the row changes and the shared entry is dropped, but this
    # process's own copy is not (the process that revokes drops only its own).
    AgentCredential.objects.filter(pk=credential.pk).update(revoked_at=timezone.now())
    cache.delete(_key(credential.token_hash))
    started = credentials.time.monotonic()
    assert agent_client.get(MEMORIES).status_code == 200
    monkeypatch.setattr(credentials.time, "monotonic", lambda: started + credentials.LOCAL_SECONDS)
    assert_problem(agent_client.get(MEMORIES), 401)
    assert credentials.LOCAL_SECONDS <= 1.0
