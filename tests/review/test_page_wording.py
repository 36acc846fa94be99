"""What the reviewer pages say, through Django's test client (issue 27's findings): times typed the
way the pages print them (UTC), a preselected agent when there is only one, a quarantine reason
only while it applies (then as history), no history change that reads the same before and after,
session and turn when one is missing, one wording for how a run was started (no stray spaces
around the time), golden questions' records a reviewer can recognise, and the dashboard's intro
and regret count. The layout at phone and laptop widths is in test_layout_browser.py."""

import re
from datetime import UTC, datetime, timedelta

import pytest
from django.core.cache import cache
from django.urls import reverse
from django.utils import timezone

from governance.dedup.services import proposal_accept, proposal_rollback
from governance.golden.services import golden_question_create
from governance.jobs import run_job
from governance.review.asof import RecallAsOfForm, StateAtForm
from memory.models import Agent, MemoryRecord
from memory.services import memory_confirm, memory_promote
from tests.review.test_proposals import EMAIL, EMAIL_AGAIN, propose

pytestmark = pytest.mark.django_db


def agents_in(tenant):
    return Agent.objects.filter(tenant=tenant).select_related("tenant").order_by("slug")


# --- times in, as the pages print them ------------------------------------------------------------


@pytest.mark.parametrize(
    "typed, meant",
    [
        ("2026-11-03 14:30:00", datetime(2026, 11, 3, 14, 30, tzinfo=UTC)),
        ("2026-11-03 14:30:00 UTC", datetime(2026, 11, 3, 14, 30, tzinfo=UTC)),  # copied from a page
        ("  2026-11-03 14:30 utc ", datetime(2026, 11, 3, 14, 30, tzinfo=UTC)),
        ("2026-11-03T14:30:00", datetime(2026, 11, 3, 14, 30, tzinfo=UTC)),
        ("2026-11-03T15:30:00+01:00", datetime(2026, 11, 3, 14, 30, tzinfo=UTC)),  # its own zone
    ],
)
def test_a_moment_is_read_as_the_pages_print_it_in_utc(typed, meant):
    form = StateAtForm({"as_of": typed})
    assert form.is_valid(), form.errors
    assert form.cleaned_data["as_of"] == meant


@pytest.mark.parametrize("typed", ["11/03/2026, 02:30 PM", "2026-11-03 UTC", "yesterday", "2026-13-03 14:30:00"])
def test_a_moment_in_another_format_is_an_error_that_shows_the_format(typed):
    form = StateAtForm({"as_of": typed})
    assert not form.is_valid()
    assert form.errors["as_of"] == ["Enter a date and time in UTC, e.g. 2026-11-03 14:30:00."]


def test_the_time_boxes_are_text_in_the_pages_format_and_say_utc(reviewer_client, write):
    record = write()
    html = reviewer_client.get(
        reverse("review:memory_detail", args=[record.pk]), {"as_of": "2099-01-01 00:00:00 UTC"}
    ).content.decode()
    box = re.search(r'<input[^>]*name="as_of"[^>]*>', html).group(0)
    assert 'type="text"' in box and 'placeholder="YYYY-MM-DD HH:MM:SS"' in box
    assert "UTC, e.g. 2026-11-03 14:30:00." in html
    html = reviewer_client.get(reverse("review:recall_asof")).content.decode()
    assert 'type="datetime-local"' not in html and "UTC, e.g. 2026-11-03 14:30:00" in html


def test_a_result_links_to_the_memory_at_that_moment_in_the_pages_format(reviewer_client, write, credential):
    record = write(content="Acme wants invoices by email.")
    moment = (timezone.now() + timedelta(seconds=1)).replace(microsecond=0)
    while timezone.now() < moment:
        pass
    page = reviewer_client.get(
        reverse("review:recall_asof"),
        {
            "query": "invoices",
            "agent": credential.agent.pk,
            "purpose": "support",
            "as_of": moment.strftime("%Y-%m-%d %H:%M:%S UTC"),
        },
    )
    assert page.context["reconstructed"].result.items
    link = (
        f"{reverse('review:memory_detail', args=[record.pk])}?as_of={moment:%Y-%m-%d}%20{moment:%H}%3A{moment:%M}%3A{moment:%S}"
    )
    assert link in page.content.decode()
    detail = reviewer_client.get(link).content.decode()
    assert f'value="{moment:%Y-%m-%d %H:%M:%S}"' in detail  # the box shows the time as the page prints it


# --- the agent list -------------------------------------------------------------------------------


def test_one_agent_is_preselected_without_an_empty_choice(tenant, credential):
    html = str(RecallAsOfForm(agents=agents_in(tenant))["agent"])
    assert "---------" not in html and html.count("<option") == 1
    assert re.search(r'<option value="\d+"( selected)?>acme / support-bot</option>', html)


def test_several_agents_start_with_a_prompt_to_choose(tenant, credential, make_credential):
    make_credential(tenant, agent_slug="billing-bot")
    html = str(RecallAsOfForm(agents=agents_in(tenant))["agent"])
    assert "---------" not in html
    assert re.findall(r"<option[^>]*>([^<]+)</option>", html) == ["Choose an agent", "acme / billing-bot", "acme / support-bot"]


# --- the memory page ------------------------------------------------------------------------------

WEB = {"authority": "third_party", "provenance": {"source_type": "web_page", "uri": "https://forum.example/t/1"}}


def test_why_quarantined_shows_while_quarantined_then_only_in_the_history(reviewer_client, write, reviewer_actor):
    record = write(content="Acme refunds everything.", **WEB)
    assert record.status == "quarantined" and record.quarantine_reason
    url = reverse("review:memory_detail", args=[record.pk])
    html = reviewer_client.get(url).content.decode()
    assert "<dt>Why quarantined</dt>" in html

    memory_promote(record_id=record.pk, expected_version=1, actor=reviewer_actor, note="checked")
    html = reviewer_client.get(url).content.decode()
    assert "Why quarantined" not in html
    history = html[html.index('id="history-title"') :]
    row = re.search(r"<tr>.*?write\.quarantined.*?</tr>", history, re.DOTALL).group(0)
    assert "Quarantined because:" in row and record.quarantine_reason.replace("'", "&#x27;") in row
    assert history.count("Quarantined because:") == 1  # not on the approval's row


def test_a_change_that_reads_the_same_is_not_listed(reviewer_client, write, reviewer_actor):
    record = write()
    confirmed = memory_confirm(record_id=record.pk, expected_version=1, actor=reviewer_actor)
    # Written and confirmed within one second, as happens: confirmed_at differs only below the second shown.
    first, second = record.history.order_by("history_date", "history_id")
    same_second = confirmed.confirmed_at.replace(microsecond=0)
    type(first).objects.filter(history_id=first.history_id).update(confirmed_at=same_second)
    type(second).objects.filter(history_id=second.history_id).update(confirmed_at=same_second + timedelta(microseconds=5))
    html = reviewer_client.get(reverse("review:memory_detail", args=[record.pk])).content.decode()
    history = html[html.index('id="history-title"') :]
    assert "<strong>confirmed_at</strong>" not in history
    assert "<strong>version</strong>: 1 → 2" in history  # the real changes of that row are still there


@pytest.mark.parametrize(
    "session, turn, shown, not_shown",
    [
        ("s-9", "6", "<dt>Session / turn</dt><dd>s-9 / 6</dd>", "given)"),
        ("", "6", '<dt>Turn</dt><dd>6 <span class="muted">(no session given)</span></dd>', "/ 6"),
        ("s-9", "", '<dt>Session</dt><dd>s-9 <span class="muted">(no turn given)</span></dd>', "s-9 /"),
        ("", "", '<dt>Session / turn</dt><dd><span class="muted">not given</span></dd>', "— / —"),
    ],
)
def test_session_and_turn_read_sensibly_when_one_is_missing(reviewer_client, write, session, turn, shown, not_shown):
    record = write(provenance={"session_id": session or None, "turn_id": turn or None})
    html = reviewer_client.get(reverse("review:memory_detail", args=[record.pk])).content.decode()
    facts = html[html.index('id="claim-title"') : html.index('id="time-title"')]
    assert shown in facts and not_shown not in facts


# --- how a run was started ------------------------------------------------------------------------


@pytest.fixture
def question(tenant, credential, write, reviewer_actor):
    record = write(
        content="The billing contact is the finance team at finance@acme.example, reachable on weekdays.",
        kind="semantic",
        subject="customer/acme",
    )
    return golden_question_create(
        actor=reviewer_actor,
        tenant=tenant,
        agent=credential.agent,
        purpose="support",
        question="who is the billing contact",
        expected=[record.pk],
        k=3,
    )


def test_a_run_started_by_command_reads_the_same_on_home_and_golden_without_stray_spaces(reviewer_client, question):
    run_job("golden_recall", trigger="run_job")  # as bin/run does at start
    home = reviewer_client.get(reverse("review:home")).content.decode()
    golden_row = re.search(r"<th scope=\"row\">golden_recall</th>.*?</tr>", home, re.DOTALL).group(0)
    assert "<td>by command</td>" in golden_row and "run_job" not in golden_row

    golden = reviewer_client.get(reverse("review:golden")).content.decode()
    latest = re.search(r"Latest run on the active index.*?over", golden, re.DOTALL).group(0)
    assert re.search(r'\(<a href="[^"]+"><time [^>]+>just now</time></a>, by command\):', latest), latest
    assert ", nightly" not in golden and "run_job" not in golden
    recent = golden[golden.index('id="golden-runs-title"') :]
    assert "<td>by command</td>" in recent
    run_page = reviewer_client.get(re.search(r'href="(/review/golden/runs/\d+/)"', golden).group(1)).content.decode()
    assert '<span class="badge">by command</span>' in run_page


def test_runs_on_schedule_and_on_request_say_so(reviewer_client, question, tenant):
    run_job("golden_recall", trigger="beat")
    golden = reviewer_client.get(reverse("review:golden")).content.decode()
    assert "</a>, on schedule):" in golden
    reviewer_client.post(reverse("review:golden_run"), {"tenant": tenant.slug})
    golden = reviewer_client.get(reverse("review:golden")).content.decode()
    assert "</a>, on request):" in golden
    assert "<td>on request</td>" in golden and "<td>on schedule</td>" in golden
    home = reviewer_client.get(reverse("review:home")).content.decode()
    assert "<td>on schedule</td>" in home and "<td>beat</td>" not in home


def test_must_find_names_each_record_by_kind_subject_and_content(reviewer_client, question, write, reviewer_actor):
    (record,) = question.expected.all()
    html = reviewer_client.get(reverse("review:golden")).content.decode()
    cell = re.search(r'<ul class="must-find">.*?</ul>', html, re.DOTALL).group(0)
    assert f'href="{reverse("review:memory_detail", args=[record.pk])}"><code>{str(record.pk)[:8]}</code></a>' in cell
    assert "semantic · customer/acme" in cell
    assert re.search(
        r'<span class="excerpt">“The billing contact is the finance team at finance@acme\.example, reachable[^<]{1,5}…”</span>',
        cell,
    )

    run_job("golden_recall", trigger="run_job")
    run_page = reviewer_client.get(
        reverse("review:golden_run_detail", args=[question.tenant.golden_runs.get().pk])
    ).content.decode()
    assert "semantic · customer/acme" in run_page and "The billing contact is the finance team" in run_page


# --- the dashboard --------------------------------------------------------------------------------


def test_dashboard_intro_and_regret_tile_say_what_they_count(reviewer_client, write, reviewer_actor):
    cache.clear()
    html = reviewer_client.get(reverse("review:dashboard")).content.decode()
    assert "numbers of the design" not in html
    assert re.search(r"how well recall finds what it must, for\s+acme \(0 records\)\.", html)
    tile = re.search(r"<h3>Dedup regret rate</h3>.*?</li>", html, re.DOTALL).group(0)
    assert "no proposal accepted yet" in tile

    proposal = propose(write, EMAIL, EMAIL_AGAIN)
    proposal_accept(proposal_id=proposal.pk, actor=reviewer_actor)
    proposal_rollback(proposal_id=proposal.pk, actor=reviewer_actor)
    second = propose(write, EMAIL, EMAIL_AGAIN, subject="customer/acme-hq")
    proposal_accept(proposal_id=second.pk, actor=reviewer_actor)
    cache.clear()
    html = reviewer_client.get(reverse("review:dashboard")).content.decode()
    tile = re.search(r"<h3>Dedup regret rate</h3>.*?</li>", html, re.DOTALL).group(0)
    assert '<span class="number">50.0%</span>' in tile and "1 of 2 accepted proposals rolled back" in tile
    assert MemoryRecord.objects.count() == 4 and "(4 records)" in html
