"""Structured logs: one JSON line per request and per job run, with ids, counts and durations, and
never the content of a memory (a planted canary appears in no log line, whatever happens to it)."""

import io
import json
import logging

import pytest
from django.conf import settings
from django.core.management import call_command
from django.utils.module_loading import import_string

from tests.api.conftest import FORGET, MEMORIES, RECALL, UNTRUSTED

pytestmark = pytest.mark.django_db

CANARY = "canary-7f3e-do-not-log-this-sentence"


@pytest.fixture
def json_log():
    """Every log record of every logger, through the handler the LOGGING setting configures (its
    JSON formatter and filters), captured instead of going to stderr."""
    root = logging.getLogger()
    handler = next(
        h for h in root.handlers if isinstance(h.formatter, import_string(settings.LOGGING["formatters"]["json"]["()"]))
    )
    stream = io.StringIO()
    old_stream, old_level = handler.setStream(stream), root.level
    root.setLevel(logging.DEBUG)
    try:
        yield stream
    finally:
        handler.setStream(old_stream)
        root.setLevel(old_level)


def test_canary_content_never_reaches_a_log_line(json_log, agent_client, reviewer_client, credential):
    content = f"Prefers email. {CANARY}"
    write = agent_client.post(
        MEMORIES,
        {
            "kind": "preference",
            "subject": "customer/canary",
            "purpose": "support",
            "content": content,
            "authority": "agent",
            "confidence": 0.7,
            "provenance": UNTRUSTED["provenance"],
        },
        format="json",
    )
    assert write.status_code == 201
    record = write.json()
    # a refused write that carries the canary, and an oversized one
    assert agent_client.post(MEMORIES, {"content": content, "kind": "nope"}, format="json").status_code == 400
    assert agent_client.post(MEMORIES, {"content": CANARY * 500, "kind": "preference"}, format="json").status_code == 400
    # a stale decision, then the real one, then recall, read and list
    url = f"{MEMORIES}{record['id']}/promote/"
    assert reviewer_client.post(url, {"expected_version": 9}, format="json").status_code == 409
    assert reviewer_client.post(url, {"expected_version": 1, "note": "checked"}, format="json").status_code == 200
    recalled = agent_client.post(RECALL, {"query": "email canary", "purpose": "support"}, format="json")
    assert CANARY in json.dumps(recalled.json())  # the agent does get it back...
    assert agent_client.get(f"{MEMORIES}{record['id']}/").status_code == 200
    assert agent_client.get(MEMORIES, {"subject": "customer/canary"}).status_code == 200
    # ...and then forgets it; propagation and expiry run as jobs
    assert agent_client.post(FORGET, {"subject": "customer/canary", "reason": "test"}, format="json").status_code == 202
    for job in ("propagate_forgets", "expire"):
        call_command("run_job", job, stdout=io.StringIO())

    output = json_log.getvalue()
    assert CANARY not in output  # ...but no log line ever carries it
    assert "Prefers email" not in output
    lines = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
    requests = [line for line in lines if line.get("event") == "request"]
    assert len(requests) >= 9
    assert all({"request_id", "method", "path", "status", "duration_ms", "actor"} <= set(line) for line in requests)
    assert {line["status"] for line in requests} >= {201, 400, 409, 200, 202}
    assert any(line["actor"].startswith("agent:") for line in requests)
    jobs = [line for line in lines if line.get("message") == "job run finished"]
    assert {line.get("job") for line in jobs} >= {"propagate_forgets", "expire"}


def test_an_exception_message_is_not_logged_only_its_type_and_place(json_log):
    try:
        raise ValueError(f"new row violates check constraint: Failing row contains ({CANARY})")
    except ValueError:
        logging.getLogger("django.request").exception("Internal Server Error: /review/")
    line = json.loads(json_log.getvalue().strip().splitlines()[-1])
    assert CANARY not in json_log.getvalue()
    assert line["exception_type"] == "ValueError" and "test_logs.py" in line["code_locations"]
