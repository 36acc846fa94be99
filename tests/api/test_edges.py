"""Hostile and careless input at the edges of the API: every class of bad value is a 400 (or 413)
problem, writes nothing, and leaves every page that lists the tenant's memories working."""

import json

import pytest
from django.urls import reverse

from governance.models import ForgetRequest
from memory.models import IdempotencyKey, MemoryRecord
from tests.api.conftest import MEMORIES, RECALL, UNTRUSTED, assert_problem
from tests.conftest import memory_body

pytestmark = pytest.mark.django_db

BAD_DATETIMES = [
    "0001-01-01T00:00:00+01:00",  # year 0 in UTC: stored as a BC date by PostgreSQL, unreadable after
    "0001-01-01T00:00:00Z",
    "1899-12-31T23:59:59Z",
    "9999-12-31T23:00:00-05:00",  # past year 9999 in UTC
    "9999-06-01T00:00:00Z",
    "2030-01-01T00:00:00+23:59",  # offsets beyond what PostgreSQL accepts
    "2030-01-01T00:00:00-16:40",
    "2030-01-01T00:00:00",  # no zone
    "2030-02-30T00:00:00Z",
    "tomorrow",
]
DATETIME_FIELDS = ["provenance.observed_at", "valid_from", "valid_to", "expires_at"]


def _counts() -> tuple[int, int, int, int]:
    return (
        MemoryRecord.objects.count(),
        MemoryRecord.history.count(),
        IdempotencyKey.objects.count(),
        ForgetRequest.objects.count(),
    )


def _with(path: str, value, **overrides) -> dict:
    body = memory_body(**overrides)
    *parents, name = path.split(".")
    target = body
    for parent in parents:
        target = target[parent]
    target[name] = value
    return body


@pytest.fixture
def pages_still_work(agent_client, reviewer_client, quarantined_record, client, reviewer):
    """After the test body: nothing was written, and the agent's list and recall and the reviewer's
    queue and list pages all still answer 200."""
    before = _counts()
    yield
    assert _counts() == before
    assert agent_client.get(MEMORIES).status_code == 200
    assert agent_client.post(RECALL, {"purpose": "support", "query": "email"}, format="json").status_code == 200
    assert reviewer_client.get(MEMORIES).status_code == 200
    client.force_login(reviewer)
    assert client.get(reverse("review:quarantine")).status_code == 200
    assert client.get(reverse("review:memory_detail", args=[quarantined_record.pk])).status_code == 200


@pytest.fixture
def quarantined_record(write):
    return write(**UNTRUSTED)


@pytest.mark.parametrize("value", BAD_DATETIMES)
@pytest.mark.parametrize("path", DATETIME_FIELDS)
def test_a_datetime_outside_what_the_database_keeps_is_a_400_and_stores_nothing(agent_client, pages_still_work, path, value):
    body = _with(path, value)
    response = agent_client.post(MEMORIES, body, format="json", headers={"Idempotency-Key": f"dt-{path}-{value}"})
    assert_problem(response, 400, errors={path})


@pytest.mark.parametrize("value", ["1900-01-01T00:00:00Z", "2026-11-29T10:00:00+14:00", "2026-11-29T10:00:00-12:00"])
def test_a_datetime_at_the_edges_of_the_range_is_stored_in_utc_and_reads_back(agent_client, value):
    created = agent_client.post(MEMORIES, _with("provenance.observed_at", value), format="json")
    assert created.status_code == 201, created.json()
    again = agent_client.get(f"{MEMORIES}{created.json()['id']}/").json()
    assert again["provenance"]["observed_at"] == created.json()["provenance"]["observed_at"]
    assert again["provenance"]["observed_at"].endswith("Z")


@pytest.mark.parametrize("value", BAD_DATETIMES[:7])
@pytest.mark.parametrize("name", ["created_after", "created_before"])
def test_a_list_filter_datetime_out_of_range_is_a_400(agent_client, pages_still_work, name, value):
    assert_problem(agent_client.get(MEMORIES, {name: value}), 400, errors={name})


STRING_FIELDS = [
    "content",
    "subject",
    "purpose",
    "provenance.uri",
    "provenance.session_id",
    "provenance.turn_id",
    "provenance.source_version",
    "kind",
    "authority",
    "provenance.source_type",
]


@pytest.mark.parametrize("bad", ["nul\x00inside", "lone \ud800 surrogate", "\udfff"])
@pytest.mark.parametrize("path", STRING_FIELDS)
def test_nul_and_lone_surrogates_in_any_string_field_are_a_400(agent_client, pages_still_work, path, bad):
    body = _with(path, bad)
    # Sent as the JSON text a client would send: \u0000 and \ud800 escapes.
    raw = json.dumps(body)
    assert_problem(agent_client.post(MEMORIES, raw, content_type="application/json"), 400, errors={path})


@pytest.mark.parametrize("bad", ["nul\x00inside", "lone \ud800 surrogate"])
@pytest.mark.parametrize("name", ["query", "subject", "purpose", "kinds"])
def test_nul_and_lone_surrogates_in_a_recall_are_a_400(agent_client, pages_still_work, name, bad):
    body = {"purpose": "support", "query": "email", name: [bad] if name == "kinds" else bad}
    response = agent_client.post(RECALL, json.dumps(body), content_type="application/json")
    problem = assert_problem(response, 400)
    assert any(field == name or field.startswith(f"{name}.") for field in problem["errors"]), problem


@pytest.fixture
def active_record(write):
    return write()


def test_nul_in_a_transition_note_is_a_400(agent_client, active_record, pages_still_work):
    record = active_record
    response = agent_client.post(
        f"{MEMORIES}{record.pk}/confirm/", json.dumps({"expected_version": 1, "note": "a\x00b"}), content_type="application/json"
    )
    assert_problem(response, 400, errors={"note"})


@pytest.mark.parametrize("query", ["'' foo", "'", "''''", "foo & | ! bar", "a:* (b", "\\ ' \" ;", "!!!", "<-> <2>"])
def test_no_query_text_can_break_recall(agent_client, write, query):
    write(content="Prefers email over phone, says foo.")
    response = agent_client.post(RECALL, {"purpose": "support", "query": query}, format="json")
    assert response.status_code == 200, response.content[:300]


@pytest.mark.parametrize("depth", [50, 5000, 100_000])
def test_json_nested_deeply_is_a_400(agent_client, pages_still_work, depth):
    raw = '{"kind": ' + "[" * depth + "]" * depth + "}"
    assert_problem(agent_client.post(MEMORIES, raw, content_type="application/json"), 400)


def test_a_body_of_a_few_megabytes_is_a_413(agent_client, pages_still_work):
    raw = json.dumps(memory_body(content="x" * (3 * 1024 * 1024)))
    body = assert_problem(agent_client.post(MEMORIES, raw, content_type="application/json"), 413)
    assert body["type"].endswith("payload_too_large")


def test_a_float_ttl_or_an_infinite_confidence_is_a_400(agent_client, pages_still_work):
    assert_problem(agent_client.post(MEMORIES, memory_body(ttl_seconds=3600.5), format="json"), 400, errors={"ttl_seconds"})
    raw = json.dumps(memory_body()).replace('"confidence": 0.9', '"confidence": 1e999')
    assert_problem(agent_client.post(MEMORIES, raw, content_type="application/json"), 400, errors={"confidence"})


def test_a_note_longer_than_the_limit_is_refused_not_cut(agent_client, write):
    record = write()
    assert_problem(
        agent_client.post(f"{MEMORIES}{record.pk}/confirm/", {"expected_version": 1, "note": "n" * 501}, format="json"),
        400,
        errors={"note"},
    )
    record.refresh_from_db()
    assert record.version == 1


def test_a_subject_shaped_like_a_forgotten_fingerprint_is_refused(agent_client, pages_still_work):
    body = memory_body(subject="forgotten:" + "a" * 64)
    assert_problem(agent_client.post(MEMORIES, body, format="json"), 400, errors={"subject"})


@pytest.mark.parametrize("field, value", [("as_of", "2020-01-01T00:00:00Z"), ("query", "email"), ("limit", 3)])
def test_a_write_carrying_another_bodys_field_is_a_400_and_stores_nothing(agent_client, pages_still_work, field, value):
    body = memory_body(**{field: value})
    assert_problem(agent_client.post(MEMORIES, body, format="json"), 400, errors={field})
    batch = agent_client.post(f"{MEMORIES}batch/", {"items": [body]}, format="json")
    assert batch.status_code == 200 and batch.json()["results"][0]["status"] == 400
    assert field in batch.json()["results"][0]["problem"]["errors"]


def test_as_of_on_the_list_is_a_400_not_todays_list(agent_client, reviewer_client):
    for client in (agent_client, reviewer_client):
        assert_problem(client.get(MEMORIES, {"as_of": "2020-01-01T00:00:00Z"}), 400, errors={"as_of"})
