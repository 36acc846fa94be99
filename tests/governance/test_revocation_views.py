"""Filing a revocation in the reviewer pages (form, confirmation with the count, receipt, list) and
from the admin (an action on agent tokens and agents, with a confirmation page)."""

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from governance.models import Revocation
from memory.models import Agent, AgentCredential, MemoryRecord, Status
from memory.services import memory_write
from tests.conftest import memory_body

pytestmark = pytest.mark.django_db

NEW = reverse("review:revocation_new")


@pytest.fixture
def reviewer_client(client, reviewer):
    client.force_login(reviewer)
    return client


def test_filing_shows_the_count_first_and_only_the_confirmation_revokes(reviewer_client, credential, write):
    records = [write(provenance={"session_id": "s-poisoned"}) for _ in range(3)]
    write(provenance={"session_id": "s-clean"})
    form = {"tenant": "acme", "source": "session_id", "session_id": "s-poisoned", "reason": "read a poisoned page"}
    assert reviewer_client.get(NEW).status_code == 200
    confirm = reviewer_client.post(NEW, form)
    assert confirm.status_code == 200
    html = confirm.content.decode()
    assert '<strong class="affected-total">3</strong>' in html and "Yes, revoke and quarantine 3" in html
    assert Revocation.objects.count() == 0 and not MemoryRecord.objects.filter(status=Status.QUARANTINED).exists()

    done = reviewer_client.post(NEW, {**form, "step": "confirm"}, follow=True)
    revocation = Revocation.objects.get()
    assert done.redirect_chain[-1][0] == reverse("review:revocation_detail", args=[revocation.pk])
    assert (revocation.source, revocation.value, revocation.affected) == ("session_id", "s-poisoned", 3)
    assert set(MemoryRecord.objects.filter(status=Status.QUARANTINED).values_list("pk", flat=True)) == {r.pk for r in records}
    assert "Review the 3 still in quarantine" in done.content.decode()
    listing = reviewer_client.get(reverse("review:revocation_list")).content.decode()
    assert f'data-revocation="{revocation.pk}"' in listing
    queue = reviewer_client.get(reverse("review:quarantine"), {"revocation": str(revocation.pk)})
    assert {r.pk for r in queue.context["page"].object_list} == {r.pk for r in records}


def test_a_credential_is_picked_from_the_tenants_tokens_and_revoked_with_its_records(reviewer_client, credential, write):
    write()
    form = {"tenant": "acme", "source": "credential", "credential": str(credential.pk), "reason": "leaked"}
    assert "will be revoked too" in reviewer_client.post(NEW, form).content.decode()
    reviewer_client.post(NEW, {**form, "step": "confirm"})
    credential.refresh_from_db()
    assert credential.revoked_at is not None and Revocation.objects.get().token_revoked


@pytest.mark.parametrize(
    "form, field",
    [
        ({"source": "session_id", "session_id": "", "reason": "why"}, "session_id"),  # the chosen source left empty
        ({"source": "agent", "reason": "why"}, "agent"),
        ({"source": "session_id", "session_id": "s-1", "reason": ""}, "reason"),
        ({"source": "everything", "session_id": "s-1", "reason": "why"}, "source"),
    ],
)
def test_bad_input_is_shown_on_the_form_and_changes_nothing(reviewer_client, write, form, field):
    write(provenance={"session_id": "s-1"})
    for step in ("", "confirm"):
        response = reviewer_client.post(NEW, {"tenant": "acme", **form, "step": step})
        assert response.status_code == 400 and field in response.context["form"].errors
    assert Revocation.objects.count() == 0 and MemoryRecord.objects.get().status == Status.ACTIVE


def test_another_tenants_token_cannot_be_picked(reviewer_client, other_tenant, make_credential, write):
    foreign = make_credential(other_tenant)
    memory_write(credential=foreign, data=memory_body())
    response = reviewer_client.post(
        NEW, {"tenant": "acme", "source": "credential", "credential": str(foreign.pk), "reason": "why", "step": "confirm"}
    )
    assert response.status_code == 400 and "credential" in response.context["form"].errors
    assert Revocation.objects.count() == 0 and AgentCredential.objects.get(pk=foreign.pk).revoked_at is None


def test_another_tenants_revocation_is_404(client, tenant, other_tenant, make_reviewer, write, reviewer_actor):
    from governance.revocations.services import resolve_source, revocation_create

    write()
    revocation = revocation_create(
        actor=reviewer_actor, source=resolve_source(actor=reviewer_actor, tenant=tenant, agent="support-bot"), reason="why"
    )
    client.force_login(make_reviewer(other_tenant, username="gus"))
    assert client.get(reverse("review:revocation_detail", args=[revocation.pk])).status_code == 404
    assert client.get(reverse("review:quarantine"), {"revocation": str(revocation.pk)}).status_code == 404
    assert client.get(reverse("review:quarantine"), {"revocation": "not-a-uuid"}).status_code == 404


# ------------------------------------------------------------------------------------------------
# admin


@pytest.fixture
def admin_client(client, tenant):
    admin = get_user_model().objects.create_superuser("root", "root@example.com", "root-pass-123")
    client.force_login(admin)
    return client


def test_the_admin_action_on_tokens_confirms_with_counts_then_revokes(admin_client, credential, write):
    records = [write(), write()]
    url = reverse("admin:memory_agentcredential_changelist")
    selection = {"action": "revoke_as_source", "_selected_action": [str(credential.pk)]}
    page = admin_client.post(url, selection)
    assert page.status_code == 200 and "<strong>2</strong> written" in page.content.decode()
    assert Revocation.objects.count() == 0
    admin_client.post(url, {**selection, "apply": "Yes, revoke", "reason": "leaked in a log"})
    revocation = Revocation.objects.get()
    assert (revocation.affected, revocation.revoked_by, revocation.token_revoked) == (2, "user:root", True)
    history = MemoryRecord.history.filter(id=records[0].pk).latest("history_date")
    assert (history.history_change_reason, history.history_note) == ("admin.revoke", "leaked in a log")


def test_the_admin_action_on_agents_needs_a_reason(admin_client, credential, write):
    write()
    url = reverse("admin:memory_agent_changelist")
    selection = {"action": "revoke_as_source", "_selected_action": [str(Agent.objects.get().pk)]}
    assert admin_client.post(url, {**selection, "apply": "Yes, revoke", "reason": ""}).status_code == 200  # the form again
    assert Revocation.objects.count() == 0
    admin_client.post(url, {**selection, "apply": "Yes, revoke", "reason": "misbehaving"})
    assert MemoryRecord.objects.get().status == Status.QUARANTINED
