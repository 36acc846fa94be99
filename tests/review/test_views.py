"""The reviewer UI through Django's test client: access and scope (login, 404 outside the
reviewer's tenants, CSRF, POST-only changes), decisions through the lifecycle services with their
history rows, conflicts, bulk decisions, the drift queue, the memory detail page, forget requests,
the home page, and query counts that do not grow with the queue."""

import uuid
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.contrib.messages import get_messages
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from governance.forget.services import forget_request_create
from governance.models import ForgetRequest, JobRun, PropagationReceipt
from memory.actors import Actor
from memory.models import MemoryRecord, Status, Trust
from memory.services import memory_confirm, memory_promote, memory_supersede

pytestmark = pytest.mark.django_db

HOME = reverse("review:home")
QUARANTINE = reverse("review:quarantine")
DRIFT = reverse("review:drift")
BULK = reverse("review:quarantine_bulk")


def decide_url(record, action):
    return reverse("review:memory_decide", args=[record.pk, action])


def detail_url(record):
    return reverse("review:memory_detail", args=[record.pk])


def texts(response):
    return [str(message) for message in get_messages(response.wsgi_request)]


def last_history(record):
    return record.history.order_by("-history_date", "-history_id").first()


def history_count():
    return MemoryRecord.history.count()


# --- access ------------------------------------------------------------------------------------


@pytest.mark.parametrize("url", [HOME, QUARANTINE, DRIFT, reverse("review:forget_list"), reverse("review:forget_new")])
def test_anonymous_user_is_sent_to_login(client, url):
    response = client.get(url)
    assert response.status_code == 302
    assert response["Location"] == f"{reverse('login')}?next={url}"


def test_root_and_login_lead_a_reviewer_to_the_review_home(client, reviewer):
    assert client.get("/")["Location"] == HOME
    response = client.post(reverse("login"), {"username": "rita", "password": reviewer.raw_password})
    assert response["Location"] == HOME
    assert client.get(HOME).status_code == 200


def test_logged_in_user_who_is_no_reviewer_is_refused(client, tenant):
    user = get_user_model().objects.create_user(username="mallory", password="not-a-reviewer-1")
    tenant.reviewers.add(user)  # assigned, but not in the reviewers group
    client.force_login(user)
    response = client.get(QUARANTINE)
    assert response.status_code == 403
    assert b"not a reviewer" in response.content


def test_logout_is_a_post_form_and_ends_the_session(reviewer_client):
    page = reviewer_client.get(HOME).content.decode()
    assert f'method="post" action="{reverse("logout")}"' in page
    response = reviewer_client.post(reverse("logout"))
    assert response.status_code == 302
    assert reviewer_client.get(HOME).status_code == 302


def test_reviewer_sees_only_their_tenants_queue(reviewer_client, quarantined, other_tenant, make_credential, write):
    mine = quarantined(content="Claim in acme.")
    theirs = write(credential_=make_credential(other_tenant), content="Claim in globex.", **_web())
    page = reviewer_client.get(QUARANTINE).content.decode()
    assert mine.content in page
    assert theirs.content not in page
    # asking for the other tenant by filter shows nothing either
    assert theirs.content not in reviewer_client.get(QUARANTINE, {"tenant": "globex"}).content.decode()


def _web():
    return {"authority": "third_party", "provenance": {"source_type": "web_page", "uri": "https://example.com/x"}}


def test_other_tenants_record_is_404_by_url_and_form_tampering(
    reviewer_client, other_tenant, make_credential, write, quarantined
):
    theirs = write(credential_=make_credential(other_tenant), **_web())
    mine = quarantined()
    assert reviewer_client.get(detail_url(theirs)).status_code == 404
    for action in ("approve", "reject", "confirm", "retire", "supersede"):
        response = reviewer_client.post(decide_url(theirs, action), {"version": 1, "content": "x"})
        assert response.status_code == 404
    # a bulk form with a foreign id smuggled in applies nothing at all, not even the own row
    response = reviewer_client.post(
        BULK,
        {"decision": "approve", "selected": [str(mine.pk), str(theirs.pk)], f"version-{mine.pk}": 1, f"version-{theirs.pk}": 1},
    )
    assert response.status_code == 404
    assert reviewer_client.post(BULK, {"decision": "approve", "selected": ["not-a-uuid"]}).status_code == 404
    for record in (theirs, mine):
        record.refresh_from_db()
        assert (record.status, record.version) == (Status.QUARANTINED, 1)


def test_unknown_record_and_unknown_action_are_404(reviewer_client, quarantined):
    record = quarantined()
    assert reviewer_client.get(reverse("review:memory_detail", args=[uuid.uuid4()])).status_code == 404
    assert reviewer_client.post(decide_url(record, "forget"), {"version": 1}).status_code == 404
    assert reviewer_client.post(decide_url(record, "expire"), {"version": 1}).status_code == 404


def test_post_without_csrf_token_is_refused_and_changes_nothing(reviewer, quarantined):
    record = quarantined()
    client = Client(enforce_csrf_checks=True)
    client.force_login(reviewer)
    response = client.post(decide_url(record, "approve"), {"version": 1})
    assert response.status_code == 403
    assert b"security token" in response.content
    record.refresh_from_db()
    assert record.status == Status.QUARANTINED


def test_get_never_changes_state(reviewer_client, quarantined, drifting):
    record, stale = quarantined(), drifting(days=200)
    before = history_count()
    assert reviewer_client.get(decide_url(record, "approve"), {"version": 1}).status_code == 405
    assert reviewer_client.get(BULK, {"decision": "approve", "selected": [str(record.pk)]}).status_code == 405
    for url in (HOME, QUARANTINE, DRIFT, detail_url(record), detail_url(stale), reverse("review:forget_new")):
        assert reviewer_client.get(url).status_code == 200
    assert (
        reviewer_client.get(
            reverse("review:forget_new"), {"tenant": "acme", "subject": "customer/acme", "reason": "r", "step": "confirm"}
        ).status_code
        == 200
    )
    assert history_count() == before
    assert ForgetRequest.objects.count() == 0
    record.refresh_from_db()
    assert (record.status, record.version) == (Status.QUARANTINED, 1)


# --- quarantine decisions ------------------------------------------------------------------------


def test_quarantine_row_shows_content_provenance_and_why(reviewer_client, quarantined):
    record = quarantined(content="Refunds are always approved.", provenance={"tool": "web_fetch"})
    page = reviewer_client.get(QUARANTINE).content.decode()
    for fact in (
        "Refunds are always approved.",
        "customer/acme",
        "support",
        "preference",
        "third_party",
        "web_page",
        "https://forum.example/thread/42",
        "s-web",
        "0.90",
        record.quarantine_reason.replace("'", "&#x27;"),
        "web_fetch",
        f'name="version-{record.pk}" value="1"',
    ):
        assert fact in page, fact


def test_approve_promotes_through_the_service_with_a_history_row(reviewer_client, reviewer, quarantined):
    record = quarantined()
    response = reviewer_client.post(
        decide_url(record, "approve"), {"version": 1, "note": "checked the forum", "next": QUARANTINE}
    )
    assert response["Location"] == QUARANTINE
    record.refresh_from_db()
    assert (record.status, record.trust, record.version, record.reviewed_by) == (Status.ACTIVE, Trust.VERIFIED, 2, reviewer)
    row = last_history(record)
    assert (row.history_change_reason, row.history_user, row.history_note) == ("review.promote", reviewer, "checked the forum")
    assert any("approved" in text for text in texts(response))
    assert record.content not in reviewer_client.get(QUARANTINE).content.decode()


def test_reject_rejects_and_next_cannot_leave_the_site(reviewer_client, quarantined):
    record = quarantined()
    response = reviewer_client.post(decide_url(record, "reject"), {"version": 1, "next": "https://evil.example/"})
    assert response["Location"] == detail_url(record)
    record.refresh_from_db()
    assert record.status == Status.REJECTED
    assert last_history(record).history_change_reason == "review.reject"


@pytest.mark.parametrize(
    "data, problem",
    [
        ({"version": "abc"}, "Version"),
        ({}, "Version"),
        ({"version": 1, "note": "n" * 501}, "Note"),
    ],
)
def test_bad_decision_input_gets_a_message_and_changes_nothing(reviewer_client, quarantined, data, problem):
    record = quarantined()
    response = reviewer_client.post(decide_url(record, "approve"), data)
    assert response.status_code == 302
    assert any(text.startswith("Nothing was applied") and problem in text for text in texts(response))
    record.refresh_from_db()
    assert (record.status, record.version) == (Status.QUARANTINED, 1)


def test_stale_version_is_a_conflict_and_the_fresh_row_is_shown(reviewer_client, quarantined, tenant, make_reviewer):
    record = quarantined(content="Seen by two reviewers.")
    other = Actor.for_user(make_reviewer(tenant, username="otto"))
    memory_promote(record_id=record.pk, expected_version=1, actor=other, note="first")
    response = reviewer_client.post(decide_url(record, "reject"), {"version": 1, "next": QUARANTINE}, follow=True)
    page = response.content.decode()
    assert "changed after your page loaded (it is now active, version 2)" in page
    assert "Changed while you were looking" in page
    assert "review.promote" in page and "user:otto" in page  # who changed it, from history
    record.refresh_from_db()
    assert (record.status, record.version) == (Status.ACTIVE, 2)
    assert last_history(record).history_change_reason == "review.promote"
    # the panel is shown once, not forever
    assert "Changed while you were looking" not in reviewer_client.get(QUARANTINE).content.decode()


def test_action_that_does_not_apply_to_the_status_is_reported(reviewer_client, quarantined):
    record = quarantined()
    response = reviewer_client.post(decide_url(record, "retire"), {"version": 1}, follow=True)
    assert "Cannot retire a memory that is quarantined." in response.content.decode()
    record.refresh_from_db()
    assert record.status == Status.QUARANTINED


# --- bulk ----------------------------------------------------------------------------------------


def test_bulk_reject_applies_each_row_at_its_own_version(reviewer_client, quarantined):
    first, second, untouched = quarantined(), quarantined(), quarantined()
    response = reviewer_client.post(
        BULK,
        {
            "decision": "reject",
            "note": "spam",
            "selected": [str(first.pk), str(second.pk)],
            f"version-{first.pk}": 1,
            f"version-{second.pk}": 1,
            "next": QUARANTINE,
        },
    )
    assert response["Location"] == QUARANTINE
    assert "2 memories rejected." in texts(response)
    for record, status in ((first, Status.REJECTED), (second, Status.REJECTED), (untouched, Status.QUARANTINED)):
        record.refresh_from_db()
        assert record.status == status
    assert last_history(first).history_note == "spam"


def test_bulk_reports_successes_and_conflicts(reviewer_client, quarantined, tenant, make_reviewer):
    fresh, stale = quarantined(), quarantined()
    memory_promote(record_id=stale.pk, expected_version=1, actor=Actor.for_user(make_reviewer(tenant, username="otto")))
    response = reviewer_client.post(
        BULK,
        {"decision": "approve", "selected": [str(fresh.pk), str(stale.pk)], f"version-{fresh.pk}": 1, f"version-{stale.pk}": 1},
        follow=True,
    )
    page = response.content.decode()
    assert "1 memory approved." in page
    assert f"Not applied to memory {str(stale.pk)[:8]}" in page
    assert f'id="changed-{stale.pk}"' in page
    fresh.refresh_from_db(), stale.refresh_from_db()
    assert (fresh.status, fresh.version) == (Status.ACTIVE, 2)
    assert stale.version == 2 and last_history(stale).history_user.username == "otto"


@pytest.mark.parametrize(
    "data, message",
    [
        ({"decision": "approve"}, "select at least one memory"),
        ({"decision": "approve", "selected": ["{id}"]}, "missing the version"),
        ({"decision": "approve", "selected": ["{id}"], "version-{id}": "0"}, "missing the version"),
        ({"decision": "promote", "selected": ["{id}"], "version-{id}": "1"}, "Decision"),
    ],
)
def test_bad_bulk_input_gets_a_message_and_changes_nothing(reviewer_client, quarantined, data, message):
    record = quarantined()
    post = {
        key.replace("{id}", str(record.pk)): (
            [v.replace("{id}", str(record.pk)) for v in value] if isinstance(value, list) else value
        )
        for key, value in data.items()
    }
    response = reviewer_client.post(BULK, post)
    assert any(message in text for text in texts(response)), texts(response)
    record.refresh_from_db()
    assert (record.status, record.version) == (Status.QUARANTINED, 1)


# --- filters -------------------------------------------------------------------------------------


def test_quarantine_filters_by_agent_kind_authority_and_source_type(reviewer_client, tenant, make_credential, write, quarantined):
    web = quarantined(content="From the web.")
    inferred = write(
        credential_=make_credential(tenant, agent_slug="analyst"),
        kind="semantic",
        content="Inferred.",
        authority="agent",
        provenance={"source_type": "agent_inference"},
    )
    cases = [
        ({"agent": "analyst"}, inferred),
        ({"kind": "semantic"}, inferred),
        ({"authority": "third_party"}, web),
        ({"source_type": "agent_inference"}, inferred),
        ({"tenant": "acme", "kind": "preference"}, web),
    ]
    for params, expected in cases:
        page = reviewer_client.get(QUARANTINE, params).content.decode()
        other = inferred if expected is web else web
        assert expected.content in page and other.content not in page, params


def test_invalid_filter_says_so_and_shows_no_rows(reviewer_client, quarantined):
    record = quarantined()
    page = reviewer_client.get(QUARANTINE, {"authority": "boss"}).content.decode()
    assert "This filter is not valid" in page
    assert record.content not in page


def test_quarantine_is_oldest_first_and_paginated(reviewer_client, quarantined):
    records = [quarantined(content=f"Claim number {n:02d}.") for n in range(27)]
    MemoryRecord.objects.filter(pk=records[-1].pk).update(created_at=timezone.now() - timedelta(days=3))
    first_page = reviewer_client.get(QUARANTINE).content.decode()
    assert first_page.index("Claim number 26.") < first_page.index("Claim number 00.")
    assert "Page 1 of 2" in first_page and "Claim number 25." not in first_page
    assert "Claim number 25." in reviewer_client.get(QUARANTINE, {"page": 2}).content.decode()


# --- drift ---------------------------------------------------------------------------------------


def test_drift_lists_oldest_confirmation_first_and_marks_deletion_candidates(reviewer_client, drifting, write):
    recent = drifting(days=100, last_used_days=2, content="Checked 100 days ago.")
    oldest = drifting(days=300, content="Checked 300 days ago, never recalled.")
    middle = drifting(days=200, last_used_days=190, content="Checked 200 days ago.")
    write(kind="semantic", content="Confirmed today.")
    response = reviewer_client.get(DRIFT)
    rows = list(response.context["page"].object_list)
    assert [r.pk for r in rows] == [oldest.pk, middle.pk, recent.pk]
    assert [r.deletion_candidate for r in rows] == [True, True, False]
    page = response.content.decode()
    assert "Confirmed today." not in page
    assert page.count("deletion candidate</span>") == 2


def test_drift_shows_one_batch_at_a_time(reviewer_client, drifting, settings):
    settings.MEMORY_DRIFT_BATCH = 2
    for days in (150, 140, 130):
        drifting(days=days)
    response = reviewer_client.get(DRIFT)
    assert len(response.context["page"].object_list) == 2
    assert "3 overdue" in response.content.decode()


def test_confirm_moves_the_record_out_of_the_drift_queue(reviewer_client, reviewer, drifting):
    record = drifting(days=200)
    reviewer_client.post(decide_url(record, "confirm"), {"version": 1, "note": "still true"})
    record.refresh_from_db()
    assert record.status == Status.ACTIVE and record.trust == Trust.VERIFIED
    assert timezone.now() - record.confirmed_at < timedelta(minutes=1)
    assert (last_history(record).history_change_reason, last_history(record).history_user) == ("review.confirm", reviewer)
    assert list(reviewer_client.get(DRIFT).context["page"].object_list) == []


def test_retire_expires_the_record_now(reviewer_client, drifting):
    record = drifting(days=200)
    reviewer_client.post(decide_url(record, "retire"), {"version": 1})
    record.refresh_from_db()
    assert record.status == Status.EXPIRED and record.expires_at <= timezone.now()
    assert last_history(record).history_change_reason == "review.retire"


def test_supersede_writes_the_correction_and_keeps_the_old_record(reviewer_client, reviewer, drifting):
    record = drifting(days=200, content="Deploys need one approval.")
    response = reviewer_client.post(
        decide_url(record, "supersede"),
        {"version": 1, "content": "Deploys need two approvals.", "note": "policy changed", "next": DRIFT},
    )
    record.refresh_from_db()
    correction = record.successors.get()
    assert record.status == Status.SUPERSEDED
    assert (correction.status, correction.content, correction.trust) == (
        Status.ACTIVE,
        "Deploys need two approvals.",
        Trust.VERIFIED,
    )
    assert correction.source_uri == f"review://rita/corrects/{record.pk}" and correction.reviewed_by == reviewer
    assert last_history(correction).history_change_reason == "review.correct"
    assert any(str(correction.pk)[:8] in text for text in texts(response))


@pytest.mark.parametrize("content", ["   ", "x" * 4001])
def test_supersede_with_empty_or_oversized_content_changes_nothing(reviewer_client, drifting, content):
    record = drifting(days=200)
    response = reviewer_client.post(decide_url(record, "supersede"), {"version": 1, "content": content})
    assert any(text.startswith("Nothing was applied") and "Content" in text for text in texts(response))
    record.refresh_from_db()
    assert (record.status, record.version) == (Status.ACTIVE, 1)
    assert not record.successors.exists()


def test_drift_row_changed_by_an_agent_is_a_conflict(reviewer_client, drifting, credential):
    record = drifting(days=200)
    memory_confirm(record_id=record.pk, expected_version=1, actor=Actor.for_credential(credential))
    response = reviewer_client.post(decide_url(record, "retire"), {"version": 1, "next": DRIFT}, follow=True)
    page = response.content.decode()
    assert "it is now active, version 2" in page and "agent.confirm" in page
    record.refresh_from_db()
    assert record.status == Status.ACTIVE


# --- memory detail -------------------------------------------------------------------------------


def test_detail_shows_fields_chain_derivations_and_history(reviewer_client, reviewer_actor, write, credential):
    original = write(kind="semantic", content="Plan is Basic.")
    memory_confirm(record_id=original.pk, expected_version=1, actor=reviewer_actor, note="called them")
    correction = memory_supersede(record_id=original.pk, expected_version=2, actor=reviewer_actor, content="Plan is Enterprise.")
    summary = write(
        kind="semantic",
        content="Summary of the plan.",
        authority="agent",
        provenance={"source_type": "agent_inference"},
        derived_from=[str(original.pk)],
    )
    page = reviewer_client.get(detail_url(original)).content.decode()
    for fact in (
        "Plan is Basic.",
        original.content_hash,
        "chat://session/s-1",
        "superseded",
        "version 3",
        str(correction.pk)[:8],
        "Plan is Enterprise.",
        str(summary.pk)[:8],
        "write.active",
        "review.confirm",
        "called them",
        "review.supersede",
        "agent:acme/support-bot",
        "<strong>trust</strong>: trusted → verified",
        "<strong>status</strong>: active → superseded",
        "<strong>reviewed_by</strong>: — → rita",
    ):
        assert fact in page, fact
    later = reviewer_client.get(detail_url(correction)).content.decode()
    assert str(original.pk)[:8] in later and "Plan is Basic." in later  # the chain, the other way
    derived = reviewer_client.get(detail_url(summary)).content.decode()
    assert "Derived from" in derived and str(original.pk)[:8] in derived
    assert f"from user_turn {original.source_uri}" in derived  # the union of the sources' provenance


def test_detail_offers_the_actions_that_apply(reviewer_client, quarantined, write):
    waiting, active = quarantined(), write()
    waiting_page = reviewer_client.get(detail_url(waiting)).content.decode()
    active_page = reviewer_client.get(detail_url(active)).content.decode()
    assert decide_url(waiting, "approve") in waiting_page and decide_url(waiting, "confirm") not in waiting_page
    assert decide_url(active, "confirm") in active_page and decide_url(active, "supersede") in active_page
    assert decide_url(active, "approve") not in active_page


def test_forgotten_record_never_shows_its_content_not_even_in_history(reviewer_client, reviewer_actor, tenant, write):
    record = write(subject="customer/jane", content="Jane's phone is 555-0100.")
    memory_confirm(record_id=record.pk, expected_version=1, actor=reviewer_actor)
    forget_request_create(actor=reviewer_actor, tenant=tenant, subject="customer/jane", reason="erasure #1")
    # what propagation does to storage later: the content is blanked, and history records that change
    record.refresh_from_db()
    record.content, record._change_reason = "", "job.propagate_forgets"
    record.save()
    response = reviewer_client.get(detail_url(record))
    page = response.content.decode()
    assert response.status_code == 200
    assert "Jane's phone" not in page and "555-0100" not in page
    assert record.history.filter(content__contains="555-0100").exists()  # the test would catch a leak
    assert "review.forget" in page and "job.propagate_forgets" in page
    assert "(hidden: the memory is forgotten)" in page


# --- forget requests -----------------------------------------------------------------------------


def test_forget_request_is_filed_only_after_confirmation(reviewer_client, write, credential):
    first, second = write(subject="customer/jane"), write(subject="customer/jane")
    keep = write(subject="customer/john")
    form = {"tenant": "acme", "subject": "customer/jane", "reason": "erasure request #123"}
    preview = reviewer_client.post(reverse("review:forget_new"), form)
    assert preview.status_code == 200
    assert preview.context["record_count"] == 2
    assert b'name="step" value="confirm"' in preview.content
    assert ForgetRequest.objects.count() == 0 and not MemoryRecord.objects.filter(status=Status.FORGOTTEN).exists()
    response = reviewer_client.post(reverse("review:forget_new"), {**form, "step": "confirm"})
    forget_request = ForgetRequest.objects.get()
    assert response["Location"] == reverse("review:forget_detail", args=[forget_request.pk])
    assert (forget_request.affected, forget_request.requested_by, forget_request.reason) == (
        2,
        "user:rita",
        "erasure request #123",
    )
    assert set(MemoryRecord.objects.filter(status=Status.FORGOTTEN).values_list("pk", flat=True)) == {first.pk, second.pk}
    keep.refresh_from_db()
    assert keep.status == Status.ACTIVE


def test_forget_step_edit_goes_back_to_the_form(reviewer_client, write):
    response = reviewer_client.post(
        reverse("review:forget_new"), {"tenant": "acme", "subject": "customer/jane", "reason": "r", "step": "edit"}
    )
    assert response.templates[0].name == "review/forget_new.html"
    assert b'value="customer/jane"' in response.content
    assert ForgetRequest.objects.count() == 0


@pytest.mark.parametrize(
    "form, field",
    [
        ({"tenant": "acme", "subject": "  ", "reason": "r", "step": "confirm"}, "subject"),
        ({"tenant": "acme", "subject": "customer/jane", "reason": "", "step": "confirm"}, "reason"),
        ({"tenant": "acme", "subject": "s" * 201, "reason": "r", "step": "confirm"}, "subject"),
    ],
)
def test_bad_forget_request_is_explained_and_changes_nothing(reviewer_client, write, form, field):
    record = write(subject="customer/jane")
    response = reviewer_client.post(reverse("review:forget_new"), form)
    assert response.status_code == 400
    assert response.context["form"].errors[field]
    assert ForgetRequest.objects.count() == 0
    record.refresh_from_db()
    assert record.status == Status.ACTIVE


def test_forget_request_for_another_tenant_is_404(reviewer_client, other_tenant, make_credential, write):
    theirs = write(credential_=make_credential(other_tenant), subject="customer/jane")
    for step in ("", "confirm"):
        response = reviewer_client.post(
            reverse("review:forget_new"), {"tenant": "globex", "subject": "customer/jane", "reason": "r", "step": step}
        )
        assert response.status_code == 404
    theirs.refresh_from_db()
    assert theirs.status == Status.ACTIVE and ForgetRequest.objects.count() == 0


def test_forget_list_and_detail_show_receipts_in_scope(reviewer_client, tenant, other_tenant, reviewer_actor, write):
    write(subject="customer/jane")
    mine = forget_request_create(actor=reviewer_actor, tenant=tenant, subject="customer/jane", reason="erasure #7")
    PropagationReceipt.objects.create(forget_request=mine, artifact="search_index", removed=1, completed_at=timezone.now())
    PropagationReceipt.objects.create(
        forget_request=mine, artifact="backups", removed=0, completed_at=timezone.now(), note="ages out of backups by 2027-01-03"
    )
    theirs = forget_request_create(actor=Actor.job("test"), tenant=other_tenant, subject="customer/other", reason="x")
    listing = reviewer_client.get(reverse("review:forget_list")).content.decode()
    assert "customer/jane" in listing and "customer/other" not in listing
    detail = reviewer_client.get(reverse("review:forget_detail", args=[mine.pk])).content.decode()
    for fact in ("search_index", "backups", "ages out of backups by 2027-01-03", "erasure #7", "propagating"):
        assert fact in detail, fact
    assert reviewer_client.get(reverse("review:forget_detail", args=[theirs.pk])).status_code == 404


# --- home ----------------------------------------------------------------------------------------


def test_home_shows_queue_sizes_oldest_ages_and_last_job_runs(
    reviewer_client, quarantined, drifting, tenant, other_tenant, make_credential, write, reviewer_actor
):
    old = quarantined()
    MemoryRecord.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(days=3))
    quarantined()
    drifting(days=200)
    write(credential_=make_credential(other_tenant), **_web())  # not this reviewer's
    forget_request_create(actor=reviewer_actor, tenant=tenant, subject="customer/nobody", reason="r")
    now = timezone.now()
    JobRun.objects.create(
        job="expire", status="failed", started_at=now - timedelta(hours=2), finished_at=now - timedelta(hours=2)
    )
    JobRun.objects.create(job="expire", status="succeeded", started_at=now - timedelta(minutes=5), finished_at=now)
    response = reviewer_client.get(HOME)
    queues = {queue["name"]: queue for queue in response.context["queues"]}
    assert {name: queue["size"] for name, queue in queues.items()} == {
        "Quarantine": 2,
        "Drift": 1,
        "Forget requests": 1,
        "Dedup proposals": 0,
    }
    assert queues["Quarantine"]["oldest"] < now - timedelta(days=2)
    runs = {item["job"]: item["run"] for item in response.context["job_runs"]}
    assert runs["expire"].status == "succeeded" and runs["prune"] is None
    page = response.content.decode()
    assert "3\xa0days ago" in page and "has not run yet" in page


# --- query counts --------------------------------------------------------------------------------


def _queries_for(client, url) -> int:
    with CaptureQueriesContext(connection) as captured:
        assert client.get(url).status_code == 200
    return len(captured)


def test_queue_pages_use_a_constant_number_of_queries(reviewer_client, quarantined, drifting):
    def fill(count):
        for n in range(count):
            record = quarantined(content=f"Quarantined claim {n}.")
            source = drifting(days=100 + n)
            if n % 2:  # a derived record lists its sources: still no query per row
                record.derived_from.add(source)

    fill(10)
    small = {url: _queries_for(reviewer_client, url) for url in (QUARANTINE, DRIFT, HOME)}
    fill(190)
    assert MemoryRecord.objects.filter(status=Status.QUARANTINED).count() == 200
    assert MemoryRecord.objects.filter(status=Status.ACTIVE).count() == 200
    large = {url: _queries_for(reviewer_client, url) for url in (QUARANTINE, DRIFT, HOME)}
    assert large == small
