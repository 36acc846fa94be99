"""Filing a revocation in the reviewer pages (form, confirmation with the count, receipt, list) and
from the admin (an action on agent tokens and agents, with a confirmation page)."""

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from governance.models import Revocation
from governed_memory.signing import generate_private_key, public_key_text
from memory.models import Agent, AgentCredential, MemoryRecord, SourceKey, Status
from memory.services import memory_write
from tests.conftest import memory_body
from tests.signed_support import crm_claim, register_crm

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


def test_the_admin_registers_a_source_and_revokes_its_key_with_what_it_verified(admin_client, tenant, credential):
    key = generate_private_key()
    added = admin_client.post(
        reverse("admin:memory_registeredsource_add"),
        {
            "tenant": tenant.pk,
            "name": "crm",
            "description": "",
            "authority": "third_party",
            "auto_admit_kinds": ["semantic"],
            "public_key": public_key_text(key),
            "overlap_hours": 24,
            "keys-TOTAL_FORMS": 0,  # the keys' read-only inline
            "keys-INITIAL_FORMS": 0,
        },
    )
    assert added.status_code == 302, added.context["adminform"].form.errors if added.context else added
    source_key = SourceKey.objects.get(source__name="crm")
    record = memory_write(credential=credential, data=crm_claim(key)).record
    assert record.status == Status.ACTIVE

    url = reverse("admin:memory_sourcekey_changelist")
    selection = {"action": "revoke_as_source", "_selected_action": [str(source_key.pk)]}
    page = admin_client.post(url, selection).content.decode()
    assert "<strong>1</strong> verified" in page and "verify nothing from now on" in page
    admin_client.post(url, {**selection, "apply": "Yes, revoke", "reason": "key leaked"})
    revocation = Revocation.objects.get()
    assert (revocation.source, revocation.source_key, revocation.affected, revocation.token_revoked) == (
        Revocation.Source.SOURCE_KEY,
        source_key,
        1,
        True,
    )
    record.refresh_from_db()
    assert (record.status, record.provenance["verified"]) == (Status.QUARANTINED, False)


def test_the_admin_sets_a_sources_policy_and_rotates_its_key_with_an_overlap(admin_client, tenant):
    first, second = generate_private_key(), generate_private_key()
    source = register_crm(tenant, first)
    form = {
        "tenant": tenant.pk,
        "name": "crm",
        "description": "the CRM",
        "authority": "third_party",
        "auto_admit_kinds": ["procedural"],
        "public_key": public_key_text(second),
        "overlap_hours": 2,
        "keys-TOTAL_FORMS": 1,
        "keys-INITIAL_FORMS": 1,
        "keys-0-id": SourceKey.objects.get().pk,
        "keys-0-source": source.pk,
    }
    changed = admin_client.post(reverse("admin:memory_registeredsource_change", args=[source.pk]), form)
    assert changed.status_code == 302, changed.context["adminform"].form.errors if changed.context else changed
    source.refresh_from_db()
    assert (source.auto_admit_kinds, source.description) == (["procedural"], "the CRM")
    old, new = SourceKey.objects.order_by("pk")
    assert new.public_key == public_key_text(second) and new.valid_until is None
    assert timedelta(hours=1, minutes=59) < old.valid_until - new.valid_from <= timedelta(hours=2)
