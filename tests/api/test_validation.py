"""Bad input gets a 400 problem with field errors and writes nothing."""

import pytest

from governance.models import ForgetRequest
from memory.models import IdempotencyKey, MemoryRecord
from tests.api.conftest import FORGET, MEMORIES, RECALL, assert_problem
from tests.conftest import memory_body

pytestmark = pytest.mark.django_db


def _row_counts() -> tuple[int, int, int, int]:
    return (
        MemoryRecord.objects.count(),
        MemoryRecord.history.count(),
        IdempotencyKey.objects.count(),
        ForgetRequest.objects.count(),
    )


@pytest.fixture
def unchanged(db):
    """Asserts, after the test body, that no row was written."""
    before = _row_counts()
    yield
    assert _row_counts() == before


INVALID_WRITES = [
    # (overrides, fields that must be named in errors)
    ({"kind": "gossip"}, {"kind"}),
    ({"kind": None}, {"kind"}),
    ({"provenance": None}, {"provenance"}),
    ({"provenance": "chat"}, {"provenance"}),
    ({"provenance": {"source_type": "rumour"}}, {"provenance.source_type"}),
    ({"provenance": {"source_type": "web_page", "uri": None}, "authority": "third_party"}, {"provenance.uri"}),
    ({"provenance": {"source_type": "tool_output", "tool": None}, "authority": "third_party"}, {"provenance.tool"}),
    ({"provenance": {"observed_at": "yesterday"}}, {"provenance.observed_at"}),
    ({"provenance": {"contaminated": "no"}}, {"provenance.contaminated"}),
    ({"provenance": {"source_type": "web_page", "uri": "https://x.example"}, "authority": "user"}, {"authority"}),
    ({"authority": "god"}, {"authority"}),
    ({"confidence": 1.5}, {"confidence"}),
    ({"confidence": -0.1}, {"confidence"}),
    ({"confidence": "high"}, {"confidence"}),
    ({"content": ""}, {"content"}),
    ({"content": "   "}, {"content"}),
    ({"content": "x" * 4001}, {"content"}),
    ({"content": 42}, {"content"}),
    ({"subject": ""}, {"subject"}),
    ({"subject": ["customer/acme"]}, {"subject"}),
    ({"purpose": None}, {"purpose"}),
    ({"ttl_seconds": 10**8}, {"ttl_seconds"}),  # beyond the preference kind's maximum
    ({"ttl_seconds": -5}, {"ttl_seconds"}),
    ({"ttl_seconds": "1 week"}, {"ttl_seconds"}),
    ({"ttl_seconds": 60, "expires_at": "2030-01-01T00:00:00Z"}, {"ttl_seconds"}),
    ({"expires_at": "2001-01-01T00:00:00Z"}, {"expires_at"}),
    ({"expires_at": "2030-01-01T00:00:00"}, {"expires_at"}),  # no zone
    ({"valid_from": "2030-01-02T00:00:00Z", "valid_to": "2030-01-01T00:00:00Z"}, {"valid_to"}),
    ({"supersedes": "not-a-uuid", "supersedes_version": 1}, {"supersedes"}),
    ({"supersedes_version": 1}, {"supersedes_version"}),
    ({"trust": "verified"}, {"trust"}),  # trust is the server's to decide
    ({"status": "active"}, {"status"}),
    ({"unexpected": True}, {"unexpected"}),
]


@pytest.mark.parametrize(
    ("overrides", "fields"), INVALID_WRITES, ids=[",".join(sorted(f)) + f"-{i}" for i, (_, f) in enumerate(INVALID_WRITES)]
)
def test_invalid_write_is_a_400_with_field_errors_and_writes_nothing(agent_client, unchanged, overrides, fields):
    merged = {key: value for key, value in overrides.items() if key != "provenance" or isinstance(value, dict)}
    body = memory_body(**merged)
    if "provenance" in overrides and not isinstance(overrides["provenance"], dict):
        body["provenance"] = overrides["provenance"]  # replaced outright, not merged
    response = agent_client.post(MEMORIES, body, format="json", headers={"Idempotency-Key": "k-1"})
    problem = assert_problem(response, 400, errors=fields)
    assert problem["type"].endswith("validation_failed")


def test_every_mistake_is_reported_at_once(agent_client, unchanged):
    body = assert_problem(agent_client.post(MEMORIES, {"kind": "gossip", "confidence": 3}, format="json"), 400)
    assert {"kind", "subject", "purpose", "content", "authority", "confidence", "provenance"} <= set(body["errors"])


@pytest.mark.parametrize("payload", ['{"kind": "preference",', "not json", "[1, 2", '{"confidence": NaN}'])
def test_malformed_json_is_a_400_problem(agent_client, unchanged, payload):
    response = agent_client.post(MEMORIES, payload, content_type="application/json")
    assert assert_problem(response, 400)["type"].endswith("malformed_request")


def test_a_json_array_instead_of_an_object_is_a_400(agent_client, unchanged):
    assert_problem(agent_client.post(MEMORIES, [memory_body()], format="json"), 400, errors={"non_field_errors"})


def test_a_non_json_body_is_a_415(agent_client, unchanged):
    response = agent_client.post(MEMORIES, "kind=preference&subject=x", content_type="application/x-www-form-urlencoded")
    assert_problem(response, 415)


def test_a_too_long_idempotency_key_is_a_400(agent_client, unchanged):
    response = agent_client.post(MEMORIES, memory_body(), format="json", headers={"Idempotency-Key": "k" * 201})
    assert_problem(response, 400, errors={"Idempotency-Key"})


@pytest.mark.parametrize(
    ("body", "fields"),
    [
        ({}, {"expected_version"}),
        ({"expected_version": "1"}, {"expected_version"}),
        ({"expected_version": 1.0}, {"expected_version"}),
        ({"expected_version": True}, {"expected_version"}),
        ({"expected_version": 0}, {"expected_version"}),
        ({"expected_version": 2**31}, {"expected_version"}),  # beyond the version column
        ({"expected_version": 10**30}, {"expected_version"}),
        ({"expected_version": 1, "note": 5}, {"note"}),
        ({"expected_version": 1, "note": "n" * 501}, {"note"}),
        ({"expected_verison": 1}, {"expected_version", "expected_verison"}),
    ],
)
def test_invalid_transition_body_is_a_400_and_changes_nothing(write, agent_client, body, fields):
    record = write()
    before = _row_counts()
    assert_problem(agent_client.post(f"{MEMORIES}{record.pk}/confirm/", body, format="json"), 400, errors=fields)
    record.refresh_from_db()
    assert (record.version, record.confirmed_at, _row_counts()) == (1, record.confirmed_at, before)


@pytest.mark.parametrize(
    ("body", "fields"),
    [
        ({"query": "x"}, {"purpose"}),
        ({"purpose": "support", "limit": 0}, {"limit"}),
        ({"purpose": "support", "limit": "5"}, {"limit"}),
        ({"purpose": "support", "kinds": ["gossip"]}, {"kinds"}),
        ({"purpose": "support", "kinds": "preference"}, {"kinds"}),
        ({"purpose": "support", "token_budget": -1}, {"token_budget"}),
        ({"purpose": "support", "subject": 7}, {"subject"}),
        ({"purpose": "support", "query": 7}, {"query"}),
        ({"purpose": "support", "everything": True}, {"everything"}),
    ],
)
def test_invalid_recall_is_a_400_and_marks_nothing_used(write, agent_client, body, fields):
    record = write(content="x marks the spot")
    assert_problem(agent_client.post(RECALL, body, format="json"), 400, errors=fields)
    record.refresh_from_db()
    assert record.last_used_at is None


@pytest.mark.parametrize(
    ("body", "fields"),
    [
        ({}, {"subject"}),
        ({"subject": ""}, {"subject"}),
        ({"subject": 12}, {"subject"}),
        ({"subject": "s" * 201}, {"subject"}),
        ({"subject": "customer/acme", "reason": ["x"]}, {"reason"}),
        ({"subject": "customer/acme", "reason": "r" * 501}, {"reason"}),
        ({"subject": "customer/acme", "scope": "all"}, {"scope"}),
    ],
)
def test_invalid_forget_is_a_400_and_forgets_nothing(write, agent_client, body, fields):
    record = write()
    before = _row_counts()
    assert_problem(agent_client.post(FORGET, body, format="json"), 400, errors=fields)
    record.refresh_from_db()
    assert record.status == "active" and _row_counts() == before
