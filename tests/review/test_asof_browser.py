"""In a real headless Chromium: a reviewer asks what recall would have returned at a past moment,
follows a result to the memory's page and reads its state at that moment with the "state at..."
control; forgotten content stays hidden there."""

from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from memory.recall import RecallQuery, recall
from memory.services import memory_forget_subject, memory_supersede
from tests.review.test_browser import nav_link

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True, serialized_rollback=True)]


def past_second():
    """A moment (whole seconds, as the browser's input gives it) after every write so far."""
    moment = timezone.now().replace(microsecond=0) + timedelta(seconds=1)
    while timezone.now() <= moment:
        pass
    return moment


def test_reviewer_sees_what_recall_returned_then_and_the_state_of_a_memory_then(
    page, login, screenshot, reviewer, reviewer_actor, credential, write, tenant
):
    old = write(content="Acme invoices are sent by fax.")
    other = write(content="Acme invoices need a PO number.")
    gone = write(content="Dana's invoices go to her home address.", subject="customer/dana")
    then = [item.record.pk for item in recall(credential=credential, q=RecallQuery(query="invoices", purpose="support")).items]
    assert set(then) == {old.pk, other.pk, gone.pk}
    moment = past_second()
    correction = memory_supersede(
        record_id=old.pk, expected_version=1, actor=reviewer_actor, content="Acme invoices are sent by email."
    )
    memory_forget_subject(tenant_id=tenant.pk, subject="customer/dana", actor=reviewer_actor)

    login(reviewer)
    nav_link(page, "Recall as of").click()
    page.get_by_label("Query").fill("invoices")
    page.get_by_label("Agent").select_option(label="acme / support-bot")
    page.get_by_label("Purpose").fill("support")
    page.get_by_label("At").fill(moment.strftime("%Y-%m-%d %H:%M:%S UTC"))  # as the pages print times
    page.get_by_role("button", name="Show what recall returned").click()

    results = page.get_by_test_id("recall-as-of-results")
    expect(results).to_contain_text("Acme invoices are sent by fax.")
    expect(results).to_contain_text("Withheld (forgotten since")
    expect(results).not_to_contain_text("home address")
    expect(results).not_to_contain_text("sent by email")
    rows = results.locator("tbody tr")
    expect(rows).to_have_count(2)
    shown = [rows.nth(i).locator("a").first.inner_text() for i in range(2)]
    assert shown == [str(pk)[:8] for pk in then if pk != gone.pk]
    screenshot("recall-as-of")

    results.get_by_role("link", name=str(old.pk)[:8]).click()
    state = page.get_by_test_id("as-of-state")
    expect(state).to_contain_text("active")
    expect(state).to_contain_text("Acme invoices are sent by fax.")
    # The moment in the box as every page prints times (UTC, to the second).
    expect(page.get_by_label("State at", exact=True)).to_have_value(moment.strftime("%Y-%m-%d %H:%M:%S"))
    screenshot("memory-state-at")

    # Now, the same control: superseded, by the correction.
    page.get_by_label("State at", exact=True).fill(timezone.now().strftime("%Y-%m-%d %H:%M:%S"))
    page.get_by_role("button", name="Show").click()
    expect(state).to_contain_text("superseded")
    expect(state.get_by_role("link", name=str(correction.pk)[:8])).to_be_visible()

    # A forgotten memory: its state then, never its content.
    page.goto(f"/review/memories/{gone.pk}/?as_of={moment.strftime('%Y-%m-%dT%H:%M:%S')}")
    expect(state).to_contain_text("active")
    expect(state).to_contain_text("forgotten since")
    expect(page.locator("body")).not_to_contain_text("home address")

    # A bad time is a message in the form.
    page.get_by_label("State at", exact=True).fill("")
    page.get_by_role("button", name="Show").click()
    expect(page.locator(".state-at .field-error")).to_be_visible()
