"""`seed_demo` sets public demo passwords, so it refuses to run in production: a clear error, a
nonzero exit, and nothing changed (run as a real command against the test database)."""

import secrets
import subprocess
import sys

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model

from memory.models import AgentCredential, MemoryRecord, Tenant
from tests.config.test_deploy import clean_environ
from tests.processes import database_url_for_subprocesses


def counts() -> tuple[int, ...]:
    return tuple(model.objects.count() for model in (Tenant, get_user_model(), AgentCredential, MemoryRecord))


@pytest.mark.django_db(transaction=True)  # the command runs in another process: it must see this data
def test_seed_demo_refuses_in_production_and_changes_nothing(tmp_path):
    admin = get_user_model().objects.create_superuser("admin", password="the-real-admin-password")
    before = counts()

    result = subprocess.run(
        [sys.executable, "manage.py", "seed_demo"],
        cwd=settings.BASE_DIR,
        capture_output=True,
        text=True,
        timeout=120,
        env=clean_environ(
            tmp_path,
            APP_ENV="production",
            SECRET_KEY=secrets.token_urlsafe(50),
            ALLOWED_HOSTS="memory.example.com",
            DATABASE_URL=database_url_for_subprocesses(),
        ),
    )

    assert result.returncode == 1
    assert "seed_demo refuses to run with APP_ENV=production" in result.stderr
    assert "Traceback" not in result.stderr
    admin.refresh_from_db()
    assert admin.check_password("the-real-admin-password")
    assert counts() == before
