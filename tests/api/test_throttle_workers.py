"""The rate limit is per token across every web worker: gunicorn with three workers shares one
budget per token through the shared cache (Redis when REDIS_URL is set, else the file cache every
process on the machine shares). Concurrent requests cannot both spend the last one of a window."""

import re
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from django.core.cache import cache

from memory.api import throttling
from tests.api.conftest import MEMORIES, bearer_client
from tests.processes import GunicornServer

RATE = 5
REQUESTS = 15
ACCESS_LOG = re.compile(r"worker=<(\d+)> path=(\S+) status=(\d+)")


def get(url: str, token: str | None) -> tuple[int, str | None]:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.headers.get("Retry-After")
    except urllib.error.HTTPError as error:
        return error.code, error.headers.get("Retry-After")


def wait_for_every_worker(server: GunicornServer, log: Path, workers: int) -> None:
    """gunicorn answers once one worker has loaded the app, while the others may still be loading
    it (seconds, on a busy machine), and a burst sent then is served by that one alone. Anonymous
    requests (401s, outside any token's budget) until each worker has answered one."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with ThreadPoolExecutor(max_workers=2 * workers) as pool:
            list(pool.map(lambda _: get(server.base + MEMORIES, None), range(2 * workers)))
        if len({worker for worker, _, status in ACCESS_LOG.findall(log.read_text()) if status == "401"}) >= workers:
            return
        time.sleep(0.2)
    raise AssertionError(f"not every worker answered within a minute:\n{log.read_text()[-3000:]}")


@pytest.mark.django_db(transaction=True)  # the server is another process: it must see the tokens
def test_the_rate_limit_is_per_token_across_gunicorn_workers(tmp_path, make_credential, tenant):
    limited, other = make_credential(tenant), make_credential(tenant)
    server = GunicornServer(
        tmp_path / "gunicorn.log",
        workers=3,
        API_THROTTLE_RATE=f"{RATE}/min",
        # An access line per request naming the worker that served it.
        GUNICORN_CMD_ARGS="--access-logfile - --access-logformat 'worker=%(p)s path=%(U)s status=%(s)s'",
    )
    server.start()
    try:
        wait_for_every_worker(server, tmp_path / "gunicorn.log", 3)
        # All at once, so several workers take part and race for the last requests of the window.
        with ThreadPoolExecutor(max_workers=REQUESTS) as pool:
            answers = list(pool.map(lambda _: get(server.base + MEMORIES, limited.raw_token), range(REQUESTS)))
        other_answer = get(server.base + MEMORIES, other.raw_token)
    finally:
        server.stop()

    log = (tmp_path / "gunicorn.log").read_text()
    statuses = sorted(status for status, _ in answers)
    assert statuses == [200] * RATE + [429] * (REQUESTS - RATE), log[-3000:]
    assert all(retry_after and 1 <= int(retry_after) <= 60 for status, retry_after in answers if status == 429)
    assert other_answer[0] == 200  # the budget is the token's, not the server's
    served_by = {worker for worker, path, status in ACCESS_LOG.findall(log) if path == MEMORIES and status in ("200", "429")}
    assert len(served_by) >= 2, f"all requests went to one worker: {served_by}"


@pytest.mark.django_db
def test_a_request_that_cannot_take_its_tokens_lock_in_time_is_limited(credential, monkeypatch):
    monkeypatch.setattr(throttling, "LOCK_WAIT_SECONDS", 0.05)
    lock = f"throttle_credential_AgentCredential:{credential.token_hash}:lock"
    assert cache.add(lock, 1, 30)  # another request of this token holds it
    try:
        response = bearer_client(credential.raw_token).get(MEMORIES)
        assert response.status_code == 429 and response["Retry-After"] == "1"
    finally:
        cache.delete(lock)
    assert bearer_client(credential.raw_token).get(MEMORIES).status_code == 200
