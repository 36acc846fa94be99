"""DATABASE_REPLICA_URLS in the settings, and what routing costs with no replica configured (both
databases). The replicas themselves are tested against a real standby: tests/api/test_replicas.py."""

import subprocess
import sys

import pytest
from django.db import DEFAULT_DB_ALIAS

from memory import replicas
from tests.processes import ROOT


def test_without_replicas_routing_costs_nothing(db, django_assert_num_queries):
    """No DATABASE_REPLICA_URLS: no alias, no fence row, no statement (both databases)."""
    assert replicas.aliases() == []
    with django_assert_num_queries(0):
        assert replicas.choose(tenant_ids=[1], writer="replica-ryw:agent:1") == DEFAULT_DB_ALIAS
        replicas.fence(1)
        replicas.note_write("replica-ryw:agent:1")
        assert replicas.close_fences() == 0


def _settings_with(**env: str) -> subprocess.CompletedProcess:
    code = (
        "import django, json; django.setup(); from django.conf import settings as s; "
        "print(json.dumps({a: {'HOST': d.get('HOST'), 'PORT': d.get('PORT'), 'MIRROR': d['TEST'].get('MIRROR')} "
        "for a, d in s.DATABASES.items()})); print(json.dumps(s.DATABASE_ROUTERS)); "
        "print('config.replica_routing.ReadYourWritesMiddleware' in s.MIDDLEWARE)"
    )
    environment = {"DJANGO_SETTINGS_MODULE": "config.settings", "PATH": "/usr/bin:/bin", **env}
    return subprocess.run([sys.executable, "-c", code], env=environment, cwd=ROOT, capture_output=True, text=True)


@pytest.mark.parametrize("replica_urls", ["", "postgres://u@10.0.0.2:5433/gm, postgres://u@10.0.0.3/gm"])
def test_replica_urls_become_mirrored_aliases_with_the_router(tmp_path, replica_urls):
    made = _settings_with(
        DATABASE_URL="postgres://u@10.0.0.1:5432/gm", DATABASE_REPLICA_URLS=replica_urls, APP_VAR_DIR=str(tmp_path)
    )
    assert made.returncode == 0, made.stderr
    databases, routers, middleware = made.stdout.strip().splitlines()[-3:]
    if not replica_urls:
        assert '"replica_' not in databases and routers == "[]" and middleware == "False"
        return
    assert '"replica_0": {"HOST": "10.0.0.2", "PORT": 5433, "MIRROR": "default"}' in databases
    assert '"replica_1": {"HOST": "10.0.0.3", "PORT": "", "MIRROR": "default"}' in databases
    assert routers == '["memory.engine.routing.ReplicaRouter"]' and middleware == "True"


def test_replicas_of_sqlite_are_refused(tmp_path):
    made = _settings_with(DATABASE_REPLICA_URLS="postgres://u@10.0.0.2/gm", APP_VAR_DIR=str(tmp_path))
    assert made.returncode != 0
    assert "DATABASE_REPLICA_URLS name PostgreSQL standbys" in made.stderr
