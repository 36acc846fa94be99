"""GET /api/v1/indexes/ counts only what the caller may see: an index is built over every
tenant's records, and its `inputs.records` would tell a reviewer of one tenant how much the others
hold. A reviewer gets their tenants' count; a superuser (every tenant) gets the index's own."""

import pytest
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from memory.search.build import build_index, request_rebuild
from memory.services import memory_write
from tests.api.conftest import UNTRUSTED
from tests.conftest import memory_body

pytestmark = pytest.mark.django_db

INDEXES = "/api/v1/indexes/"


def listed(client: APIClient, name: str) -> dict:
    response = client.get(INDEXES)
    assert response.status_code == 200, response.content
    return {entry["name"]: entry for entry in response.json()}[name]


def test_reviewers_see_the_record_count_of_their_own_tenants_only(
    tenant, other_tenant, credential, make_credential, make_reviewer, client_for, write
):
    for _ in range(3):
        write()
    write(**UNTRUSTED)  # quarantined: not in any index
    other = make_credential(other_tenant)
    for _ in range(5):
        memory_write(credential=other, data=memory_body(subject="customer/globex"), idempotency_key=None)
    index = build_index(request_rebuild(name="counted").pk)
    assert index.inputs["records"] == 8  # built over both tenants
    write()  # written after the build: not among its inputs

    acme_only = listed(client_for(make_reviewer(tenant)), "counted")
    assert acme_only["inputs"] == {"records": 3, "up_to": index.inputs["up_to"]}
    assert listed(client_for(make_reviewer(other_tenant, username="gina")), "counted")["inputs"]["records"] == 5
    assert listed(client_for(make_reviewer(tenant, other_tenant, username="bo")), "counted")["inputs"]["records"] == 8

    superuser = APIClient()
    superuser.force_login(get_user_model().objects.create_superuser(username="ada", password="admin-pass-123"))
    assert listed(superuser, "counted")["inputs"] == index.inputs  # every tenant: the index's own figure


def test_an_index_being_built_has_no_count_to_limit(tenant, make_reviewer, client_for, write):
    write()
    request_rebuild(name="pending")
    assert listed(client_for(make_reviewer(tenant)), "pending")["inputs"] == {}
