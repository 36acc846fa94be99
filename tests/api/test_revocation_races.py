"""Revocation against writes in flight (memory.admission, memory.fences): six clients keep writing
while a reviewer revokes their token, their agent or their session, and go on for half a second
after the revocation returned. Whatever each write's timing, none of the records written with the
revoked source is active afterwards.

Every web process holds a credential it read for up to a second (memory.credentials), so a write
can pass authentication after the revocation committed. The writers here authenticate from such a
stale cache entry, read before the revocation, for the whole run: the worst any process can do."""

import threading
import time

import pytest
from django.db import connection

from memory import credentials as credential_cache
from memory.api import authentication
from memory.models import MemoryRecord, ReviewerToken, SourceHold, Status
from tests.api.conftest import MEMORIES, bearer_client
from tests.conftest import memory_body

pytestmark = pytest.mark.django_db(transaction=True)

REVOCATIONS = "/api/v1/revocations/"
WRITERS = 6
AFTER_SECONDS = 0.5  # writers go on this long after the revocation returned
SESSION = "s-race"


def _stale_authentication(monkeypatch, credentials) -> None:
    """Authenticate these tokens from entries read now, as a process whose cache still holds them."""
    held = {credential.raw_token: credential_cache.usable_credential(credential.raw_token) for credential in credentials}
    real = authentication.usable_credential
    monkeypatch.setattr(authentication, "usable_credential", lambda raw: held.get(raw) or real(raw))


def _race(credential, revoke) -> dict[int, int]:
    """WRITERS threads write (single and batch) with `credential` until AFTER_SECONDS after `revoke()`
    returned; returns the count of each response status."""
    started, revoked_at = threading.Barrier(WRITERS + 1), []
    statuses: dict[int, int] = {}
    lock = threading.Lock()

    def writer(n: int) -> None:
        client = bearer_client(credential.raw_token)
        try:
            started.wait()
            i = 0
            while not revoked_at or time.monotonic() - revoked_at[0] < AFTER_SECONDS:
                i += 1
                body = memory_body(content=f"Writer {n} fact {i}.", provenance={"session_id": SESSION})
                if i % 3:
                    response = client.post(MEMORIES, body, format="json", headers={"Idempotency-Key": f"w{n}-{i}"})
                else:
                    response = client.post(
                        f"{MEMORIES}batch/",
                        {"items": [body, memory_body(content=f"Writer {n} batch fact {i}.", provenance={"session_id": SESSION})]},
                        format="json",
                    )
                with lock:
                    statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
        finally:
            connection.close()

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(WRITERS)]
    for thread in threads:
        thread.start()
    started.wait()
    time.sleep(0.3)  # writes in full flow
    revoke()
    revoked_at.append(time.monotonic())
    for thread in threads:
        thread.join()
    return statuses


@pytest.fixture
def api_reviewer(reviewer):
    _, raw = ReviewerToken.issue(user=reviewer)
    return bearer_client(raw)


def _revoke(api_reviewer, **source):
    def revoke() -> None:
        response = api_reviewer.post(REVOCATIONS, {**source, "reason": "race"}, format="json")
        assert response.status_code == 201, response.json()

    return revoke


@pytest.mark.parametrize("attempt", range(5))
def test_no_write_with_a_revoked_token_stays_active_whenever_it_commits(attempt, credential, api_reviewer, monkeypatch):
    _stale_authentication(monkeypatch, [credential])
    statuses = _race(credential, _revoke(api_reviewer, credential=credential.pk))
    written = MemoryRecord.objects.filter(written_by=credential)
    assert written.exists() and statuses.get(201)  # the race really ran: writes landed before the revocation
    assert statuses.get(401)  # and writes after it were refused, though their token passed the stale cache
    assert not written.filter(status=Status.ACTIVE).exists()
    assert set(statuses) <= {200, 201, 401}, statuses


def test_no_write_of_a_revoked_agent_stays_active(tenant, credential, make_credential, api_reviewer, monkeypatch):
    second = make_credential(tenant)  # another token of the same agent
    _stale_authentication(monkeypatch, [credential, second])
    statuses = _race(second, _revoke(api_reviewer, agent=credential.agent.slug))
    assert statuses.get(201) and statuses.get(401)
    assert not MemoryRecord.objects.filter(agent=credential.agent, status=Status.ACTIVE).exists()


def test_no_write_in_a_revoked_session_stays_active_and_later_ones_are_held(credential, api_reviewer, monkeypatch):
    _stale_authentication(monkeypatch, [credential])
    statuses = _race(credential, _revoke(api_reviewer, session_id=SESSION))
    session = MemoryRecord.objects.filter(session_id=SESSION)
    assert statuses.get(401) is None and session.count() > 20  # the token stays good: every write is stored
    assert not session.filter(status=Status.ACTIVE).exists()
    later = session.filter(quarantine_reason__startswith="Its session was revoked")
    assert later.exists()  # written after the revocation: held by the session's hold
    assert SourceHold.objects.filter(cause=SourceHold.Cause.REVOKED, cleared_at__isnull=True).count() == 1
