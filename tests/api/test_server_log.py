"""Nothing of a memory reaches PostgreSQL's server log: concurrent duplicate writes settle their
idempotency key behind a lock (memory.fences), not by a unique violation (whose log line names
the key), and a forget runs no failing statement. The test reads the server's own log file."""

import glob
import threading
import uuid
from pathlib import Path

import pytest
from django.db import connection

from tests.api.conftest import FORGET, MEMORIES, bearer_client
from tests.conftest import memory_body

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.postgresql(reason="PostgreSQL's server log (SQLite has none)"),
]


def _server_log() -> Path:
    """The running server's log: pg_current_logfile() with the logging collector, else Debian's
    per-cluster file (pg_ctlcluster sends the server's stderr there)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_current_logfile(), current_setting('data_directory'), current_setting('server_version_num')")
        current, data_directory, version = cursor.fetchone()
    if current:
        return Path(current) if Path(current).is_absolute() else Path(data_directory) / current
    found = glob.glob(f"/var/log/postgresql/postgresql-{int(version) // 10000}-*.log")
    assert found, "the server's log file was not found"
    return Path(max(found, key=lambda path: Path(path).stat().st_mtime))


def test_50_concurrent_duplicate_writes_and_a_forget_leave_no_key_or_content_in_the_server_log(credential):
    log = _server_log()
    start = log.stat().st_size
    key = f"KEYX-{uuid.uuid4().hex}"
    secret = f"canary-{uuid.uuid4().hex}"
    body = memory_body(subject=f"customer/{secret}", content=f"Prefers {secret} over phone.")
    barrier = threading.Barrier(50)
    statuses: list[int] = []
    ids: set[str] = set()

    def write() -> None:
        client = bearer_client(credential.raw_token)
        try:
            barrier.wait()
            response = client.post(MEMORIES, body, format="json", headers={"Idempotency-Key": key})
            statuses.append(response.status_code)
            ids.add(response.json()["id"])
        finally:
            connection.close()

    threads = [threading.Thread(target=write) for _ in range(50)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert statuses == [201] * 50 and len(ids) == 1  # one record, every duplicate answered with it
    response = bearer_client(credential.raw_token).post(FORGET, {"subject": body["subject"]}, format="json")
    assert response.status_code in (200, 202), response.json()
    with connection.cursor() as cursor:  # the server writes its log as it goes; a checkpoint line marks "now"
        cursor.execute("SELECT pg_sleep(0.2)")
    with log.open("rb") as handle:
        handle.seek(start)
        written = handle.read()
    assert key.encode() not in written
    assert secret.encode() not in written
