"""The admin changes records only through lifecycle actions: no edit form, no history revert, and
no view of a forgotten record's old content."""

import pytest
from django.urls import reverse

from memory.models import MemoryRecord, Status

pytestmark = pytest.mark.django_db


def test_posting_the_change_form_or_a_history_revert_changes_nothing(admin_client, write):
    record = write(authority="agent", provenance={"source_type": "agent_inference"})
    history_id = record.history.get().history_id
    change = reverse("admin:memory_memoryrecord_change", args=[record.pk])
    revert = reverse("admin:memory_memoryrecord_simple_history", args=[record.pk, history_id])
    assert admin_client.post(change, {"status": "active"}).status_code == 403
    assert admin_client.post(revert, {}).status_code == 403
    record.refresh_from_db()
    assert (record.status, record.version, record.history.count()) == (Status.QUARANTINED, 1, 1)


def test_admin_promote_action_goes_through_the_service(admin_client, write):
    record = write(authority="agent", provenance={"source_type": "agent_inference"})
    changelist = reverse("admin:memory_memoryrecord_changelist")
    response = admin_client.post(changelist, {"action": "promote", "_selected_action": [str(record.pk)]}, follow=True)
    assert response.status_code == 200
    record.refresh_from_db()
    assert (record.status, record.version) == (Status.ACTIVE, 2)
    assert record.history.order_by("-history_id").first().history_change_reason == "admin.promote"


def test_history_version_of_a_forgotten_record_is_not_shown(admin_client, write, credential):
    from memory.actors import Actor
    from memory.services import memory_forget_subject

    record = write(subject="customer/gone", content="Secret-ish detail.")
    history_id = record.history.get().history_id
    memory_forget_subject(tenant_id=record.tenant_id, subject="customer/gone", actor=Actor.for_credential(credential))
    response = admin_client.get(reverse("admin:memory_memoryrecord_simple_history", args=[record.pk, history_id]))
    assert response.status_code == 403
    assert b"Secret-ish" not in response.content
    assert MemoryRecord.objects.get(pk=record.pk).status == Status.FORGOTTEN


def test_the_admin_is_branded_as_the_product(admin_client):
    page = admin_client.get("/admin/").content.decode()
    assert '<a href="/admin/">Governed memory administration</a>' in page
    assert "<title>Tenants, retention, jobs and audit trails | Governed memory admin</title>" in page
    assert "Django administration" not in page and "Django site admin" not in page


def test_an_unknown_admin_page_is_the_admins_404_and_the_reviewers_404_is_unchanged(admin_client):
    response = admin_client.get("/admin/no-such-page/")
    page = response.content.decode()
    assert response.status_code == 404
    assert "<h1>Page not found</h1>" in page and "There is no admin page at this address" in page
    assert "Governed memory administration" in page and 'href="/admin/">Back to the admin index' in page
    assert "assigned to review" not in page

    reviewer_404 = admin_client.get("/review/no-such-page/")
    assert reviewer_404.status_code == 404
    assert b"There is nothing here, or nothing you are assigned to review." in reviewer_404.content
    assert b"no admin page" not in reviewer_404.content
