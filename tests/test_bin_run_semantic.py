"""`bin/run` with the `semantic` extra installed (as in this venv): the demo builds its semantic
index through the gates before it starts, its web and worker processes load the model at start
(gunicorn's master and Celery's main process load it, their children run it), recall is hybrid
from the first request, /health/ and the index list say so, and Ctrl-C still stops everything
cleanly."""

import json
import time
import urllib.request

import pytest

from tests.demo_run import DemoRun
from tests.test_bin_run import NOISE, call


@pytest.mark.worker
def test_the_demo_serves_hybrid_recall_from_its_first_request_with_the_model_loaded_at_start(tmp_path):
    demo = DemoRun(tmp_path)
    try:
        demo.start()
        output = demo.output()
        assert "Building the semantic index" in output and "Recall is hybrid" in output, output[-6000:]
        # Each web worker says so once it has run the model, which may be a moment after the
        # server answers its first request on a loaded machine.
        deadline = time.monotonic() + 120
        while demo.output().count("semantic model ready") < 2 and time.monotonic() < deadline:
            time.sleep(0.5)
        output = demo.output()
        assert "web    | " in output and output.count("semantic model ready") == 2, output[-6000:]  # each web worker
        assert "semantic model loaded for the processes forked from this one" in output

        status, found, _ = call(
            demo,
            "POST",
            "/recall/",
            demo.exports["TOKEN"],
            {"query": "how does acme want to be contacted", "purpose": "support", "subject": "customer/acme", "min_relevance": 0},
        )
        assert status == 200 and found["items"] and "semantic" in found["items"][0]["score_parts"], found

        with urllib.request.urlopen(f"{demo.base}/health/", timeout=10) as response:
            serving = json.load(response)["recall"]
        assert serving["serving"] == "hybrid" and serving["model_loaded"] is True and serving["reason"] is None
        status, indexes, _ = call(demo, "GET", "/indexes/", demo.exports["REVIEWER"])
        semantic = [entry for entry in indexes if entry["kind"] == "semantic"]
        assert status == 200 and len(semantic) == 1 and semantic[0]["serving"] and semantic[0]["model_loaded"]
        assert semantic[0]["promotion"]["passed"] is True  # through the gates, with the demo's golden questions
        status = demo.interrupt()
    finally:
        demo.kill()
    output = demo.output()
    assert status == 0, output[-6000:]
    found_noise = [noise for noise in NOISE if noise in output]
    assert not found_noise, f"{found_noise} in:\n{output[-8000:]}"
