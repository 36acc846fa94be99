"""GET /metrics: Prometheus text with lifecycle counters, recall histograms and queue gauges; no
content or subjects; counts summed across gunicorn workers (multi-process mode)."""

import re
from concurrent.futures import ThreadPoolExecutor

import pytest
from prometheus_client import REGISTRY

from memory.errors import StaleVersion
from memory.services import memory_promote
from tests.conftest import memory_body
from tests.processes import GunicornServer

CANARY = "canary-metrics-5c1d"
UNTRUSTED = {"authority": "agent", "provenance": {"source_type": "agent_inference"}}


def _sample(name: str, **labels) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def _metric(text: str, name: str, **labels) -> float:
    label_text = ",".join(f'{key}="{value}"' for key, value in labels.items())
    pattern = re.escape(name) + (r"\{" + re.escape(label_text) + r"\}" if labels else "") + r" ([0-9.e+-]+)"
    match = re.search(pattern, text)
    assert match, f"{name} {labels} missing"
    return float(match.group(1))


@pytest.mark.django_db
def test_lifecycle_events_are_counted_once_committed(client, write, reviewer_actor, django_capture_on_commit_callbacks):
    quarantined_before = _sample("governed_memory_writes_total", status="quarantined")
    promotions_before = _sample("governed_memory_transitions_total", transition="promote")
    conflicts_before = _sample("governed_memory_conflicts_total", reason="stale_version")
    with django_capture_on_commit_callbacks(execute=True):
        record = write(**UNTRUSTED)
        write(**UNTRUSTED)
        with pytest.raises(StaleVersion):
            memory_promote(record_id=record.pk, expected_version=5, actor=reviewer_actor)
        memory_promote(record_id=record.pk, expected_version=1, actor=reviewer_actor)

    response = client.get("/metrics")
    assert response.status_code == 200
    text = response.content.decode()
    assert _metric(text, "governed_memory_writes_total", status="quarantined") == quarantined_before + 2
    assert _metric(text, "governed_memory_transitions_total", transition="promote") == promotions_before + 1
    assert _metric(text, "governed_memory_conflicts_total", reason="stale_version") == conflicts_before + 1
    assert _metric(text, "governed_memory_queue_size", queue="quarantine") == 1
    assert _metric(text, "governed_memory_queue_oldest_age_seconds", queue="quarantine") >= 0
    assert "governed_memory_recall_seconds_bucket" in text


@pytest.mark.django_db
def test_no_content_or_subject_reaches_metrics(client, write):
    write(content=f"Prefers email {CANARY}", subject=f"customer/{CANARY}", **UNTRUSTED)
    text = client.get("/metrics").content.decode()
    assert CANARY not in text


@pytest.mark.django_db(transaction=True)
def test_counts_are_summed_across_gunicorn_workers(tmp_path, credential):
    multiproc = tmp_path / "prometheus"
    multiproc.mkdir()
    server = GunicornServer(tmp_path / "gunicorn.log", workers=3, PROMETHEUS_MULTIPROC_DIR=str(multiproc))
    server.start()
    try:
        with ThreadPoolExecutor(6) as pool:
            statuses = list(
                pool.map(
                    lambda n: server.call("POST", "/api/v1/memories/", credential.raw_token, memory_body(subject=f"s/{n}"))[0],
                    range(12),
                )
            )
        assert statuses == [201] * 12
        pids = {path.name for path in multiproc.iterdir()}
        assert len(pids) >= 2, f"expected several worker files, got {pids}"  # the work really was spread
        status, text = server.call("GET", "/metrics")
        assert status == 200
        assert _metric(text, "governed_memory_writes_total", status="active") == 12
    finally:
        server.stop()
