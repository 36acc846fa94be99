"""API fixtures: HTTP clients authenticated as an agent token or a reviewer's personal token,
going through the whole Django + DRF stack against the real database."""

import pytest
from rest_framework.test import APIClient

from memory.models import ReviewerToken
from tests.conftest import memory_body

MEMORIES = "/api/v1/memories/"
RECALL = "/api/v1/recall/"
FORGET = "/api/v1/forget/"

# What makes a write quarantined: the agent's own inference, never auto-admitted.
UNTRUSTED = {"authority": "agent", "provenance": {"source_type": "agent_inference"}}


def bearer_client(raw_token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw_token}")
    return client


@pytest.fixture
def agent_client(credential) -> APIClient:
    """The default agent (acme/support-bot, purpose support, may forget and confirm)."""
    return bearer_client(credential.raw_token)


@pytest.fixture
def client_for():
    """client_for(credential_or_reviewer) -> an APIClient with that principal's bearer token."""

    def make(principal) -> APIClient:
        raw = getattr(principal, "raw_token", None)
        if raw is None:  # a reviewer user: give them a personal token
            _, raw = ReviewerToken.issue(user=principal)
        return bearer_client(raw)

    return make


@pytest.fixture
def reviewer_client(reviewer, client_for) -> APIClient:
    return client_for(reviewer)


@pytest.fixture
def api_write(agent_client):
    """api_write(client=None, key=None, **body_overrides) -> the 201 response's JSON."""

    def do(client=None, key=None, **overrides) -> dict:
        headers = {"Idempotency-Key": key} if key else {}
        response = (client or agent_client).post(MEMORIES, memory_body(**overrides), format="json", headers=headers)
        assert response.status_code == 201, response.json()
        return response.json()

    return do


def recall_ids(client: APIClient, **body) -> list[str]:
    response = client.post(RECALL, {"purpose": "support", **body}, format="json")
    assert response.status_code == 200, response.json()
    return [item["id"] for item in response.json()["items"]]


def assert_problem(response, status: int, *, errors: set[str] | None = None) -> dict:
    assert response.status_code == status, (response.status_code, response.content[:500])
    assert response["Content-Type"] == "application/problem+json"
    body = response.json()
    assert body["status"] == status
    assert {"type", "title", "status", "detail", "instance"} <= set(body)
    if errors is not None:
        assert errors <= set(body.get("errors", {})), body
    return body
