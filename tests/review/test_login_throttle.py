"""Login throttling (django-axes, config.login_throttle): LOGIN_FAILURE_LIMIT (5) failed log-ins for
one username, or from one address, refuse further log-ins there, right password included, with
the login page, a message, 429 and Retry-After, until the cool-off (15 minutes after the last
try) has passed. The same on the admin's login. Time is moved by moving the recorded attempts
back, as the clock would."""

from datetime import timedelta

import pytest
from axes.models import AccessAttempt
from django.conf import settings
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.db.models import F
from django.test import Client, override_settings
from django.urls import reverse

from config.login_throttle import lockout_message

pytestmark = pytest.mark.django_db

LOGIN = reverse("login")
LOCKED = lockout_message(15)


def attempt(client: Client, username: str, password: str, address: str = "127.0.0.1", path: str = LOGIN, **headers):
    return client.post(path, {"username": username, "password": password}, REMOTE_ADDR=address, **headers)


def logged_in(client: Client) -> bool:
    return "_auth_user_id" in client.session


def wait(duration: timedelta) -> None:
    """As if `duration` passed since every recorded attempt."""
    AccessAttempt.objects.update(attempt_time=F("attempt_time") - duration)


def test_the_policy_is_five_failures_and_fifteen_minutes_by_account_or_address():
    assert settings.AXES_FAILURE_LIMIT == 5 and settings.AXES_COOLOFF_TIME == timedelta(minutes=15)
    assert settings.AXES_LOCKOUT_PARAMETERS == ["username", "ip_address"]


def test_twenty_wrong_passwords_lock_the_account_until_the_cool_off_passes(client, reviewer):
    statuses = [attempt(client, reviewer.username, f"wrong-{n}").status_code for n in range(20)]
    assert statuses == [200] * 4 + [429] * 16

    refused = attempt(client, reviewer.username, reviewer.raw_password)
    assert refused.status_code == 429 and not logged_in(client)
    page = refused.content.decode()
    assert "Log in to review" in page and LOCKED in page  # the login page, with the reason
    assert f'value="{reviewer.username}"' in page  # the username stays filled in
    assert refused["Retry-After"] == "900"

    wait(timedelta(minutes=14))  # each refused try restarted the cool-off: not over yet
    assert attempt(client, reviewer.username, reviewer.raw_password).status_code == 429 and not logged_in(client)

    wait(timedelta(minutes=15, seconds=1))
    response = attempt(client, reviewer.username, reviewer.raw_password)
    assert response.status_code == 302 and response["Location"] == reverse("review:home") and logged_in(client)
    assert not AccessAttempt.objects.exists()  # expired attempts are cleaned up


def test_fewer_failures_than_the_limit_lock_nothing(client, reviewer):
    for n in range(4):
        response = attempt(client, reviewer.username, f"wrong-{n}")
        assert response.status_code == 200 and "Please enter a correct username and password" in response.content.decode()
    assert attempt(client, reviewer.username, reviewer.raw_password).status_code == 302 and logged_in(client)


def test_an_address_with_five_failures_is_locked_for_every_account(client, reviewer):
    for n in range(5):
        attempt(client, f"guess-{n}", "wrong-password", address="10.0.0.1")
    refused = attempt(client, reviewer.username, reviewer.raw_password, address="10.0.0.1")
    assert refused.status_code == 429 and LOCKED in refused.content.decode() and not logged_in(client)
    assert attempt(client, reviewer.username, reviewer.raw_password, address="10.0.0.2").status_code == 302
    assert logged_in(client)


def test_an_account_with_five_failures_is_locked_from_every_address(client, reviewer):
    for n in range(5):
        attempt(client, reviewer.username, "wrong-password", address=f"10.0.1.{n}")
    assert attempt(client, reviewer.username, reviewer.raw_password, address="10.0.2.1").status_code == 429
    assert not logged_in(client)
    other = get_user_model().objects.create_user(username="otto", password="otto-pass-123")
    assert attempt(client, other.username, "otto-pass-123", address="10.0.2.1").status_code == 302  # others may log in


def test_the_admin_login_is_throttled_too_and_says_why(client):
    get_user_model().objects.create_superuser(username="ada", password="admin-pass-123")
    admin_login = reverse("admin:login")
    for n in range(5):
        attempt(client, "ada", f"wrong-{n}", path=admin_login)
    refused = attempt(client, "ada", "admin-pass-123", path=admin_login)
    page = refused.content.decode()
    assert refused.status_code == 429 and not logged_in(client)
    assert str(admin.site.site_header) in page and LOCKED in page  # the admin's own login page
    # ...and the lock is the account's, whichever login page is used next.
    assert attempt(client, "ada", "admin-pass-123").status_code == 429


@override_settings(LOGIN_PROXY_COUNT=1)
def test_behind_a_proxy_the_address_is_the_one_the_proxy_appended(client, reviewer):
    for n in range(5):  # the client forges the left part of X-Forwarded-For each time: no help
        attempt(client, f"guess-{n}", "wrong-password", address="10.9.9.9", HTTP_X_FORWARDED_FOR=f"192.0.2.{n}, 203.0.113.7")
    assert set(AccessAttempt.objects.values_list("ip_address", flat=True)) == {"203.0.113.7"}
    behind = attempt(client, reviewer.username, reviewer.raw_password, address="10.9.9.9", HTTP_X_FORWARDED_FOR="203.0.113.7")
    assert behind.status_code == 429
    # Another client behind the same proxy (same REMOTE_ADDR) is not locked out.
    assert (
        attempt(
            client, reviewer.username, reviewer.raw_password, address="10.9.9.9", HTTP_X_FORWARDED_FOR="198.51.100.4"
        ).status_code
        == 302
    )


def test_a_login_without_a_request_skips_the_throttle_but_still_checks_the_password(client, reviewer):
    """The test client's login() calls authenticate() without a request: no address to count."""
    assert not client.login(username=reviewer.username, password="wrong-password")
    assert client.login(username=reviewer.username, password=reviewer.raw_password)
