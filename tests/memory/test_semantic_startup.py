"""Semantic recall by default where it can serve: with the `semantic` extra installed, an install
that never had a semantic index gets one through the usual build -> gates -> promote path
(`ensure_semantic_index`, queued by the worker at start), every serving process loads the model at
start without running it before a fork, and /health/ and the index list say what serves and why."""

import functools
import os
import subprocess
import sys
import textwrap

import pytest
from django.test import override_settings
from rest_framework.test import APIClient

from memory.models import ReviewerToken
from memory.search import IndexKind, IndexStatus, SearchIndex, ann, gates, register_promotion_gate, semantic
from memory.search.build import AUTO_SEMANTIC_NAME, ensure_semantic_index, retire_index
from memory.tasks import build_search_index, request_semantic_index
from tests.processes import ROOT, CeleryStack, database_url_for_subprocesses, wait_for

pytestmark = pytest.mark.django_db

MISSING = "The semantic extra is not installed (torch missing): install the extra."


@pytest.fixture(autouse=True)
def no_gates(monkeypatch):
    monkeypatch.setattr(gates, "_GATES", {})


def queued_builds(callbacks) -> list:
    return [
        callback.args[0]
        for callback in callbacks
        if isinstance(callback, functools.partial) and callback.func == build_search_index.delay
    ]


def health() -> dict:
    return APIClient().get("/health/").json()["recall"]


def listed(reviewer) -> dict[str, dict]:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {ReviewerToken.issue(user=reviewer)[1]}")
    return {entry["name"]: entry for entry in client.get("/api/v1/indexes/").json()}


def test_an_install_that_never_had_a_semantic_index_gets_one_once(write, credential):
    write(content="Prefers email over phone.")
    index = ensure_semantic_index(actor="test")
    assert index is not None and (index.name, index.kind, index.status) == (AUTO_SEMANTIC_NAME, "semantic", "building")
    assert ensure_semantic_index(actor="test") is None  # one is on its way
    built = build_search_index(index.pk)  # what the queued task runs: build, gates, promotion
    assert built["status"] == IndexStatus.ACTIVE and built["inputs"]["records"] == 1
    assert ensure_semantic_index(actor="test") is None


def test_a_retired_semantic_index_stays_retired(write, django_capture_on_commit_callbacks):
    write(content="Prefers email over phone.")
    index = ensure_semantic_index()
    build_search_index(index.pk)
    with django_capture_on_commit_callbacks(execute=True):
        retire_index(index.name, actor="operator")
    assert ensure_semantic_index() is None  # switched off by an operator: their decision
    assert "retired" in semantic.serving_report()["reason"]


def test_nothing_is_requested_without_the_extra_or_with_the_setting_off(monkeypatch):
    with override_settings(SEMANTIC_AUTO_INDEX=False):
        assert ensure_semantic_index() is None
    monkeypatch.setattr(semantic, "extra_missing", lambda: MISSING)
    assert ensure_semantic_index() is None
    assert not SearchIndex.objects.filter(kind=IndexKind.SEMANTIC).exists()


def test_the_worker_queues_the_build_after_the_request_commits(write, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks() as callbacks:
        pk = request_semantic_index(actor="worker:start")
    assert pk is not None and queued_builds(callbacks) == [pk]
    with django_capture_on_commit_callbacks() as callbacks:
        assert request_semantic_index() is None  # already requested
    assert queued_builds(callbacks) == []


def test_a_candidate_held_back_by_its_gates_does_not_serve_and_the_reason_says_so(write, reviewer):
    write(content="Prefers email over phone.")
    register_promotion_gate(lambda candidate, active: (False, {"hit_at_k": 0.1}), name="golden")
    index = ensure_semantic_index()
    assert build_search_index(index.pk)["status"] == IndexStatus.CANDIDATE
    report = semantic.serving_report()
    assert report["serving"] == "lexical" and "did not pass its promotion gates" in report["reason"]
    entry = listed(reviewer)[index.name]
    assert entry["serving"] is False and entry["available"] is True


def test_health_and_the_index_list_say_what_serves(write, reviewer, monkeypatch):
    write(content="Prefers email over phone.")
    before = health()
    assert before["serving"] == "lexical" and before["semantic_index"] is None
    assert "No semantic index has been built yet" in before["reason"]

    index = ensure_semantic_index()
    assert "is being built" in health()["reason"]
    build_search_index(index.pk)
    semantic.warm_up()
    after = health()
    assert after == {
        "serving": "hybrid",
        "lexical_index": after["lexical_index"],
        "semantic_index": index.name,
        "model_loaded": True,
        "reason": None,
    }
    entries = listed(reviewer)
    assert entries[index.name]["serving"] is True and entries[index.name]["model_loaded"] is True
    assert entries[after["lexical_index"]]["serving"] is True and entries[after["lexical_index"]]["model_loaded"] is None

    monkeypatch.setattr(semantic, "extra_missing", lambda: MISSING)
    without = health()
    assert (without["serving"], without["semantic_index"], without["reason"]) == ("lexical", index.name, MISSING)
    assert listed(reviewer)[index.name]["serving"] is False


# What a parent process does before it forks the ones that serve (gunicorn's master, Celery's main
# process): load the model, never run it; the children then run it, and must not hang.
FORK = """
import os, sys, time
import django
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
django.setup()
from memory.search import semantic
assert semantic.load_model() and not semantic._model.ran
children = []
for _ in range(2):
    pid = os.fork()
    if pid == 0:
        ok = semantic.warm_up() and semantic.embed(["how does acme want to be contacted"]).shape == (1, semantic.DIMS)
        os._exit(0 if ok else 1)
    children.append(pid)
deadline = time.monotonic() + 120
for pid in children:
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            assert os.waitstatus_to_exitcode(status) == 0, status
            break
        if time.monotonic() > deadline:
            print("child hung", flush=True)
            sys.exit(3)
        time.sleep(0.1)
print("children ran the inherited model", flush=True)
"""


def test_a_model_loaded_before_a_fork_runs_in_each_child(tmp_path):
    env = {**os.environ, "APP_VAR_DIR": str(tmp_path), "DATABASE_URL": database_url_for_subprocesses()}
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(FORK)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0 and "children ran the inherited model" in done.stdout, done.stdout + done.stderr[-3000:]


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_worker_started_with_the_extra_builds_the_semantic_index_through_the_gates(write, tmp_path):
    write(content="Prefers email over phone.")
    stack = CeleryStack(tmp_path)
    try:
        stack.start_worker(SEMANTIC_AUTO_INDEX="true", SEMANTIC_LOAD_AT_START="true")
        with stack.explained():
            wait_for(
                lambda: SearchIndex.objects.filter(kind=IndexKind.SEMANTIC, status=IndexStatus.ACTIVE).exists(),
                timeout=300,
                interval=0.5,
                what="the worker to build and promote the semantic index",
            )
            index = SearchIndex.objects.get(kind=IndexKind.SEMANTIC)
            assert index.name == AUTO_SEMANTIC_NAME and index.inputs["records"] == 1
            assert "promotion" in index.report  # it went through the gates
            assert "semantic model loaded for the processes forked from this one" in stack.logs(tail=None)
    finally:
        stack.stop_all()
        from memory.search import storage

        storage.drop_storage_except(())  # the flush after this test leaves the index's own tables


def test_the_model_and_the_vector_scans_run_on_the_configured_threads_in_the_process_that_runs_it(monkeypatch, settings):
    import threading
    import uuid
    from datetime import UTC, datetime

    import numpy as np
    from threadpoolctl import threadpool_info, threadpool_limits

    def blas_threads() -> set[int]:
        return {pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"}

    faiss = ann.faiss_module()
    before = faiss.omp_get_max_threads()
    # as in a freshly forked worker that has not loaded the model
    monkeypatch.setattr(semantic._model, "ran", False)
    monkeypatch.setattr(semantic._model, "encoder", None)
    settings.SEMANTIC_MODEL_THREADS = 2
    assert semantic.embed(["how does acme want to be contacted"]).shape == (1, semantic.DIMS)
    assert semantic._model.encoder.session.get_session_options().intra_op_num_threads == 2
    monkeypatch.setattr(semantic._model, "ran", False)
    faiss.omp_set_num_threads(2)
    with threadpool_limits(limits=2, user_api="blas"):
        assert blas_threads() == {2}
        settings.SEMANTIC_MODEL_THREADS = 1
        try:
            semantic.embed(["how does acme want to be contacted"])
            assert blas_threads() == {1}  # numpy's BLAS, which scores a table's vectors
            assert semantic._model.ran
            # faiss's OpenMP setting is each thread's own: a search in another thread (a web
            # worker's request thread) runs on the configured threads too (on two threads one query
            # took 40 ms, on one 6 ms)
            vectors = np.eye(4, semantic.DIMS, dtype=np.float32)
            index = faiss.IndexHNSWFlat(semantic.DIMS, 8, faiss.METRIC_INNER_PRODUCT)
            index.add(vectors)
            partition = ann.Partition(
                index=index,
                ids=b"".join(uuid.uuid4().bytes for _ in range(4)),
                snapshot=datetime.now(UTC),
                count=4,
                ef_search=16,
                stamp=(0, 0),
                scan_up_to=10,
            )
            seen = {}

            def request() -> None:
                faiss.omp_set_num_threads(2)  # what a new thread may start with
                seen["found"] = partition.search(vectors[1], 2)
                seen["threads"] = faiss.omp_get_max_threads()

            thread = threading.Thread(target=request)
            thread.start()
            thread.join()
            assert seen["threads"] == 1 and len(seen["found"]) == 2 and seen["found"][0][1] > 0.99
        finally:
            faiss.omp_set_num_threads(before)
