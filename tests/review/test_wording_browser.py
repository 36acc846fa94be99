"""What a reviewer reads, in a real headless Chromium against a live server: plurals that agree
with their numbers, how long a claim has waited (not "waiting 1 minute ago"), a forgotten memory's
page without expiry or review lines, the dashboard's queue wording, chart axes and tile rows, and
the project's own 404 page and icon. Screenshots land in the test output folder."""

import itertools
import re
import uuid
from datetime import timedelta

import pytest
from django.core.cache import cache
from django.utils import timezone
from playwright.sync_api import expect

from governance.forget.services import forget_request_create
from governance.models import ForgetRequest
from memory.actors import Actor
from memory.models import MemoryRecord

# Transactional, so the live server thread sees the test's rows; serialized rollback restores the
# seeded memory kinds that the flush after each test would otherwise remove.
pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True, serialized_rollback=True)]


@pytest.fixture(autouse=True)
def _fresh_cache():
    cache.clear()  # the dashboard caches its numbers for a minute
    yield
    cache.clear()


def tile(page, name: str):
    return page.locator(".tile").filter(has=page.get_by_role("heading", name=name))


def test_home_counts_agree_with_their_nouns(page, login, screenshot, reviewer, quarantined, drifting):
    quarantined()
    drifting(days=200)
    login(reviewer)
    expect(tile(page, "Quarantine")).to_contain_text("1 quarantined memory waiting for a decision")
    expect(tile(page, "Drift")).to_contain_text("1 active memory overdue for a re-check")
    expect(tile(page, "Dedup proposals")).to_contain_text("0 open duplicate proposals")
    expect(tile(page, "Forget requests")).to_contain_text("0 forget requests still propagating")
    screenshot("wording-home-singular")

    quarantined(content="A second claim from the forum.")
    page.reload()
    expect(tile(page, "Quarantine")).to_contain_text("2 quarantined memories waiting for a decision")
    assert "1 quarantined memories" not in page.inner_text("main")


def test_quarantine_card_says_how_long_the_claim_has_waited(page, login, screenshot, reviewer, quarantined):
    fresh = quarantined(content="Acme's CEO approves every refund.")
    older = quarantined(content="Acme pays in yen.")
    MemoryRecord.objects.filter(pk=older.pk).update(created_at=timezone.now() - timedelta(minutes=1, seconds=5))
    login(reviewer)
    page.goto("/review/quarantine/")
    waited = page.locator(f'[data-record="{older.pk}"] .card-head .muted')
    expect(waited).to_have_text(re.compile(r"^waiting for 1\s+minute$"))
    expect(page.locator(f'[data-record="{fresh.pk}"] .card-head .muted')).to_have_text("waiting less than a minute")
    assert not [text for text in page.locator(".card-head .muted").all_inner_texts() if "ago" in text]
    # The reason is said in a reviewer's words, not the write path's rule names.
    why = page.locator(f'[data-record="{older.pk}"] .why').first
    expect(why).to_contain_text("not said by the user or the operator")
    assert "auto-admitted" not in why.inner_text() and "third_party" not in why.inner_text()
    screenshot("wording-quarantine")


def test_forgotten_memory_page_shows_no_expiry_or_review(page, login, screenshot, reviewer, tenant, drifting):
    record = drifting(days=10, subject="customer/gone")  # semantic: expires later, reviewed every 90 days
    login(reviewer)
    page.goto(f"/review/memories/{record.pk}/")
    times = page.get_by_role("region", name="Time and lifecycle")
    expect(times).to_contain_text("Expires")
    expect(times).to_contain_text("review every 90 days")

    forget_request_create(actor=Actor.for_user(reviewer), tenant=tenant, subject="customer/gone", reason="erasure request")
    page.reload()
    expect(page.locator(".badge-status-forgotten").first).to_be_visible()
    expect(page.get_by_text("This memory is forgotten")).to_be_visible()
    expect(times).not_to_contain_text("Expires")
    expect(times).not_to_contain_text("review every")
    screenshot("wording-forgotten-memory")


def test_dashboard_wording_axes_and_layout(page, login, screenshot, reviewer, tenant, write, quarantined, drifting):
    write()
    quarantined()
    drifting(days=120)
    old = write(kind="procedural")
    MemoryRecord.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(days=400))
    now = timezone.now()
    requested = now - timedelta(hours=1)
    for seconds in (0.3, 0.6, 0.9, 1.1):  # propagation lags
        request = ForgetRequest.objects.create(
            tenant=tenant, subject="x", requested_by="test", status=ForgetRequest.Status.COMPLETED
        )
        ForgetRequest.objects.filter(pk=request.pk).update(
            requested_at=requested, completed_at=requested + timedelta(seconds=seconds)
        )
    login(reviewer)
    page.goto("/review/dashboard/")

    expect(page.locator(".lede")).to_contain_text("(4 records)")
    queues = page.locator("#queues-title + table")
    expect(queues).not_to_contain_text("waits")
    drift_row = queues.get_by_role("row", name=re.compile("^Drift"))
    expect(drift_row).to_contain_text(re.compile(r"oldest confirmation 120 d( \d+ h)? ago"))
    expect(page.get_by_role("img", name="Age of active memory per kind")).to_contain_text("> 1 y")

    # The lag chart's y axis: a nice step (0.5 s here), evenly spaced lines, exact labels.
    lag = page.get_by_role("img", name="Forget propagation lag per request (last 90 days)")
    labels = lag.locator("text[text-anchor=end]").all_text_contents()
    assert labels == ["0 s", "0.5 s", "1.0 s", "1.5 s"]
    ys = [float(y) for y in lag.locator("line").evaluate_all("lines => lines.map(l => l.getAttribute('y1'))")]
    gaps = [a - b for a, b in itertools.pairwise(ys)]
    assert max(gaps) - min(gaps) < 0.2, ys

    # Today's bars on the writes chart have their date under them.
    writes = page.get_by_role("img", name="Writes and quarantines per day (last 30 days)")
    expect(writes.locator("text", has_text=now.strftime("%m-%d"))).to_have_count(1)

    # Six numbers in rows of three: no tile alone on a row.
    tops = [
        round(box["y"])
        for box in page.locator(".tiles-numbers .tile").evaluate_all(
            "tiles => tiles.map(t => t.getBoundingClientRect().toJSON())"
        )
    ]
    assert sorted(tops.count(top) for top in set(tops)) == [3, 3]
    screenshot("wording-dashboard")


def test_missing_page_is_the_projects_own_404_with_its_icon(page, login, screenshot, reviewer):
    login(reviewer)
    response = page.goto(f"/review/memories/{uuid.uuid4()}/")
    assert response.status == 404
    expect(page.get_by_role("heading", name="Not found")).to_be_visible()
    expect(page.get_by_role("link", name="Back to the review home")).to_be_visible()
    assert "DEBUG" not in page.content()
    screenshot("wording-404")

    icon = page.locator("link[rel=icon]").get_attribute("href")
    assert page.request.get(icon).headers["content-type"].startswith("image/svg+xml")
    favicon = page.request.get("/favicon.ico")  # followed to the same icon
    assert favicon.ok and favicon.url.endswith(icon)
