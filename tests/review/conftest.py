"""Fixtures for the reviewer UI: records in each queue built through the real services, a
logged-in test client, and for browser tests one headless Chromium per session (Debian's
/usr/bin/chromium driven by Playwright) with a fresh context per test."""

import os
from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.utils import timezone

from memory.models import MemoryRecord

# Playwright's sync API keeps an asyncio loop running in the main thread; Django would then
# refuse ORM calls from the test body. Nothing here is async, so this is safe.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
# Screenshots of what a reviewer sees, for a person to look at after a run.
SCREENSHOT_DIR = Path(os.environ.get("TEST_OUTPUT_DIR", settings.VAR_DIR / "test-output")) / "screenshots"

WEB_CLAIM = {
    "authority": "third_party",
    "provenance": {"source_type": "web_page", "uri": "https://forum.example/thread/42", "session_id": "s-web", "turn_id": "7"},
}


@pytest.fixture
def quarantined(write):
    """quarantined(**overrides) -> a record the service quarantined (a third-party web claim)."""

    def make(**overrides):
        body = {**WEB_CLAIM, **overrides}
        body["provenance"] = {**WEB_CLAIM["provenance"], **overrides.get("provenance", {})}
        record = write(**body)
        assert record.status == "quarantined"
        return record

    return make


@pytest.fixture
def drifting(write):
    """drifting(days=..., **overrides) -> an active `semantic` record (review every 90 days) last
    confirmed `days` ago. Only timestamps are moved back, as if written then; no status changes."""

    def make(days: int, last_used_days: int | None = None, **overrides):
        record = write(kind="semantic", **overrides)
        assert record.status == "active"
        then = timezone.now() - timedelta(days=days)
        used = timezone.now() - timedelta(days=last_used_days) if last_used_days is not None else None
        MemoryRecord.objects.filter(pk=record.pk).update(
            created_at=then, confirmed_at=then, status_changed_at=then, last_used_at=used
        )
        record.refresh_from_db()
        return record

    return make


@pytest.fixture
def reviewer_client(client, reviewer):
    client.force_login(reviewer)
    return client


# --- browser -------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser, live_server):
    context = browser.new_context(base_url=live_server.url, viewport={"width": 1366, "height": 900})
    context.set_default_timeout(10_000)
    page = context.new_page()
    yield page
    context.close()


@pytest.fixture
def login(page):
    """login(user): through the real login form, as a reviewer would."""

    def do(user):
        page.goto("/review/")
        page.get_by_label("Username").fill(user.get_username())
        page.get_by_label("Password").fill(user.raw_password)
        page.get_by_role("button", name="Log in").click()
        page.wait_for_url("**/review/")

    return do


@pytest.fixture
def screenshot(page):
    def take(name: str) -> Path:
        SCREENSHOT_DIR.mkdir(parents=True, exist_ok=True)
        path = SCREENSHOT_DIR / f"{name}.png"
        page.wait_for_load_state()
        page.screenshot(path=str(path), full_page=True)
        return path

    return take
