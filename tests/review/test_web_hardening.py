"""Web hardening of the pages people use: a Content-Security-Policy on every page, only the
account routes that are designed (log in, log out, change one's password; no password reset),
and a form post past Django's field limit (a bulk decision on 5,000 memories) answered with a
page that says nothing was applied, without an ERROR log line."""

import logging
import uuid

import pytest
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from memory.models import Status

pytestmark = pytest.mark.django_db

STRICT = {
    "default-src 'self'",
    "script-src 'self'",
    "style-src 'self'",
    "object-src 'none'",
    "base-uri 'none'",
    "form-action 'self'",
    "frame-ancestors 'none'",
}


def directives(response) -> set[str]:
    return {part.strip() for part in response["Content-Security-Policy"].split(";")}


def test_every_page_carries_a_strict_content_security_policy(client, reviewer, quarantined):
    record = quarantined()
    pages = {
        "login": client.get(reverse("login")),
        "api docs": client.get("/api/docs/"),
        "api docs script": client.get("/api/docs/?script"),
    }
    client.force_login(reviewer)
    for name in ("home", "quarantine", "drift", "dashboard"):
        pages[name] = client.get(reverse(f"review:{name}"))
    pages["memory"] = client.get(reverse("review:memory_detail", args=[record.pk]))
    pages["not found"] = client.get("/review/nothing-here/")
    admin = Client()
    admin.force_login(get_user_model().objects.create_superuser(username="ada", password="admin-pass-123"))
    pages["admin"] = admin.get(reverse("admin:index"))
    pages["admin history"] = admin.get(reverse("admin:memory_memoryrecord_history", args=[record.pk]))
    pages["api"] = admin.get("/api/v1/memories/")
    for name, response in pages.items():
        assert response.status_code in (200, 404), name
        policy = directives(response)
        assert STRICT <= policy, (name, policy)
        assert "unsafe-inline" not in response["Content-Security-Policy"], name
        assert "unsafe-eval" not in response["Content-Security-Policy"], name
    assert "img-src 'self' data:" in directives(pages["api docs"])  # Swagger UI's icons, on that page only
    assert "img-src 'self'" in directives(pages["home"])
    # The docs' start-up script is a file of its own, not inline.
    docs = pages["api docs"].content.decode()
    assert '<script src="/api/docs/?script="></script>' in docs and "<style>" not in docs
    assert pages["api docs script"]["Content-Type"].startswith("application/javascript")


# --- account routes ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    ["/accounts/password_reset/", "/accounts/password_reset/done/", "/accounts/reset/MQ/set-password/", "/accounts/reset/done/"],
)
def test_there_is_no_password_reset(client, path):
    assert client.get(path).status_code == 404
    assert client.post(path, {"email": "rita@example.com"}).status_code == 404


def test_a_reviewer_changes_their_password_from_the_header_link(client, reviewer):
    client.force_login(reviewer)
    home = client.get(reverse("review:home")).content.decode()
    assert f'href="{reverse("password_change")}"' in home
    form = client.get(reverse("password_change"))
    assert form.status_code == 200 and "Change your password" in form.content.decode()
    response = client.post(
        reverse("password_change"),
        {"old_password": reviewer.raw_password, "new_password1": "a-new-pass-456", "new_password2": "a-new-pass-456"},
    )
    assert response.status_code == 302 and response["Location"] == reverse("password_change_done")
    assert "Password changed" in client.get(reverse("password_change_done")).content.decode()
    reviewer.refresh_from_db()
    assert reviewer.check_password("a-new-pass-456") and not reviewer.check_password(reviewer.raw_password)


def test_a_wrong_old_password_changes_nothing(client, reviewer):
    client.force_login(reviewer)
    response = client.post(
        reverse("password_change"),
        {"old_password": "not-it", "new_password1": "a-new-pass-456", "new_password2": "a-new-pass-456"},
    )
    assert response.status_code == 200 and "Your old password was entered incorrectly" in response.content.decode()
    reviewer.refresh_from_db()
    assert reviewer.check_password(reviewer.raw_password)


# --- form limits ---------------------------------------------------------------------------------


@pytest.mark.parametrize("enforce_csrf", [True, False], ids=["browser", "test-client"])
def test_a_bulk_decision_on_5000_memories_is_refused_with_a_message_and_no_error_log(reviewer, quarantined, caplog, enforce_csrf):
    """5,000 selected rows are 10,000 fields, past DATA_UPLOAD_MAX_NUMBER_FIELDS (1,000): read by
    the CSRF check in a browser, by the view without it; the same page either way."""
    record = quarantined()
    client = Client(enforce_csrf_checks=enforce_csrf)
    client.force_login(reviewer)
    quarantine = reverse("review:quarantine")
    client.get(quarantine)
    ids = [str(record.pk)] + [str(uuid.uuid4()) for _ in range(4999)]
    data = {
        "csrfmiddlewaretoken": client.cookies["csrftoken"].value,
        "decision": "reject",
        "selected": ids,
        **{f"version-{pk}": "1" for pk in ids},
    }
    with caplog.at_level(logging.INFO):
        response = client.post(reverse("review:quarantine_bulk"), data, HTTP_REFERER=f"http://testserver{quarantine}")
    page = response.content.decode()
    assert response.status_code == 400
    assert "Nothing was applied" in page and "more than 1000 fields" in page and "Select fewer at a time" in page
    assert f'href="http://testserver{quarantine}"' in page  # back to the queue
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], [r.getMessage() for r in caplog.records]
    assert any(r.levelno == logging.WARNING and getattr(r, "event", None) == "form_limit" for r in caplog.records)
    record.refresh_from_db()
    assert (record.status, record.version) == (Status.QUARANTINED, 1)


def test_a_referer_from_another_site_is_not_offered_as_the_way_back(reviewer_client):
    data = {"decision": "reject", "selected": [str(uuid.uuid4()) for _ in range(1001)]}
    response = reviewer_client.post(reverse("review:quarantine_bulk"), data, HTTP_REFERER="https://evil.example/")
    assert response.status_code == 400 and "evil.example" not in response.content.decode()


def test_the_admin_keeps_its_own_password_change_page(client):
    client.force_login(get_user_model().objects.create_superuser(username="ada", password="admin-pass-123"))
    page = client.get(reverse("admin:password_change")).content.decode()
    assert str(admin.site.site_header) in page and "Change your password" not in page


def test_a_form_larger_than_the_upload_limit_is_a_413_page(reviewer_client, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 10_000
    response = reviewer_client.post(reverse("review:quarantine_bulk"), {"decision": "reject", "note": "x" * 20_000})
    assert response.status_code == 413 and "more than 10000 bytes" in response.content.decode()
