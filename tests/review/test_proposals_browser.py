"""Dedup proposals in a real headless Chromium against a live server: a reviewer opens a proposal,
sees the kept and the dropped record side by side with the difference highlighted, accepts it (the
dropped record becomes superseded, with its history row), rolls it back (restored, and the regret
rate shown changes), keeps the other side of a contradiction, and meets a proposal whose records
changed after the page loaded: the conflict is shown and nothing is applied."""

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from governance.dedup.jobs import propose_duplicates
from governance.models import DedupProposal
from memory.actors import Actor
from memory.models import MemoryRecord, Status
from memory.services import memory_confirm

# Transactional, so the live server thread sees the test's rows; serialized rollback restores the
# seeded memory kinds that the flush after each test would otherwise remove.
pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True, serialized_rollback=True)]

EMAIL = "The customer prefers to be contacted by email."
EMAIL_AGAIN = "Customer prefers being contacted via email."
PHONE = "The customer prefers to be contacted by phone."


def propose(write, *contents) -> DedupProposal:
    for content in contents:
        write(content=content)
    propose_duplicates(now=timezone.now(), batch_size=500)
    return DedupProposal.objects.get(status="open")


def last_history(record_id):
    return MemoryRecord.history.filter(id=record_id).order_by("-history_date", "-history_id").first()


def side(page, record_id):
    return page.locator(f'.side[data-record="{record_id}"]')


def test_reviewer_accepts_then_rolls_back_and_the_regret_rate_changes(page, login, screenshot, reviewer, write):
    proposal = propose(write, EMAIL, EMAIL_AGAIN)
    kept, dropped = proposal.keep_id, proposal.drops.get().record_id
    kept_content = MemoryRecord.objects.get(pk=kept).content
    dropped_content = MemoryRecord.objects.get(pk=dropped).content

    login(reviewer)
    page.get_by_role("navigation", name="Review sections").get_by_role("link", name="Proposals").click()
    expect(page.locator("#regret-rate")).to_contain_text("no proposal accepted yet")
    card = page.locator(f'[data-proposal="{proposal.pk}"]')
    expect(card).to_contain_text("duplicate")
    screenshot("proposal-list")
    card.get_by_role("link", name="preference · customer/acme").click()

    expect(side(page, kept).locator(".content")).to_have_text(kept_content)
    expect(side(page, dropped).locator(".content")).to_have_text(dropped_content)
    # the words that differ are marked on both sides; the shared ones are not
    expect(side(page, kept).locator("mark.diff").first).to_be_visible()
    assert "via" in " ".join(side(page, dropped).locator("mark.diff").all_inner_texts()) + " ".join(
        side(page, kept).locator("mark.diff").all_inner_texts()
    )
    assert "email." not in side(page, dropped).locator("mark.diff").all_inner_texts()
    expect(side(page, dropped)).to_contain_text("chat://session/s-1")  # its provenance
    screenshot("proposal-detail")

    page.get_by_label("Note (optional)").fill("same preference")
    page.get_by_role("button", name="Accept", exact=True).click()
    expect(page.locator(".message-success")).to_contain_text("accepted: 1 memory superseded")
    expect(side(page, dropped).locator(".badge-status-superseded")).to_be_visible()
    expect(page.locator(".regret-value")).to_have_text("0.0%")
    record = MemoryRecord.objects.get(pk=dropped)
    assert record.status == Status.SUPERSEDED
    row = last_history(dropped)
    assert (row.history_change_reason, row.history_user, row.history_note.endswith("same preference")) == (
        "review.dedup_accept",
        reviewer,
        True,
    )

    page.get_by_label("Note (optional)").fill("they differ after all")
    page.get_by_role("button", name="Roll back").click()
    expect(page.locator(".message-success")).to_contain_text("rolled back: 1 memory active again")
    expect(page.locator(".regret-value")).to_have_text("100.0%")
    expect(page.locator("#regret-rate")).to_contain_text("1 of 1 accepted proposal rolled back")
    screenshot("proposal-rolled-back")
    record.refresh_from_db()
    assert (record.status, record.version) == (Status.ACTIVE, 3)
    assert last_history(dropped).history_change_reason == "review.restore"
    assert DedupProposal.objects.get(pk=proposal.pk).status == "rolled_back"

    page.goto("/review/proposals/")
    expect(page.locator(".regret-value")).to_have_text("100.0%")


def test_reviewer_keeps_the_other_side_of_a_contradiction(page, login, reviewer, write):
    proposal = propose(write, EMAIL, PHONE)
    suggested, other = proposal.keep_id, proposal.drops.get().record_id
    login(reviewer)
    page.goto(f"/review/proposals/{proposal.pk}/")
    expect(page.get_by_role("heading", level=1)).to_contain_text("Conflict")
    side(page, other).get_by_role("button", name="Keep this one instead").click()
    expect(page.locator(".message-success")).to_contain_text(f"superseded by memory {str(other)[:8]}")
    assert MemoryRecord.objects.get(pk=suggested).status == Status.SUPERSEDED
    assert MemoryRecord.objects.get(pk=other).status == Status.ACTIVE


def test_records_changed_after_the_page_loaded_show_the_conflict_instead_of_applying(
    page, login, screenshot, reviewer, credential, write
):
    proposal = propose(write, EMAIL, EMAIL_AGAIN)
    dropped = proposal.drops.get().record_id
    login(reviewer)
    page.goto(f"/review/proposals/{proposal.pk}/")
    expect(page.locator("#stale-notice")).to_have_count(0)
    # after the page loaded, the agent re-checks one of the records against its source
    memory_confirm(record_id=dropped, expected_version=1, actor=Actor.for_credential(credential))

    page.get_by_role("button", name="Accept", exact=True).click()

    expect(page.locator(".message-warning")).to_contain_text("Not applied")
    expect(page.locator(".message-warning")).to_contain_text("stays open")
    moved = page.locator(f"#moved-{dropped}")
    expect(moved).to_contain_text("proposed at version 1")
    expect(moved).to_contain_text("agent.confirm")
    expect(page.get_by_role("button", name="Accept", exact=True)).to_have_count(0)
    expect(page.get_by_role("button", name="Reject")).to_be_visible()
    screenshot("proposal-stale")
    assert DedupProposal.objects.get(pk=proposal.pk).status == "open"
    assert set(MemoryRecord.objects.values_list("status", flat=True)) == {Status.ACTIVE}
    assert last_history(dropped).history_change_reason == "agent.confirm"
