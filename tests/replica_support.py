"""A real streaming replica for the read-replica tests: `bin/replica-setup` makes a hot standby of
the test server (PostgreSQL), and `replica_alias` points the alias `replica_0` at the test
database on it, with the router and the read-your-writes middleware on, as DATABASE_REPLICA_URLS
would. On PostgreSQL a standby that cannot be made fails the tests; they are skipped on SQLite,
which has no replicas.

The standby lags as far as a test needs: it receives the primary's log at once but replays it only
inside `replayed()`, and holds it back otherwise (`pg_wal_replay_pause`). A standby that applies
the log a fixed delay late lags the same way, but each test then waited out the delay at every
catch-up, and had to fit its reads into the delay's window."""

import os
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections
from django.test import override_settings

from memory import engine
from tests.processes import ROOT, free_port

ALIAS = "replica_0"


@contextmanager
def streaming_replica() -> Iterator[int]:
    """A hot standby of the test server on 127.0.0.1, holding back replay until `replayed()`;
    yields its port."""
    params = connections[DEFAULT_DB_ALIAS].settings_dict
    primary = f"postgres://{params['USER'] or 'postgres'}@{params['HOST'] or '127.0.0.1'}:{params['PORT'] or 5432}/postgres"
    directory = Path(tempfile.mkdtemp(prefix="gm-replica-"))
    os.chmod(directory, 0o755)  # the server runs as postgres
    port = free_port()
    script = ROOT / "bin" / "replica-setup"
    env = {**os.environ, "DATABASE_URL": primary}
    made = subprocess.run([script, "up", directory / "standby", str(port)], env=env, capture_output=True, text=True)
    try:
        if made.returncode != 0:
            raise AssertionError(f"bin/replica-setup could not make a replica:\n{made.stdout}\n{made.stderr}")
        with psycopg.connect(host="127.0.0.1", port=port, dbname="postgres", user=params["USER"] or "postgres") as standby:
            standby.execute("SELECT pg_wal_replay_pause()")
        yield port
    finally:
        subprocess.run([script, "down", directory / "standby"], env=env, capture_output=True, check=False)
        directory.rmdir()


@contextmanager
def replica_alias(port: int) -> Iterator[str]:
    """`replica_0` reads the test database on the standby at `port`, as DATABASE_REPLICA_URLS would
    configure it (a test mirror of default: the test runner neither creates nor flushes it). Enter
    it before the test's database fixtures, and mark the tests `django_db(databases="__all__")`."""
    primary = connections[DEFAULT_DB_ALIAS].settings_dict
    settings.DATABASES[ALIAS] = {**primary, "HOST": "127.0.0.1", "PORT": port, "TEST": {**primary["TEST"], "MIRROR": "default"}}
    connections.settings[ALIAS] = settings.DATABASES[ALIAS]
    try:
        yield ALIAS
    finally:
        connections[ALIAS].close()
        del connections[ALIAS]
        connections.settings.pop(ALIAS, None)
        settings.DATABASES.pop(ALIAS, None)


@contextmanager
def routing() -> Iterator[None]:
    """The router and the read-your-writes middleware on, as the settings turn them on."""
    middleware = [*settings.MIDDLEWARE]
    middleware.insert(middleware.index("axes.middleware.AxesMiddleware"), "config.replica_routing.ReadYourWritesMiddleware")
    with override_settings(DATABASE_ROUTERS=["memory.engine.routing.ReplicaRouter"], MIDDLEWARE=middleware):
        yield


def replayed() -> int:
    """The primary's write position now, once the standby has replayed it (waits); then the standby
    holds back again. (A pause stops replay before its next record; no wait for it is needed.)"""
    replication = engine.current().replication
    target = replication.wal_position(DEFAULT_DB_ALIAS)
    with connections[ALIAS].cursor() as cursor:
        cursor.execute("SELECT pg_wal_replay_resume()")
    try:
        deadline = time.monotonic() + 60
        while (replication.replayed_position(ALIAS) or 0) < target:
            if time.monotonic() > deadline:
                raise AssertionError("the replica did not replay the primary's log within 60 s")
            time.sleep(0.05)
    finally:
        with connections[ALIAS].cursor() as cursor:
            cursor.execute("SELECT pg_wal_replay_pause()")
    return target
