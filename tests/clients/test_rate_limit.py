"""A 429 honoured: against a live server with a tiny rate limit (3 requests a second per token), the
client waits what `Retry-After` says and sends the same write again (same idempotency key), so a
burst of writes lands exactly once each; past the policy's patience it raises RateLimited."""

import pytest

from governed_memory import NO_RETRY, Client, RateLimited, RetryPolicy
from memory.models import MemoryRecord
from tests.clients.conftest import RecordingTransport, user_fact
from tests.processes import GunicornServer

pytestmark = pytest.mark.django_db(transaction=True)
WRITES = 7


@pytest.fixture(scope="module")
def limited_server(django_db_setup, tmp_path_factory):
    server = GunicornServer(tmp_path_factory.mktemp("gunicorn") / "gunicorn.log", API_THROTTLE_RATE="3/s")
    server.start()
    yield server
    server.stop()


def test_a_burst_of_writes_waits_out_each_429_and_lands_once_each(limited_server, token):
    transport = RecordingTransport()
    with Client(limited_server.base, token, transport=transport) as client:
        memories = [client.remember(**user_fact(n, content=f"Acme fact number {n}.")) for n in range(WRITES)]

    assert len({m.id for m in memories}) == WRITES
    assert MemoryRecord.objects.count() == WRITES  # no write was stored twice
    sent = transport.exchanges
    limited = [i for i, exchange in enumerate(sent) if exchange.status == 429]
    assert limited, "the burst never met the rate limit"
    for i in limited:
        refused, retried = sent[i], sent[i + 1]
        assert retried.idempotency_key == refused.idempotency_key  # the same write, sent again
        assert refused.retry_after and retried.sent_at - refused.sent_at >= int(refused.retry_after)
    assert sum(1 for exchange in sent if exchange.status == 201) == WRITES


def test_a_client_that_will_not_wait_gets_rate_limited_with_the_retry_after(limited_server, token):
    impatient = RetryPolicy(max_retry_after=0.5)  # shorter than the server's 1 s
    with Client(limited_server.base, token, retry=impatient) as client, pytest.raises(RateLimited) as refused:
        for _ in range(10):
            list(client.list(page_size=1))
    assert refused.value.status == 429 and refused.value.retry_after >= 1
    assert refused.value.code == "throttled"

    with Client(limited_server.base, token, retry=NO_RETRY) as client, pytest.raises(RateLimited):
        for _ in range(10):
            list(client.list(page_size=1))
