"""Every error is an RFC 9457 problem: authentication, permissions, unknown URLs, methods,
rate limits and unexpected failures (which reveal nothing)."""

import json
import logging

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from memory.models import MemoryRecord, ReviewerToken
from tests.api.conftest import FORGET, MEMORIES, RECALL, assert_problem, bearer_client
from tests.conftest import memory_body

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("authorization", [None, "Bearer", "Bearer gma_unknown", "Bearer nope", "Bearer a b", "Token gma_x"])
def test_requests_without_a_valid_token_are_401(authorization, db):
    client = APIClient()
    if authorization:
        client.credentials(HTTP_AUTHORIZATION=authorization)
    for response in (client.get(MEMORIES), client.post(RECALL, {"purpose": "support"})):
        assert_problem(response, 401)
        assert response["WWW-Authenticate"] == 'Bearer realm="api"'


def test_a_revoked_agent_token_is_401(credential, agent_client):
    assert agent_client.get(MEMORIES).status_code == 200
    credential.revoked_at = timezone.now()
    credential.save(update_fields=["revoked_at"])
    assert_problem(agent_client.get(MEMORIES), 401)


def test_a_revoked_reviewer_token_or_inactive_reviewer_is_401(reviewer):
    token, raw = ReviewerToken.issue(user=reviewer)
    client = bearer_client(raw)
    assert client.get(MEMORIES).status_code == 200
    reviewer.is_active = False
    reviewer.save(update_fields=["is_active"])
    assert_problem(client.get(MEMORIES), 401)
    reviewer.is_active = True
    reviewer.save(update_fields=["is_active"])
    token.revoked_at = timezone.now()
    token.save(update_fields=["revoked_at"])
    assert_problem(client.get(MEMORIES), 401)


def test_a_logged_in_user_who_is_not_a_reviewer_is_403(django_user_model, client_for):
    user = django_user_model.objects.create_user(username="mallory", password="x-long-password")
    assert_problem(client_for(user).get(MEMORIES), 403)


def test_reviewer_session_reads_but_needs_csrf_to_change_anything(reviewer, write):
    record = write()
    client = APIClient(enforce_csrf_checks=True)
    assert client.login(username=reviewer.username, password=reviewer.raw_password)
    assert client.get(f"{MEMORIES}{record.pk}/").json()["id"] == str(record.pk)
    assert_problem(client.post(f"{MEMORIES}{record.pk}/confirm/", {"expected_version": 1}), 403)


def test_reviewers_cannot_write_or_recall(reviewer_client):
    assert_problem(reviewer_client.post(MEMORIES, memory_body(), format="json"), 403)
    assert_problem(reviewer_client.post(RECALL, {"purpose": "support"}), 403)


@pytest.mark.parametrize(
    "path", ["/api/v1/nothing/", "/api/v2/memories/", "/api/v1/memories/not-a-uuid/", "/api/v1/forget/123/", "/api/"]
)
def test_unknown_api_urls_are_404_problems(agent_client, path):
    assert_problem(agent_client.get(path), 404)
    assert_problem(agent_client.post(path, {}), 404)


def test_a_missing_trailing_slash_gets_a_hint(agent_client):
    body = assert_problem(agent_client.post("/api/v1/memories", memory_body()), 404)
    assert "/api/v1/memories/" in body["detail"]


def test_a_record_id_that_does_not_exist_is_404(agent_client):
    assert_problem(agent_client.get(f"{MEMORIES}00000000-0000-0000-0000-000000000000/"), 404)


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("delete", "{record}"),
        ("put", "{record}"),
        ("patch", "{record}"),
        ("get", "{record}confirm/"),
        ("get", RECALL),
        ("delete", MEMORIES),
    ],
)
def test_wrong_methods_are_405_with_allow(agent_client, write, method, path):
    record = write()
    url = path.format(record=f"{MEMORIES}{record.pk}/")
    response = getattr(agent_client, method)(url)
    assert_problem(response, 405)
    assert response["Allow"]


def test_requests_over_the_rate_limit_are_429_with_retry_after(credential, make_credential, tenant, settings):
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"credential": "3/min"}}
    limited = bearer_client(credential.raw_token)
    for _ in range(3):
        assert limited.get(MEMORIES).status_code == 200
    response = limited.post(RECALL, {"purpose": "support"})
    body = assert_problem(response, 429)
    assert 1 <= int(response["Retry-After"]) <= 60
    assert body["type"].endswith("throttled")
    # The budget is per credential: another token of the same agent is not limited.
    assert bearer_client(make_credential(tenant).raw_token).get(MEMORIES).status_code == 200


def test_the_default_rate_allows_an_agents_burst(agent_client):
    for _ in range(30):
        assert agent_client.get(MEMORIES).status_code == 200


def test_unexpected_errors_are_a_bare_500_without_trace_or_content(agent_client, write, monkeypatch, caplog):
    secret = write(content="The vault code is 4711.").content

    def broken(**kwargs):
        raise RuntimeError(f"leaked: {secret}")

    # Fault injection: the only way to make a real code path fail on purpose.
    monkeypatch.setattr("memory.api.views.recall", broken)
    with caplog.at_level(logging.ERROR, logger="memory.api"):
        response = agent_client.post(RECALL, {"purpose": "support", "query": "vault"})
    body = assert_problem(response, 500)
    assert body["detail"] == "The request could not be completed."
    assert b"4711" not in response.content and b"Traceback" not in response.content
    assert "RuntimeError" in caplog.text and "4711" not in caplog.text
    assert all("4711" not in str(getattr(rec, "code_locations", "")) for rec in caplog.records)


def test_agent_without_the_forget_capability_gets_403_and_forgets_nothing(tenant, make_credential, write):
    record = write()
    client = bearer_client(make_credential(tenant).raw_token)
    assert_problem(client.post(FORGET, {"subject": "customer/acme"}), 403)
    record.refresh_from_db()
    assert record.status == "active"


def test_problems_tell_the_client_what_to_send_instead(agent_client, credential):
    no_type = agent_client.generic("POST", MEMORIES, b'{"kind": "preference"}', content_type="")
    assert "application/json" in assert_problem(no_type, 415)["detail"]
    wrong_scheme = APIClient()
    wrong_scheme.credentials(HTTP_AUTHORIZATION=f"Token {credential.raw_token}")
    assert "Bearer" in assert_problem(wrong_scheme.get(MEMORIES), 401)["detail"]
    assert "Bearer" in assert_problem(APIClient().get(MEMORIES), 401)["detail"]


def test_a_bad_recall_is_an_invalid_request_not_an_invalid_memory(agent_client):
    assert (
        assert_problem(agent_client.post(RECALL, {"purpose": "support", "limit": 0}, format="json"), 400)["title"]
        == "Invalid request"
    )


def test_a_user_turn_without_session_or_uri_is_reported_on_the_provenance(agent_client):
    body = memory_body(provenance={"source_type": "user_turn", "uri": None, "session_id": None, "turn_id": None})
    problem = assert_problem(agent_client.post(MEMORIES, body, format="json"), 400, errors={"provenance"})
    assert "session id or a URI" in problem["errors"]["provenance"][0]


def _with_duplicate(body: dict, key: str, value, *, inside: str | None = None) -> bytes:
    """`body` as JSON text with `key` written a second time (in `inside` when given), which a dict cannot hold."""
    text = json.dumps(body)
    if inside is None:
        return (text[:-1] + f", {json.dumps(key)}: {json.dumps(value)}}}").encode()
    start = text.index(f'"{inside}": {{') + len(f'"{inside}": {{')
    return (text[:start] + f"{json.dumps(key)}: {json.dumps(value)}, " + text[start:]).encode()


@pytest.mark.parametrize(
    ("key", "value", "inside"),
    [("purpose", "billing", None), ("authority", "operator", None), ("source_type", "operator_config", "provenance")],
)
def test_a_body_that_names_a_key_twice_is_a_400_and_writes_nothing(agent_client, key, value, inside):
    """Which of two values counts is up to the decoder; the API takes neither."""
    raw = _with_duplicate(memory_body(), key, value, inside=inside)
    body = assert_problem(agent_client.generic("POST", MEMORIES, raw, content_type="application/json"), 400)
    assert body["type"].endswith("malformed_request") and f"duplicate key '{key}'" in body["detail"]
    assert not MemoryRecord.objects.exists()


def test_a_batch_item_that_names_a_key_twice_fails_the_whole_batch(agent_client):
    items = json.dumps({"items": [memory_body(), memory_body()]})
    raw = items.replace('"kind": "preference"', '"kind": "preference", "kind": "semantic"', 1).encode()
    assert_problem(agent_client.generic("POST", f"{MEMORIES}batch/", raw, content_type="application/json"), 400)
    assert not MemoryRecord.objects.exists()
    # The same value twice is no different: refused too, since a key means one thing once.
    again = json.dumps(memory_body()).replace('"kind": "preference"', '"kind": "preference", "kind": "preference"', 1)
    assert_problem(agent_client.generic("POST", MEMORIES, again.encode(), content_type="application/json"), 400)


def test_an_anonymous_caller_cannot_pick_its_own_rate_bucket_with_a_forged_forwarded_header(rf):
    """Without a proxy in front (LOGIN_PROXY_COUNT 0) the throttle keys an anonymous caller by the
    peer address, whatever X-Forwarded-For claims."""
    from rest_framework.request import Request

    from memory.api.throttling import CredentialRateThrottle

    keys = {
        CredentialRateThrottle().get_cache_key(
            Request(rf.get("/", HTTP_X_FORWARDED_FOR=forged, REMOTE_ADDR="198.51.100.7")), None
        )
        for forged in ("1.1.1.1", "2.2.2.2", "")
    }
    assert len(keys) == 1 and "198.51.100.7" in keys.pop()
