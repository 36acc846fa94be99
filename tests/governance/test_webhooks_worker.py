"""Webhook delivery by a real Celery worker against the real broker: a worker killed (kill -9) in
the middle of delivering loses no event; what it had sent but not recorded comes again with the
same id, and each record's events still arrive in order."""

import os
import time
from collections import defaultdict

import pytest
from standardwebhooks import Webhook

from governance.events.services import subscription_create
from memory.actors import Actor
from memory.models import Event
from memory.services import memory_confirm, memory_write_batch
from tests.conftest import memory_body
from tests.governance.webhook_receiver import Receiver
from tests.processes import wait_for

TASK = "governance.tasks.run_deliver_webhooks"
# Records written (each one event) before the worker starts; a tenth are confirmed too (a second
# event each). The suite runs 400; the run at scale: WEBHOOK_KILL_RECORDS=10000
# (docs/benchmarks.md).
RECORDS = int(os.environ.get("WEBHOOK_KILL_RECORDS", "400"))


@pytest.mark.worker
def test_a_worker_killed_mid_delivery_loses_nothing_and_keeps_each_records_order(
    celery_stack, tenant, credential, reviewer, settings
):
    settings.WEBHOOKS_ALLOW_PRIVATE_NETWORKS = True

    def slow(received):
        time.sleep(0.004)  # a subscriber that takes a moment: the kill lands mid-run
        return 200, b"{}", {}

    receiver = Receiver(answer=slow).start()
    try:
        subscription = subscription_create(actor=Actor.for_user(reviewer), tenant=tenant, url=receiver.url, events=["*"])
        records = []
        for start in range(0, RECORDS, 100):
            items = [memory_body() for _ in range(min(100, RECORDS - start))]
            records += [r.record for r in memory_write_batch(credential=credential, items=items)]
        confirmer = Actor.for_credential(credential)
        for record in records[: max(60, RECORDS // 10)]:  # a second event for some records: their order must hold
            memory_confirm(record_id=record.pk, expected_version=1, actor=confirmer)
        expected = {str(uid) for uid in Event.objects.values_list("uid", flat=True)}
        assert len(expected) == RECORDS + max(60, RECORDS // 10)

        env = {"WEBHOOKS_ALLOW_PRIVATE_NETWORKS": "true"}
        with celery_stack.explained():
            worker = celery_stack.start_worker(**env)
            celery_stack.send(TASK)
            wait_for(lambda: len(receiver.received) >= len(expected) // 4, timeout=90 + RECORDS / 20, what="deliveries under way")
            celery_stack.kill(worker)
            at_kill = len(receiver.received)
            assert at_kill < len(expected)
            celery_stack.start_worker(**env)

            def all_received() -> bool:
                return {r.headers["webhook-id"] for r in receiver.received} >= expected

            deadline = time.monotonic() + 120 + RECORDS / 10
            while not all_received():
                assert time.monotonic() < deadline, f"{len(receiver.received)} of {len(expected)} delivered in time"
                celery_stack.send(TASK)  # as beat does every 30 s: one run delivers for about 50 s
                sent = time.monotonic()
                while not all_received() and time.monotonic() - sent < 60:
                    time.sleep(0.2)

        bodies = [Webhook(subscription.secret).verify(r.body, r.headers) for r in receiver.received]
        assert {b["id"] for b in bodies} == expected
        versions = defaultdict(list)
        for body in bodies:
            versions[body["data"]["record"]["id"]].append(body["data"]["record"]["version"])
        assert all(seen == sorted(seen) for seen in versions.values())  # repeats allowed, never out of order
        assert len(bodies) - len(expected) <= 2  # at most what was in flight when the worker died
    finally:
        receiver.stop()
