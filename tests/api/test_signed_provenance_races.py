"""Revoking a source key against signed writes in flight: writers keep posting results signed with
the key (single and batch) while a reviewer revokes it, and go on after. A write verified just
before the revocation re-checks its key inside its transaction (memory.admission), so whatever its
timing, no record the key verified is active afterwards, and later writes are refused."""

import threading
import time

import pytest
from django.db import connection

from governed_memory.signing import generate_private_key
from memory.models import MemoryRecord, ReviewerToken, SourceKey, Status
from tests.api.conftest import MEMORIES, bearer_client
from tests.signed_support import crm_claim, register_crm

pytestmark = pytest.mark.django_db(transaction=True)

WRITERS = 4
AFTER_SECONDS = 0.5


def test_no_record_a_revoked_key_verified_stays_active_whenever_it_commits(tenant, credential, reviewer):
    key = generate_private_key()
    register_crm(tenant, key)
    _, raw = ReviewerToken.issue(user=reviewer)
    api_reviewer = bearer_client(raw)
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
                claim = crm_claim(key, content=f"Writer {n} fact {i}.", version=f"w{n}-{i}")
                if i % 3:
                    response = client.post(MEMORIES, claim, format="json")
                    found = [response.status_code]
                else:
                    second = crm_claim(key, content=f"Writer {n} batch fact {i}.", version=f"w{n}-{i}b")
                    response = client.post(f"{MEMORIES}batch/", {"items": [claim, second]}, format="json")
                    found = [result["status"] for result in response.json()["results"]]
                with lock:
                    for status in found:
                        statuses[status] = statuses.get(status, 0) + 1
        finally:
            connection.close()

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(WRITERS)]
    for thread in threads:
        thread.start()
    started.wait()
    deadline = time.monotonic() + 20
    while statuses.get(201, 0) < 2 * WRITERS and time.monotonic() < deadline:  # writes in full flow
        time.sleep(0.05)
    response = api_reviewer.post(
        "/api/v1/revocations/", {"source_key": SourceKey.objects.get().pk, "reason": "race"}, format="json"
    )
    assert response.status_code == 201, response.json()
    revoked_at.append(time.monotonic())
    for thread in threads:
        thread.join()

    verified = MemoryRecord.objects.filter(verified_key__isnull=False)
    assert verified.exists() and statuses.get(201)  # the race ran: writes landed before the revocation
    assert statuses.get(400)  # and writes after it were refused
    assert set(statuses) <= {201, 400}, statuses
    assert not verified.filter(status=Status.ACTIVE).exists()
