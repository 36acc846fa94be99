"""Production settings: `check --deploy --fail-level WARNING` passes with the README's production
variables, each HTTPS protection can be turned off (and the check then says so), an unknown APP_ENV
or a weak key stops the settings import, and probes still reach /health/ and /metrics over plain
HTTP while everything else is redirected."""

import os
import re
import runpy
import secrets
import subprocess
import sys

import pytest
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.test import Client, override_settings
from django.urls import reverse

SETTINGS_FILE = settings.BASE_DIR / "config" / "settings.py"
README = settings.BASE_DIR / "README.md"
# Every variable a settings module reads that a test's own environment could set.
_SETTINGS_VARIABLES = re.compile(
    r"^(APP_ENV|SECRET_KEY|DEBUG|ALLOWED_HOSTS|CSRF_TRUSTED_ORIGINS|DATABASE_URL|REDIS_URL|SECURE_.*|"
    r"SESSION_COOKIE_SECURE|CSRF_COOKIE_SECURE)$"
)


def readme_production_variables() -> dict[str, str]:
    """The block under `<!-- production-env -->` in README.md, with a generated SECRET_KEY."""
    text = README.read_text()
    marker = text.index("<!-- production-env")
    block = re.search(r"```sh\n(.*?)```", text[marker:], re.S).group(1)
    variables = dict(line.split("=", 1) for line in block.splitlines() if line.strip())
    assert variables["APP_ENV"] == "production"
    variables["SECRET_KEY"] = secrets.token_urlsafe(50)
    return variables


def clean_environ(tmp_path, **variables: str) -> dict[str, str]:
    """A process environment with only these variables (and PATH, HOME, locale): nothing the test
    run set (DEBUG, DJANGO_ALLOW_ASYNC_UNSAFE from the browser tests, ...) leaks in."""
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR")}
    return {**env, "APP_VAR_DIR": str(tmp_path / "var"), **variables}


def deploy_check(env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=settings.BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def load_settings(monkeypatch, tmp_path, **variables: str) -> dict:
    """Run config/settings.py afresh under these variables (the running settings are untouched)."""
    for name in list(os.environ):
        if _SETTINGS_VARIABLES.match(name):
            monkeypatch.delenv(name)
    monkeypatch.setenv("APP_VAR_DIR", str(tmp_path / "var"))
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    return runpy.run_path(str(SETTINGS_FILE))


def test_deploy_check_passes_with_the_readme_production_variables(tmp_path):
    result = deploy_check(clean_environ(tmp_path, **readme_production_variables()))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


@pytest.mark.parametrize(
    ("turned_off", "warning"),
    [
        ({"SECURE_SSL_REDIRECT": "false"}, "security.W008"),
        ({"SECURE_HSTS_SECONDS": "0"}, "security.W004"),
        ({"SECURE_HSTS_PRELOAD": "false"}, "security.W021"),
    ],
)
def test_deploy_check_names_a_protection_turned_off(tmp_path, turned_off, warning):
    result = deploy_check(clean_environ(tmp_path, **readme_production_variables(), **turned_off))
    assert result.returncode != 0
    assert warning in result.stderr


@pytest.mark.parametrize("app_env", ["prod", "staging", "Production", "test", ""])
def test_an_unknown_app_env_is_refused_at_settings_import(monkeypatch, tmp_path, app_env):
    with pytest.raises(ImproperlyConfigured, match=r"APP_ENV must be one of development, production; got"):
        load_settings(monkeypatch, tmp_path, APP_ENV=app_env)


def test_an_unknown_app_env_stops_a_management_command(tmp_path):
    result = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=settings.BASE_DIR,
        env=clean_environ(tmp_path, APP_ENV="prod"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0
    assert "ImproperlyConfigured: APP_ENV must be one of development, production; got 'prod'." in result.stderr


@pytest.mark.parametrize(
    ("variables", "message"),
    [
        ({"SECRET_KEY": "x" * 40}, "SECRET_KEY set to a random value of 50\\+ characters"),  # Django's deploy check wants 50
        ({"SECRET_KEY": "ab" * 30}, "SECRET_KEY"),  # long, but two distinct characters
        ({"SECRET_KEY": "django-insecure-" + secrets.token_urlsafe(50)}, "SECRET_KEY"),
        ({"ALLOWED_HOSTS": ""}, "needs ALLOWED_HOSTS"),
        ({"SECURE_PROXY_SSL_HEADER": "X-Forwarded-Proto,https"}, "HTTP_X_FORWARDED_PROTO,https"),
        ({"SECURE_PROXY_SSL_HEADER": "HTTP_X_FORWARDED_PROTO"}, "two values separated by a comma"),
    ],
)
def test_production_refuses_weak_or_malformed_settings(monkeypatch, tmp_path, variables, message):
    with pytest.raises(ImproperlyConfigured, match=message):
        load_settings(monkeypatch, tmp_path, **{**readme_production_variables(), **variables})


def test_production_turns_https_on_and_development_leaves_it_off(monkeypatch, tmp_path):
    production = load_settings(monkeypatch, tmp_path, **readme_production_variables())
    assert production["DEBUG"] is False
    assert production["SECURE_SSL_REDIRECT"] is True
    assert (
        production["SECURE_HSTS_SECONDS"],
        production["SECURE_HSTS_INCLUDE_SUBDOMAINS"],
        production["SECURE_HSTS_PRELOAD"],
    ) == (31_536_000, True, True)
    assert production["SESSION_COOKIE_SECURE"] and production["CSRF_COOKIE_SECURE"]
    assert production["SECURE_PROXY_SSL_HEADER"] == ("HTTP_X_FORWARDED_PROTO", "https")

    development = load_settings(monkeypatch, tmp_path)
    assert development["DEBUG"] is True and development["APP_ENV"] == "development"
    assert not development["SECURE_SSL_REDIRECT"] and development["SECURE_HSTS_SECONDS"] == 0
    assert development["SECURE_PROXY_SSL_HEADER"] is None


@pytest.mark.django_db
def test_probes_use_plain_http_and_everything_else_is_redirected_to_https(monkeypatch, tmp_path):
    production = load_settings(monkeypatch, tmp_path, **readme_production_variables())
    https = {
        name: production[name]
        for name in (
            "SECURE_SSL_REDIRECT",
            "SECURE_REDIRECT_EXEMPT",
            "SECURE_HSTS_SECONDS",
            "SECURE_HSTS_INCLUDE_SUBDOMAINS",
            "SECURE_HSTS_PRELOAD",
            "SECURE_PROXY_SSL_HEADER",
        )
    }
    with override_settings(**https):
        client = Client()  # built under the override: SecurityMiddleware reads its settings once
        for probe in (reverse("health"), reverse("health_live"), reverse("health_ready"), reverse("metrics")):
            response = client.get(probe)
            assert response.status_code in (200, 503), (probe, response.status_code)  # answered, not redirected
            assert "Strict-Transport-Security" not in response  # HSTS only travels over HTTPS
        for url in ("/api/v1/memories/?subject=x", reverse("review:home"), reverse("admin:index")):
            response = client.get(url)
            assert response.status_code == 301 and response["Location"] == f"https://testserver{url}"
        # Through the TLS proxy: served, with HSTS.
        response = client.get(reverse("health"), headers={"X-Forwarded-Proto": "https"})
        assert response["Strict-Transport-Security"] == "max-age=31536000; includeSubDomains; preload"
        assert client.get(reverse("review:home"), headers={"X-Forwarded-Proto": "https"}).status_code == 302  # to login
