"""State survives a server restart: a real gunicorn process against the test database is
written to, killed, started again, and read back (records, recall, forget request, history)."""

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

from memory.models import MemoryRecord, ReviewerToken
from tests.conftest import memory_body

# Committed rows, so the server process sees them. (No serialized_rollback: its flush leaves the
# content types table empty for the tests after it; the `tenant` fixture re-seeds the memory kinds.)
pytestmark = pytest.mark.django_db(transaction=True)

UNTRUSTED = {"authority": "agent", "provenance": {"source_type": "agent_inference"}}


def _database_url() -> str:
    db = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{db['NAME']}"
    auth = db["USER"] + (f":{db['PASSWORD']}" if db["PASSWORD"] else "")
    return f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Server:
    """gunicorn serving config.wsgi on a free port, as a separate process."""

    def __init__(self, log_path: Path):
        self.log_path = log_path
        self.process: subprocess.Popen | None = None
        self.base = ""

    def start(self) -> None:
        port = _free_port()
        self.base = f"http://127.0.0.1:{port}"
        env = {**os.environ, "DATABASE_URL": _database_url(), "DJANGO_SETTINGS_MODULE": "config.settings",
               "APP_VAR_DIR": str(settings.VAR_DIR)}
        log = self.log_path.open("a")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "config.wsgi", "--bind", f"127.0.0.1:{port}", "--workers", "1",
             "--log-level", "warning"],
            cwd=settings.BASE_DIR, env=env, stdout=log, stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            assert self.process.poll() is None, self.log_path.read_text()[-3000:]
            try:
                urllib.request.urlopen(f"{self.base}/api/v1/memories/", timeout=1)
            except urllib.error.HTTPError:
                return  # a 401 means it is up
            except OSError:
                time.sleep(0.1)
        raise AssertionError("server did not start:\n" + self.log_path.read_text()[-3000:])

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def call(self, method: str, path: str, token: str, body: dict | None = None) -> tuple[int, dict | str]:
        request = urllib.request.Request(
            self.base + path, method=method, data=json.dumps(body).encode() if body is not None else None,
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                status, raw, content_type = response.status, response.read(), response.headers["Content-Type"]
        except urllib.error.HTTPError as error:
            status, raw, content_type = error.code, error.read(), error.headers["Content-Type"]
        return status, (json.loads(raw) if "json" in (content_type or "") else raw.decode())


@pytest.fixture
def server(tmp_path):
    running = Server(tmp_path / "gunicorn.log")
    yield running
    running.stop()


def test_state_is_the_same_after_the_server_restarts(server, credential, reviewer):
    _, reviewer_token = ReviewerToken.issue(user=reviewer)
    agent = credential.raw_token
    server.start()

    status, kept = server.call("POST", "/api/v1/memories/", agent, memory_body(content="Acme prefers phone calls."))
    assert status == 201
    status, fix = server.call("POST", "/api/v1/memories/", agent,
                              memory_body(content="Acme prefers email, not phone.", supersedes=kept["id"], supersedes_version=1))
    assert status == 201
    status, claim = server.call("POST", "/api/v1/memories/", agent, memory_body(content="Acme's phone line is down.", **UNTRUSTED))
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
