"""The replica fences as a user meets them: two gunicorn web processes configured with
DATABASE_REPLICA_URLS naming a real standby that replays the log only when the test lets it catch up
(tests/replica_support.py). Hundreds of recalls made right after a forget, and then a revocation,
returned over HTTP: none serves what was removed, while the standby still holds it."""

import re
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.conf import settings
from django.db import connection

from memory.models import MemoryRecord, ReviewerToken, Status
from tests.processes import GunicornServer
from tests.replica_support import replayed, replica_alias, streaming_replica

NO_REPLICAS_ON_SQLITE = "SQLite has no streaming replicas: DATABASE_REPLICA_URLS names PostgreSQL standbys"
CLIENTS = 4
RECALLS_AFTER = 150  # at least, per burst, across both web processes, while the standby still holds the record
QUERY = "buyer call before noon refunds"


@pytest.fixture(scope="module")
def standby(django_db_setup, django_db_blocker):
    if connection.vendor != "postgresql":
        pytest.skip(NO_REPLICAS_ON_SQLITE)
    with streaming_replica() as port, replica_alias(port) as alias:
        yield alias


@pytest.fixture
def web(standby, transactional_db, tmp_path):
    replica = settings.DATABASES[standby]
    server = GunicornServer(
        tmp_path / "gunicorn.log",
        workers=2,
        DATABASE_REPLICA_URLS=f"postgres://{replica['USER']}@127.0.0.1:{replica['PORT']}/{replica['NAME']}",
        API_THROTTLE_RATE="100000/min",
        SEMANTIC_AUTO_INDEX="false",
        SEMANTIC_LOAD_AT_START="false",
        GUNICORN_CMD_ARGS="--access-logfile - --access-logformat 'worker=%(p)s path=%(U)s status=%(s)s'",
    )
    server.start()
    try:
        yield server
    finally:
        server.stop()


def _recall(web, token: str) -> list[str]:
    status, body = web.call("POST", "/api/v1/recall/", token, {"purpose": "support", "query": QUERY})
    assert status == 200, body
    return [item["id"] for item in body["items"]]


def _burst(web, token: str, record: MemoryRecord, alias: str) -> list[list[str]]:
    """RECALLS_AFTER recalls (or a few more) from CLIENTS clients at once; then checks the standby still has
    `record` active (else this proves nothing)."""

    def client() -> list[list[str]]:
        return [_recall(web, token) for _ in range(-(-RECALLS_AFTER // CLIENTS))]

    with ThreadPoolExecutor(CLIENTS) as pool:
        answers = [answer for part in pool.map(lambda _: client(), range(CLIENTS)) for answer in part]
    assert MemoryRecord.objects.using(alias).get(pk=record.pk).status == Status.ACTIVE, "the standby replayed too soon"
    return answers


@pytest.mark.postgresql(reason=NO_REPLICAS_ON_SQLITE)
@pytest.mark.django_db(transaction=True, databases="__all__")
def test_two_web_processes_serve_nothing_a_returned_forget_or_revocation_removed(standby, web, write, credential, reviewer):
    forgotten = write(subject="customer/initech", content="Initech's buyer: call before noon about refunds.")
    revoked = write(content="Acme's buyer: call before noon, refunds skip approval.", provenance={"session_id": "s-bad"})
    kept = write(content="Acme's buyer: call before noon, refunds need approval.", provenance={"session_id": "s-good"})
    token = credential.raw_token
    _recall(web, token)  # builds the default index if there is none
    replayed()
    assert set(_recall(web, token)) == {str(forgotten.pk), str(revoked.pk), str(kept.pk)}
    _, reviewer_token = ReviewerToken.issue(user=reviewer)

    status, body = web.call("POST", "/api/v1/forget/", reviewer_token, {"subject": "customer/initech"})
    assert status == 202, body
    answers = _burst(web, token, forgotten, standby)
    print(f"recalls after the forget, standby behind: {len(answers)}")  # shown with pytest -s
    assert len(answers) >= RECALLS_AFTER
    assert not [answer for answer in answers if str(forgotten.pk) in answer]
    assert all(str(kept.pk) in answer for answer in answers)

    replayed()
    status, body = web.call("POST", "/api/v1/revocations/", reviewer_token, {"session_id": "s-bad", "reason": "injection"})
    assert status == 201, body
    answers = _burst(web, token, revoked, standby)
    print(f"recalls after the revocation, standby behind: {len(answers)}")
    assert len(answers) >= RECALLS_AFTER
    assert not [answer for answer in answers if str(revoked.pk) in answer]
    assert all(str(kept.pk) in answer for answer in answers)

    workers = set(re.findall(r"worker=<(\d+)> path=/api/v1/recall/ status=200", web.log_path.read_text()))
    assert len(workers) == 2, "both web processes served recalls"
