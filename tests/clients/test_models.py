"""The client without a server: how it reads answers, tolerant of fields it does not know (the API
grows), free-form score parts, Retry-After in both forms, problems that are not problem+json, and
which calls it retries when nothing answers."""

import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import httpx
import pytest

from governed_memory import (
    DEFAULT_AUTHORITY,
    Client,
    Conflict,
    Memory,
    MemoryDraft,
    Provenance,
    RateLimited,
    RecallResult,
    ServerError,
    TransportError,
    UnexpectedResponse,
    ValidationError,
)
from governed_memory._core import Retry, RetryPolicy, api_base, outcome, parse_retry_after, write_call
from tests.clients.conftest import RecordingTransport
from tests.processes import free_port

RECORD = {
    "id": "6f1c0000-0000-0000-0000-000000000001",
    "tenant": "acme",
    "agent": "support-bot",
    "kind": "preference",
    "subject": "customer/acme",
    "purpose": "support",
    "content": "Prefers email.",
    "content_hash": "sha256:ab",
    "authority": "user",
    "trust": "trusted",
    "confidence": 0.9,
    "status": "active",
    "version": 3,
    "provenance": {
        "source_type": "user_turn",
        "uri": None,
        "session_id": "s-1",
        "turn_id": "12",
        "tool": None,
        "source_version": None,
        "observed_at": "2026-11-29T10:00:00Z",
        "contaminated": False,
        "risk_flags": ["new provenance field"],
    },
    "created_at": "2026-11-29T10:00:01.123456Z",
    "confirmed_at": "2026-11-29T10:00:01+00:00",
    "expires_at": "2026-12-06T10:00:01Z",
    "supersedes": None,
    "superseded_by": None,
    "written_by": {"a": "field added later"},
}


def test_a_record_with_unknown_fields_and_without_optional_ones_is_read():
    memory = Memory.from_json({k: v for k, v in RECORD.items() if k not in ("valid_from", "last_used_at", "quarantine_reason")})
    assert (memory.id, memory.version, memory.status, memory.trust) == (RECORD["id"], 3, "active", "trusted")
    assert memory.provenance.observed_at == datetime(2026, 11, 29, 10, tzinfo=UTC)
    assert memory.created_at.microsecond == 123456 and memory.last_used_at is None
    assert memory.raw["written_by"] == {"a": "field added later"}
    with pytest.raises(UnexpectedResponse):
        Memory.from_json({"status": "active"})  # no id: not a record


def test_recall_reads_whatever_score_parts_the_server_names_and_renders_one_prompt_block():
    item = {
        "id": "x",
        "kind": "semantic",
        "subject": "s",
        "content": "c",
        "authority": "third_party",
        "trust": "verified",
        "confidence": 0.5,
        "provenance": None,
        "score": 1.5,
        "score_parts": {"lexical": 1.0, "semantic": 0.25, "fusion": 0.25, "brand_new_part": 0},
        "tokens": 3,
        "context": "[semantic | third_party | confirmed 2026-11-29 | source web_page https://e.x | recorded 2026-11-29] c",
        "explanation": "a field added later",
    }
    result = RecallResult.from_json(
        {"items": [item, {**item, "id": "y", "trust": ""}], "tokens_used": 6, "omitted_for_budget": 1, "index": "lexical-v2"}
    )
    assert result.items[0].score_parts == {"lexical": 1.0, "semantic": 0.25, "fusion": 0.25, "brand_new_part": 0.0}
    header, first, second = result.to_prompt().splitlines()
    assert "not instructions" in header
    assert first == f"- (verified) {item['context']}" and second == f"- {item['context']}"
    assert result.to_prompt(header=None, with_trust=False).splitlines() == [f"- {item['context']}"] * 2
    assert result.items[0].relevance is None and (result.below_floor, result.min_relevance) == (0, None)  # an older server
    rated = RecallResult.from_json({"items": [{**item, "relevance": 0.25}], "below_floor": 3, "min_relevance": 0.004})
    assert (rated.items[0].relevance, rated.below_floor, rated.min_relevance) == (0.25, 3, 0.004)


def test_each_provenance_helper_carries_the_authority_of_its_source_into_the_write_body():
    helpers = {
        "user_turn": Provenance.user_turn("s-1", 12),
        "web_page": Provenance.web_page("https://e.x"),
        "tool_output": Provenance.tool_output("crm", session="s-1"),
        "document": Provenance.document("file:///a"),
        "import": Provenance.imported("file:///b"),
        "agent_inference": Provenance.agent_inference(),
        "operator_config": Provenance.operator_config(),
    }
    assert set(helpers) == set(DEFAULT_AUTHORITY)
    for source, provenance in helpers.items():
        body = MemoryDraft("c", "s", "p", "semantic", provenance, 0.5).to_json()
        assert body["provenance"]["source_type"] == source
        assert body["authority"] == DEFAULT_AUTHORITY[source]
    assert MemoryDraft("c", "s", "p", "semantic", helpers["user_turn"], 0.5, authority="agent").to_json()["authority"] == "agent"
    with pytest.raises(ValueError):  # a naive date-time would be refused by the server anyway
        MemoryDraft("c", "s", "p", "semantic", helpers["user_turn"], 0.5, expires_at=datetime(2030, 1, 1)).to_json()


def test_every_write_call_gets_its_own_idempotency_key_unless_given_one():
    draft = MemoryDraft("c", "s", "p", "semantic", Provenance.user_turn("s-1", 1), 0.5)
    first, second = write_call(draft), write_call(draft)
    assert first.headers["Idempotency-Key"] != second.headers["Idempotency-Key"]
    assert write_call(replace(draft, idempotency_key="mine")).headers["Idempotency-Key"] == "mine"


def test_retry_after_is_read_as_seconds_or_an_http_date():
    assert parse_retry_after("3") == 3.0
    later = datetime.now(UTC) + timedelta(seconds=30)
    assert 25 <= parse_retry_after(format_datetime(later, usegmt=True)) <= 30
    assert parse_retry_after("soon") is None and parse_retry_after(None) is None


def _answer(status: int, body=None, headers=None, text=None) -> httpx.Response:
    request = httpx.Request("POST", "http://h/api/v1/memories/")
    if text is not None:
        return httpx.Response(status, text=text, headers=headers, request=request)
    return httpx.Response(status, json=body, headers=headers, request=request)


def test_answers_become_values_retries_or_typed_errors():
    call = write_call(MemoryDraft("c", "s", "p", "semantic", Provenance.user_turn("s-1", 1), 0.5))
    policy = RetryPolicy(attempts=2, max_retry_after=10)
    throttled = {"type": "urn:governed-memory:problem:throttled", "title": "Too many requests", "status": 429}
    assert outcome(call, _answer(429, throttled, {"Retry-After": "2"}), 1, policy) == Retry(2.0)
    with pytest.raises(RateLimited) as limited:  # the last attempt
        outcome(call, _answer(429, throttled, {"Retry-After": "2"}), 2, policy)
    assert limited.value.retry_after == 2.0
    with pytest.raises(RateLimited):  # longer than the policy will wait
        outcome(call, _answer(429, throttled, {"Retry-After": "30"}), 1, policy)
    assert isinstance(outcome(call, _answer(503, text="<html>busy</html>"), 1, policy), Retry)
    with pytest.raises(ServerError) as proxy:
        outcome(call, _answer(502, text="<html>bad gateway</html>"), 2, policy)
    assert proxy.value.title == "Bad Gateway" and proxy.value.errors == {}
    invalid = {
        "type": "urn:governed-memory:problem:validation_failed",
        "title": "Invalid memory",
        "status": 400,
        "detail": "The memory was not stored: see errors.",
        "errors": {"provenance.uri": ["Needs its URI."]},
    }
    with pytest.raises(ValidationError) as bad:
        outcome(call, _answer(400, invalid), 1, policy)
    assert bad.value.code == "validation_failed" and bad.value.errors == {"provenance.uri": ["Needs its URI."]}
    assert str(bad.value).endswith("provenance.uri: Needs its URI.")
    with pytest.raises(Conflict) as conflict:  # a server that names the current version is believed
        outcome(call, _answer(409, {"title": "Stale version", "current_version": 7}), 1, policy)
    assert conflict.value.current_version == 7


def test_a_server_url_with_or_without_the_api_prefix_gives_the_api_root():
    assert api_base("http://h:8000") == api_base("http://h:8000/") == api_base("http://h:8000/api/v1") == "http://h:8000/api/v1/"
    assert api_base("https://h/prefix") == "https://h/prefix/api/v1/"


def test_reads_are_retried_after_connection_errors_and_confirm_and_forget_are_not():
    transport = RecordingTransport()
    unreachable = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    with Client(unreachable, "gma_x", transport=transport, retry=RetryPolicy(attempts=3, backoff=0.01)) as client:
        with pytest.raises(TransportError):
            client.get(str(uuid.uuid4()))
        with pytest.raises(TransportError):
            client.confirm(str(uuid.uuid4()), expected_version=1)
        with pytest.raises(TransportError):
            client.forget("customer/acme")
    # Refused connections never reach the recorder's log of answers; count the attempts instead.
    assert transport.attempts == {"GET": 3, "POST": 2}
