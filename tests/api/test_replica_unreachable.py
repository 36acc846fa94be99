"""A configured read replica that cannot be reached: recall is answered by the primary
(memory.replicas.read_on_replica), not refused. PostgreSQL only, like every replica test."""

import pytest
from django.db import connection

from tests.api.conftest import recall_ids
from tests.processes import free_port
from tests.replica_support import replica_alias, routing

NO_REPLICAS_ON_SQLITE = "SQLite has no streaming replicas: DATABASE_REPLICA_URLS names PostgreSQL standbys"


@pytest.fixture(scope="module")
def unreachable_replica(django_db_setup, django_db_blocker):
    """`replica_0` names a port nothing listens on (set before the tests' database fixtures)."""
    if connection.vendor != "postgresql":
        pytest.skip(NO_REPLICAS_ON_SQLITE)
    with replica_alias(free_port()) as alias:
        yield alias


@pytest.mark.postgresql(reason=NO_REPLICAS_ON_SQLITE)
@pytest.mark.django_db(transaction=True, databases="__all__")
def test_a_replica_that_cannot_be_reached_leaves_recall_to_the_primary(unreachable_replica, write, agent_client, caplog):
    record = write(content="Escalations go to the night desk.")
    with routing():
        assert recall_ids(agent_client, query="escalations night desk") == [str(record.pk)]
        listed = agent_client.get(f"/api/v1/memories/{record.pk}/")
    assert listed.status_code == 200 and listed.json()["status"] == "active"
    # The recall tried the replica first (no fence, no write of this agent), then the primary. (The
    # read after it may not try: if the recall built the default index, this agent wrote, and its
    # read-your-writes check finds the replica unreachable before any read.)
    assert caplog.text.count("replica read failed; reading the primary") >= 1


@pytest.mark.postgresql(reason=NO_REPLICAS_ON_SQLITE)
@pytest.mark.django_db(transaction=True, databases="__all__")
def test_the_readiness_probe_reports_a_replica_that_is_down_and_stays_ready(unreachable_replica, client):
    ready = client.get("/health/ready/")
    body = ready.json()
    # Ready: the replica's reads fall back to the primary; degraded, naming the replica that is down.
    assert ready.status_code == 200 and body["status"] == "degraded", body
    replicas = body["checks"]["replicas"]
    assert replicas["ok"] is True and replicas["degraded"] is True and replicas["down"] == [unreachable_replica]
    report = replicas["replicas"][unreachable_replica]
    assert report["ok"] is False and report["error"] == "OperationalError"
    assert body["checks"]["database"]["ok"] is True
