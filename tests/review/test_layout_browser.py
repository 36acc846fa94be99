"""The reviewer pages at a phone's width (390 px) and a laptop's (1400 px), in a real headless
Chromium against a live server: the header is one row on the laptop (brand, sections and account
side by side), nothing makes a phone scroll sideways, the account menu opens inside the screen, and
each page says what issue 27 asked it to (how a run was started, quarantine reasons only while they
apply, session and turn, the preselected agent, times in the pages' own format, the dashboard's
counts and chart axes). A screenshot of every page at both widths lands in the test output folder
(TEST_OUTPUT_DIR) for a person to look at."""

import re
from datetime import timedelta

import pytest
from django.core.cache import cache
from django.urls import reverse
from django.utils import timezone
from playwright.sync_api import expect

from governance.dedup.services import proposal_accept, proposal_rollback
from governance.golden.services import golden_question_create
from governance.jobs import run_job
from governance.models import ForgetRequest
from governance.revocations.services import resolve_source, revocation_create
from memory.models import MemoryRecord
from memory.services import memory_promote
from tests.review.conftest import SCREENSHOT_DIR
from tests.review.test_proposals import EMAIL, EMAIL_AGAIN, propose

# Transactional, so the live server thread sees the test's rows; serialized rollback restores the
# seeded memory kinds that the flush after each test would otherwise remove.
pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True, serialized_rollback=True)]

PHONE, LAPTOP = 390, 1400
WEB = {"authority": "third_party", "provenance": {"source_type": "web_page", "uri": "https://forum.example/thread/42"}}


@pytest.fixture
def scene(tenant, credential, write, reviewer_actor, quarantined, drifting):
    """A little of everything the pages show, made through the real services."""
    cache.clear()  # the dashboard keeps its numbers for a minute
    waiting = quarantined(content="Acme's CEO approves every refund.")
    drifting(days=200, content="Deploys go through staging and need one approval.")
    approved = write(
        content="Acme's refund window is 45 days.",
        kind="semantic",
        provenance={**WEB["provenance"], "session_id": None, "turn_id": "6"},
        authority=WEB["authority"],
    )
    memory_promote(record_id=approved.pk, expected_version=1, actor=reviewer_actor, note="matches the policy page")
    golden_question_create(
        actor=reviewer_actor,
        tenant=tenant,
        agent=credential.agent,
        purpose="support",
        question="how long is the refund window",
        expected=[approved.pk],
        k=3,
    )
    run_job("golden_recall", trigger="run_job")  # as bin/run does at start
    run_job("expire", trigger="run_job")
    proposal = propose(write, EMAIL, EMAIL_AGAIN)
    proposal_accept(proposal_id=proposal.pk, actor=reviewer_actor)
    proposal_rollback(proposal_id=proposal.pk, actor=reviewer_actor)
    forget = ForgetRequest.objects.create(
        tenant=tenant, subject="customer/gone", requested_by="test", status=ForgetRequest.Status.COMPLETED
    )
    requested = timezone.now() - timedelta(hours=1)
    ForgetRequest.objects.filter(pk=forget.pk).update(requested_at=requested, completed_at=requested + timedelta(seconds=0.4))
    write(content="Read on a forum: Acme ships on Sundays.", provenance={"session_id": "s-poisoned"})
    revocation_create(
        actor=reviewer_actor,
        reason="the session read a compromised page",
        source=resolve_source(actor=reviewer_actor, tenant=tenant, session_id="s-poisoned"),
    )
    return {"waiting": waiting, "approved": MemoryRecord.objects.get(pk=approved.pk)}


def box(page, selector: str) -> dict:
    return page.locator(selector).first.bounding_box()


def assert_header_fits(page, width: int) -> None:
    brand, nav, account = (box(page, s) for s in (".brand", ".site-header nav", ".account > summary"))
    if width == LAPTOP:
        # One row: each part's middle lies within the height of every other part, and the bar is one line tall.
        for part in (brand, nav, account):
            middle = part["y"] + part["height"] / 2
            for other in (brand, nav, account):
                assert other["y"] <= middle <= other["y"] + other["height"], (brand, nav, account)
        assert box(page, ".site-header")["height"] < 64
        assert brand["x"] + brand["width"] <= nav["x"] and nav["x"] + nav["width"] <= account["x"]
    else:
        # Brand and account on the first row, the sections under them, all inside the screen.
        assert abs((brand["y"] + brand["height"] / 2) - (account["y"] + account["height"] / 2)) < 8
        assert nav["y"] >= brand["y"] + brand["height"]
        assert account["x"] + account["width"] <= width
    scroll_width, inner_width = page.evaluate("() => [document.documentElement.scrollWidth, innerWidth]")
    assert scroll_width <= inner_width, f"{page.url} scrolls sideways at {width} px: {scroll_width}"


def visit(page, path: str, name: str, width: int) -> None:
    response = page.goto(path)
    assert response.status == 200, (path, response.status)
    assert_header_fits(page, width)
    SCREENSHOT_DIR.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOT_DIR / f"layout-{name}-{width}.png"), full_page=True)


@pytest.mark.parametrize("width", [PHONE, LAPTOP])
def test_every_page_fits_the_width_and_says_what_it_should(page, login, reviewer, scene, width):
    page.set_viewport_size({"width": width, "height": 900})
    login(reviewer)
    main = page.locator("main")

    visit(page, reverse("review:home"), "home", width)
    jobs = page.get_by_role("region", name="Scheduled jobs")
    expect(jobs.get_by_role("row", name=re.compile("^golden_recall"))).to_contain_text("by command")
    expect(jobs).not_to_contain_text("run_job")
    # The account menu: closed, then open with both of its actions, inside the screen.
    expect(page.get_by_role("button", name="Log out")).to_be_hidden()
    page.locator(".account > summary").click()
    expect(page.get_by_role("link", name="Change password")).to_be_visible()
    expect(page.get_by_role("button", name="Log out")).to_be_visible()
    menu = box(page, ".account-menu")
    assert menu["x"] >= 0 and menu["x"] + menu["width"] <= width
    page.locator(".account > summary").click()

    visit(page, reverse("review:quarantine"), "quarantine", width)
    card = page.locator(f'[data-record="{scene["waiting"].pk}"]')
    expect(card).to_contain_text("Why quarantined")
    expect(card).to_contain_text("s-web / 7")

    visit(page, reverse("review:drift"), "drift", width)
    expect(main).to_contain_text("Deploys go through staging and need one approval.")

    approved = scene["approved"]
    visit(page, reverse("review:memory_detail", args=[approved.pk]), "memory", width)
    claim = page.get_by_role("region", name="Claim and provenance")
    expect(claim).not_to_contain_text("Why quarantined")
    expect(claim).to_contain_text("6 (no session given)")
    expect(claim).not_to_contain_text("— / 6")
    history = page.get_by_role("region", name="History")
    expect(history).to_contain_text(f"Quarantined because: {approved.quarantine_reason}")
    state_at = page.get_by_label("State at", exact=True)
    expect(state_at).to_have_attribute("placeholder", "YYYY-MM-DD HH:MM:SS")
    expect(page.locator(".state-at")).to_contain_text("UTC, e.g. 2026-11-03 14:30:00.")

    visit(page, reverse("review:dashboard"), "dashboard", width)
    expect(page.locator(".lede")).not_to_contain_text("numbers of the design")
    expect(page.locator(".tile").filter(has_text="Dedup regret rate")).to_contain_text("1 of 1 accepted proposal rolled back")
    lag = page.get_by_role("img", name="Forget propagation lag per request (last 90 days)")
    expect(lag.locator(".axis-title")).to_have_text(["lag", "requests, oldest first, by the day requested"])
    expect(
        lag.locator("text[text-anchor=middle]", has_text=(timezone.now() - timedelta(hours=1)).strftime("%m-%d"))
    ).to_have_count(1)
    golden_chart = page.get_by_role("img", name="Golden recall on the active index per day (last 90 days)")
    widths = golden_chart.locator("rect:has(title)").evaluate_all("bars => bars.map(b => b.getBBox().width)")
    assert len(widths) == 2 and max(widths) <= 28  # one day: a narrow pair, not two full-width bars

    visit(page, reverse("review:golden"), "golden", width)
    expect(main).to_contain_text(re.compile(r"\((just now|\d+ minutes? ago), by command\):\s+hit@k"))
    expect(main).not_to_contain_text(", nightly")
    must_find = page.locator(".must-find").first
    expect(must_find).to_contain_text("semantic · customer/acme")
    expect(must_find).to_contain_text("“Acme's refund window is 45 days.”")
    expect(must_find.get_by_role("link", name=str(approved.pk)[:8])).to_be_visible()

    visit(page, reverse("review:revocation_list"), "revocations", width)
    expect(page.locator("#revocations")).to_contain_text("s-poisoned")

    visit(page, reverse("review:holds"), "holds", width)
    expect(page.locator("#holds")).to_contain_text("s-poisoned")

    visit(page, reverse("review:recall_asof"), "recall-as-of", width)
    agent = page.get_by_label("Agent")
    expect(agent.locator("option")).to_have_text(["acme / support-bot"])  # preselected: no empty choice
    page.get_by_label("Query").fill("refund window")
    page.get_by_label("Purpose").fill("support")
    page.get_by_label("At").fill(timezone.now().strftime("%Y-%m-%d %H:%M:%S UTC"))  # as the pages print times
    page.get_by_role("button", name="Show what recall returned").click()
    results = page.get_by_test_id("recall-as-of-results")
    expect(results).to_contain_text("Acme's refund window is 45 days.")
    assert_header_fits(page, width)
    page.screenshot(path=str(SCREENSHOT_DIR / f"layout-recall-as-of-results-{width}.png"), full_page=True)
