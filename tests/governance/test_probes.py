"""Liveness and readiness per role (`governance.ops.probes`): the web process over HTTP, a real
Celery worker and beat through their heartbeat files and `manage.py probe`, as systemd or an
orchestrator would run it on their host."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.processes import ROOT, wait_for


def test_live_checks_nothing_and_ready_checks_the_database(client, db):
    with CaptureQueriesContext(connection) as queries:
        live = client.get("/health/live/")
    assert live.status_code == 200 and live.json() == {"status": "ok", "role": "web", "probe": "live", "checks": {}}
    assert len(queries) == 0  # a database outage never fails liveness, so it never restarts every web process
    ready = client.get("/health/ready/")
    body = ready.json()
    assert ready.status_code == 200 and body["status"] == "ok" and body["probe"] == "ready"
    assert body["checks"]["database"]["ok"] is True and body["checks"]["recall"]["ok"] is True
    assert "broker" not in body["checks"]  # recall and reads work without the broker
    assert "replicas" not in body["checks"]  # none configured
    assert client.post("/health/ready/").status_code == 405


def probe(stack, *args: str) -> tuple[int, dict]:
    """`manage.py probe ...` on the stack's host (its APP_VAR_DIR, broker and database)."""
    done = subprocess.run(
        [sys.executable, "manage.py", "probe", *args], cwd=ROOT, env=stack.env, capture_output=True, text=True, timeout=120
    )
    return done.returncode, json.loads(done.stdout.strip().splitlines()[-1]) if done.stdout.strip() else {}


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_worker_is_alive_while_its_heartbeat_is_fresh_and_not_once_it_hangs_or_stops(celery_stack):
    celery_stack.env["PROBE_HEARTBEAT_SECONDS"] = "0.5"
    node = f"{celery_stack.queue}-0@{os.uname().nodename}"
    assert probe(celery_stack, "worker", "--node", node, "--live")[0] == 1  # not started: no heartbeat file
    worker = celery_stack.start_worker()
    with celery_stack.explained():
        wait_for(
            lambda: probe(celery_stack, "worker", "--node", node)[0] == 0, timeout=90, interval=0.5, what="the worker's probe"
        )
        status, body = probe(celery_stack, "worker", "--node", node)
        assert body["status"] == "ok" and set(body["checks"]) == {"heartbeat", "database", "broker"}
        assert body["checks"]["heartbeat"]["age_seconds"] <= body["checks"]["heartbeat"]["stale_after_seconds"]
        assert probe(celery_stack, "worker", "--node", "someone-else@nowhere")[0] == 1

        os.kill(worker.pid, signal.SIGSTOP)  # hung: the process exists, its timer no longer runs
        try:
            time.sleep(4.5)  # past 3 missed touches (stale after 3 x 0.5 + 2 s)
            status, body = probe(celery_stack, "worker", "--node", node, "--live")
            assert status == 1 and body["checks"]["heartbeat"]["ok"] is False, body
        finally:
            os.kill(worker.pid, signal.SIGCONT)
        wait_for(lambda: probe(celery_stack, "worker", "--node", node, "--live")[0] == 0, timeout=30, what="the resumed worker")

        worker.send_signal(signal.SIGTERM)  # a clean stop removes its file at once
        worker.wait(timeout=60)
        status, body = probe(celery_stack, "worker", "--node", node, "--live")
        assert status == 1 and body["checks"]["heartbeat"]["error"] == "no heartbeat file"


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_beat_is_alive_while_it_ticks(celery_stack):
    celery_stack.env["PROBE_HEARTBEAT_SECONDS"] = "0.5"
    assert probe(celery_stack, "beat")[0] == 1
    beat = celery_stack.start_beat()
    with celery_stack.explained():
        wait_for(lambda: probe(celery_stack, "beat")[0] == 0, timeout=90, interval=0.5, what="beat's probe")
        celery_stack.kill(beat)
        time.sleep(4.5)
        status, body = probe(celery_stack, "beat", "--live")
        assert status == 1 and body["checks"]["heartbeat"]["ok"] is False


def test_probe_refuses_what_it_cannot_answer():
    done = subprocess.run([sys.executable, "manage.py", "probe", "web", "--node", "x"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode != 0 and "--node names a worker" in done.stderr
    done = subprocess.run([sys.executable, "manage.py", "probe", "cron"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 2 and "invalid choice" in done.stderr
