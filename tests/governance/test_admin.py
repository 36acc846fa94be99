"""The admin shows job runs, forget requests with their receipts, tombstones and proposals, and
lets nobody edit them."""

import pytest
from django.contrib.auth import get_user_model

from governance.jobs import run_job
from governance.models import ForgetRequest
from governance.services import forget_request_create

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(client):
    admin = get_user_model().objects.create_superuser("root", "root@example.com", "a-long-password")
    client.force_login(admin)
    return client


def test_job_runs_and_forget_receipts_are_visible_and_read_only(admin_client, tenant, write, reviewer_actor):
    write(subject="customer/erin")
    request = forget_request_create(actor=reviewer_actor, tenant=tenant, subject="customer/erin")
    run = run_job("propagate_forgets", trigger="run_job")

    changelist = admin_client.get("/admin/governance/jobrun/")
    assert changelist.status_code == 200 and b"propagate_forgets" in changelist.content
    detail = admin_client.get(f"/admin/governance/forgetrequest/{request.pk}/change/")
    assert detail.status_code == 200
    for artifact in (b"record_content", b"history_rows", b"external_backups"):
        assert artifact in detail.content
    for url in ("/admin/governance/forgettombstone/", "/admin/governance/dedupproposal/", "/admin/governance/forgetrequest/"):
        assert admin_client.get(url).status_code == 200
    assert admin_client.get("/admin/governance/jobrun/add/").status_code == 403
    admin_client.post(f"/admin/governance/jobrun/{run.pk}/change/", {"job": "forged"})
    run.refresh_from_db()
    assert run.job == "propagate_forgets"
    admin_client.post(f"/admin/governance/forgetrequest/{request.pk}/delete/", {"post": "yes"})
    assert ForgetRequest.objects.filter(pk=request.pk).exists()
