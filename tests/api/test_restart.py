"""State survives a server restart: a real gunicorn process against the test database is
written to, killed, started again, and read back (records, recall, forget request, history)."""

import re
import urllib.request

import pytest

from memory.models import MemoryRecord, ReviewerToken
from tests.conftest import memory_body
from tests.processes import GunicornServer

# Committed rows, so the server process sees them. (No serialized_rollback: its flush leaves the
# content types table empty for the tests after it; the `tenant` fixture re-seeds the memory kinds.)
pytestmark = pytest.mark.django_db(transaction=True)

UNTRUSTED = {"authority": "agent", "provenance": {"source_type": "agent_inference"}}


@pytest.fixture
def server(tmp_path):
    running = GunicornServer(tmp_path / "gunicorn.log")
    yield running
    running.stop()


def test_state_is_the_same_after_the_server_restarts(server, credential, reviewer):
    _, reviewer_token = ReviewerToken.issue(user=reviewer)
    agent = credential.raw_token
    server.start()

    status, kept = server.call("POST", "/api/v1/memories/", agent, memory_body(content="Acme prefers phone calls."))
    assert status == 201
    status, fix = server.call(
        "POST",
        "/api/v1/memories/",
        agent,
        memory_body(content="Acme prefers email, not phone.", supersedes=kept["id"], supersedes_version=1),
    )
    assert status == 201
    status, claim = server.call(
        "POST", "/api/v1/memories/", agent, memory_body(content="Acme's phone line is down.", **UNTRUSTED)
    )
    assert status == 201 and claim["status"] == "quarantined"
    status, promoted = server.call("POST", f"/api/v1/memories/{claim['id']}/promote/", reviewer_token, {"expected_version": 1})
    assert (status, promoted["status"]) == (200, "active")
    server.call("POST", "/api/v1/memories/", agent, memory_body(subject="customer/zed", content="Zed's phone is 555-0100."))
    status, forget = server.call("POST", "/api/v1/forget/", agent, {"subject": "customer/zed", "reason": "erasure"})
    assert (status, forget["affected"]) == (202, 1)

    ids = [kept["id"], fix["id"], claim["id"]]
    recall_body = {"purpose": "support", "query": "acme phone email", "limit": 10}

    def observe() -> dict:
        records = {pk: server.call("GET", f"/api/v1/memories/{pk}/", agent)[1] for pk in ids}
        for record in records.values():
            record.pop("last_used_at")  # recall itself touches it
        recalled = server.call("POST", "/api/v1/recall/", agent, recall_body)[1]
        return {
            "records": records,
            "recalled": [item["id"] for item in recalled["items"]],
            "zed": server.call("POST", "/api/v1/recall/", agent, {**recall_body, "subject": "customer/zed"})[1]["items"],
            "forget": server.call("GET", f"/api/v1/forget/{forget['id']}/", agent)[1],
            "listed": server.call("GET", "/api/v1/memories/?ordering=created_at", agent)[1]["count"],
        }

    before = observe()
    assert before["records"][kept["id"]]["status"] == "superseded"
    assert sorted(before["recalled"]) == sorted([fix["id"], claim["id"]])
    assert before["zed"] == []
    history_rows = MemoryRecord.history.count()

    server.stop()
    server.start()  # a new process, on a new port, against the same database

    assert observe() == before
    assert MemoryRecord.history.count() == history_rows  # reading back changed nothing

    # The restarted server serves its interactive docs from its own static files (no internet).
    status, page = server.call("GET", "/api/docs/", agent)
    assert status == 200
    bundle = re.search(r'src="([^"]*swagger-ui-bundle\.js)"', page).group(1)
    assert bundle.startswith("/static/")
    with urllib.request.urlopen(server.base + bundle, timeout=10) as asset:
        assert asset.status == 200 and len(asset.read()) > 100_000
