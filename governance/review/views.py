"""The reviewer UI: server-rendered pages where human reviewers decide on quarantined memories,
re-check drifting ones, read a memory's full history and file forget requests.

Pages are thin. Reads start from `memory.selectors` (scoped to the tenants the reviewer is
assigned to) and the shared `MemoryRecordFilter`; every change goes through `memory.services` or
`governance.forget.services` with the reviewer as actor, at the version the reviewer saw. Anything
outside the reviewer's scope is a 404, so existence does not leak. GET never changes state.
"""

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from itertools import pairwise
from typing import TYPE_CHECKING, cast

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import get_user_model
from django.db.models import Count, Prefetch, QuerySet
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import ngettext
from django.views.decorators.http import require_POST

from governance.alerts.selectors import open_alerts
from governance.dedup.selectors import lineage_provenance, superseded_sources, superseded_sources_by_record
from governance.forget.selectors import forget_requests_in_scope
from governance.forget.services import forget_request_create
from governance.jobs.selectors import last_job_runs
from governance.review import asof
from governance.review.common import (
    ReviewerRequest,
    form_problem,
    memories,
    optional_url,
    page_of,
    render_page,
    replica_page,
    reviewer_required,
    safe_next,
    short_id,
    with_how_started,
)
from governance.review.forms import BulkDecisionForm, DecisionForm, ForgetRequestForm, SupersedeForm, TamperedSelection
from governance.review.selectors import queue_stats
from governance.revocations.models import Revocation
from governance.revocations.selectors import records_of, revocation_from_query
from memory.actors import Actor
from memory.errors import Conflict, RecordNotFound, StaleVersion, ValidationFailed
from memory.filters import MemoryRecordFilter
from memory.fingerprints import records_about
from memory.models import SIGNED_BY, TRANSITIONS, Agent, Authority, MemoryKind, MemoryRecord, SourceType, Status
from memory.risk import FLAGGED, flagged_first, risk_reasons
from memory.selectors import drift_queue, quarantine_queue, records_in_scope, tenants_in_scope, unused_cutoff
from memory.services import memory_confirm, memory_promote, memory_reject, memory_retire, memory_supersede

if TYPE_CHECKING:
    from governance.review.common import RecordWithLastChange

QUARANTINE_PAGE_SIZE = 25
# The filters a queue offers; the rest of the FilterSet (status, ordering, ...) would fight the
# queue's own definition and order, so it is not passed through.
QUEUE_FILTERS = ("tenant", "agent", "kind", "authority", "source_type")
CHAIN_LIMIT = 50  # supersession steps walked each way on the detail page
CHANGED_SESSION_KEY = "review_changed"  # ids of records a conflict reported, shown fresh once


@dataclass(frozen=True)
class Action:
    service: Callable[..., MemoryRecord]
    done: str  # past tense for the success message
    form: type[DecisionForm]


# URL action name -> lifecycle service. "approve" is what a reviewer clicks; the service is promote.
ACTIONS: dict[str, Action] = {
    "approve": Action(memory_promote, "approved", DecisionForm),
    "reject": Action(memory_reject, "rejected", DecisionForm),
    "confirm": Action(memory_confirm, "confirmed", DecisionForm),
    "retire": Action(memory_retire, "retired", DecisionForm),
    "supersede": Action(memory_supersede, "corrected", SupersedeForm),
}
# Which actions the detail page offers for a record in each status.
ACTIONS_FOR_STATUS: dict[str, tuple[str, ...]] = {Status.QUARANTINED: ("approve", "reject"), Status.ACTIVE: ("confirm", "retire")}


# ------------------------------------------------------------------------------------------------
# access


# ------------------------------------------------------------------------------------------------
# home


@dataclass(frozen=True)
class QueueTile:
    """How the home page and the dashboard present a queue of governance.review.selectors.queue_stats."""

    name: str
    singular: str  # what one item is: "quarantined memory waiting for a decision"
    plural: str
    oldest_label: str  # what the oldest item's time is: "oldest written"
    url_name: str

    def what(self, count: int) -> str:
        return ngettext(self.singular, self.plural, count)


QUEUE_TILES = {
    "quarantine": QueueTile(
        "Quarantine",
        "quarantined memory waiting for a decision",
        "quarantined memories waiting for a decision",
        "oldest written",
        "review:quarantine",
    ),
    "drift": QueueTile(
        "Drift",
        "active memory overdue for a re-check",
        "active memories overdue for a re-check",
        "oldest confirmation",
        "review:drift",
    ),
    "forget": QueueTile(
        "Forget requests",
        "forget request still propagating",
        "forget requests still propagating",
        "oldest filed",
        "review:forget_list",
    ),
    "proposals": QueueTile(
        "Dedup proposals", "open duplicate proposal", "open duplicate proposals", "oldest proposed", "review:proposals"
    ),
}


@reviewer_required
def home(request: ReviewerRequest) -> HttpResponse:
    actor = request.actor
    queues = []
    for stat in queue_stats(actor):
        tile = QUEUE_TILES[stat.key]
        queues.append(
            {
                "name": tile.name,
                "what": tile.what(stat.size),
                "oldest_label": tile.oldest_label,
                "url": optional_url(tile.url_name),
                "size": stat.size,
                "oldest": stat.oldest,
            }
        )
    # Job counts are left out: they span all tenants, and a reviewer sees only theirs.
    return render_page(
        request,
        "review/home.html",
        {
            "nav": "home",
            "queues": queues,
            "job_runs": with_how_started(last_job_runs()),
            "tenants": list(tenants_in_scope(actor)),
            "alerts": list(open_alerts(actor)),
        },
    )


# ------------------------------------------------------------------------------------------------
# queues


def _queue_filter(request: HttpRequest, queue: QuerySet[MemoryRecord]) -> MemoryRecordFilter:
    data = {name: request.GET[name] for name in QUEUE_FILTERS if request.GET.get(name)}
    return MemoryRecordFilter(data, queryset=queue)


def _filter_options(actor: Actor, *, kinds: QuerySet[MemoryKind]) -> dict:
    """Choices for the filter bar: only what the reviewer's scope contains."""
    tenants = tenants_in_scope(actor)
    return {
        "tenants": list(tenants.values_list("slug", flat=True)),
        "agents": list(Agent.objects.filter(tenant__in=tenants).order_by("slug").values_list("slug", flat=True).distinct()),
        "kinds": list(kinds.values_list("name", flat=True)),
        "authorities": Authority.choices,
        "source_types": SourceType.choices,
    }


def _queue_rows(filterset: MemoryRecordFilter) -> QuerySet[MemoryRecord]:
    """The filtered queue with everything a row shows, in a constant number of queries. A filter
    that does not validate shows its message and no rows, rather than silently an unfiltered queue."""
    if not filterset.is_valid():
        return filterset.queryset.none()
    sources = Prefetch("derived_from", queryset=MemoryRecord.objects.only("id", "status").order_by("created_at"))
    return filterset.qs.select_related("tenant", "agent", "kind", SIGNED_BY).prefetch_related(sources)


def _pop_changed(request: HttpRequest, actor: Actor) -> "list[RecordWithLastChange]":
    """Records a conflict was just reported for, fresh from the database, with their last change."""
    ids = request.session.pop(CHANGED_SESSION_KEY, [])
    if not ids:
        return []
    records = cast(
        "list[RecordWithLastChange]",
        list(records_in_scope(actor).filter(pk__in=ids).select_related("tenant", "agent", "kind", "reviewed_by", SIGNED_BY)),
    )
    last_change: dict[uuid.UUID, object] = {}
    for row in MemoryRecord.history.filter(id__in=[r.pk for r in records]).order_by("-history_date", "-history_id"):
        last_change.setdefault(row.id, row)
    for record in records:
        record.last_change = last_change.get(record.pk)
    return records


@reviewer_required
@replica_page
def quarantine(request: ReviewerRequest) -> HttpResponse:
    actor = request.actor
    queue = quarantine_queue(actor)
    # ?revocation=<id>: only what that revocation sent back; ?order=flagged: risk-flagged first.
    try:
        revocation = revocation_from_query(actor, request.GET.get("revocation"))
    except Revocation.DoesNotExist as exc:
        raise Http404("No such revocation.") from exc
    if revocation is not None:
        queue = queue.filter(pk__in=records_of(revocation))
    filterset = _queue_filter(request, queue)
    flagged = request.GET.get("order") == "flagged"
    rows = flagged_first(_queue_rows(filterset)) if flagged else _queue_rows(filterset)
    page = page_of(request, rows, QUARANTINE_PAGE_SIZE)
    # A summary whose sources were superseded since may no longer hold: say so on its row (one
    # query for the whole page).
    stale_sources = superseded_sources_by_record([record.pk for record in page.object_list]) if page.object_list else {}
    for record in page.object_list:
        record.superseded_source_ids = stale_sources.get(record.pk, [])
        record.risks = risk_reasons(record.risk_flags)
    return render_page(
        request,
        "review/quarantine.html",
        {
            "nav": "quarantine",
            "page": page,
            "filterset": filterset,
            "options": _filter_options(actor, kinds=MemoryKind.objects.all()),
            "changed": _pop_changed(request, actor),
            "revocation": revocation,
            "flagged_first": flagged,
            "flagged_count": filterset.qs.filter(FLAGGED).count() if filterset.is_valid() else 0,
        },
    )


@reviewer_required
@replica_page
def drift(request: ReviewerRequest) -> HttpResponse:
    actor = request.actor
    now = timezone.now()
    filterset = _queue_filter(request, drift_queue(actor, now=now))
    page = page_of(request, _queue_rows(filterset), settings.MEMORY_DRIFT_BATCH)
    cutoff = unused_cutoff(settings.MEMORY_UNUSED_AFTER_DAYS, now=now)
    for record in page.object_list:
        record.deletion_candidate = _unused_since(record, cutoff)
    return render_page(
        request,
        "review/drift.html",
        {
            "nav": "drift",
            "page": page,
            "filterset": filterset,
            "unused_days": settings.MEMORY_UNUSED_AFTER_DAYS,
            "max_content_chars": settings.MEMORY_MAX_CONTENT_CHARS,
            "options": _filter_options(actor, kinds=MemoryKind.objects.filter(review_interval__isnull=False)),
            "changed": _pop_changed(request, actor),
        },
    )


def _unused_since(record: MemoryRecord, cutoff: datetime) -> bool:
    """Not recalled since the cutoff (or never, and older than it): a candidate for deletion."""
    if record.last_used_at is None:
        return record.created_at < cutoff
    return record.last_used_at < cutoff


# ------------------------------------------------------------------------------------------------
# decisions


def _report_conflicts(request: HttpRequest, actor: Actor, conflicts: Sequence[tuple[uuid.UUID, Exception]]) -> None:
    """Say clearly that nothing was applied to records that moved on, and keep their ids so the
    next page shows them fresh."""
    if not conflicts:
        return
    fresh = records_in_scope(actor).in_bulk([record_id for record_id, _ in conflicts])
    for record_id, error in conflicts:
        record = fresh.get(record_id)
        if isinstance(error, StaleVersion) and record is not None:
            why = f"it changed after your page loaded (it is now {record.status}, version {record.version})."
        else:
            why = getattr(error, "detail", "it is no longer in your queue.")
        messages.warning(
            request, f"Not applied to memory {short_id(record_id)}: {why} Nothing was changed; its current state is shown below."
        )
    request.session[CHANGED_SESSION_KEY] = [str(record_id) for record_id, _ in conflicts]


@reviewer_required
@require_POST
def memory_decide(request: ReviewerRequest, pk: uuid.UUID, action: str) -> HttpResponse:
    """Apply one decision (approve, reject, confirm, retire, supersede) at the version seen."""
    spec = ACTIONS.get(action)
    if spec is None:
        raise Http404("No such action.")
    actor = request.actor
    record = get_object_or_404(records_in_scope(actor), pk=pk)
    back = safe_next(request, default=reverse("review:memory_detail", args=[pk]))
    form = spec.form(request.POST)
    if not form.is_valid():
        messages.error(request, f"Nothing was applied to memory {short_id(pk)}. {form_problem(form)}")
        return redirect(back)
    arguments = {
        "record_id": pk,
        "expected_version": form.cleaned_data["version"],
        "actor": actor,
        "note": form.cleaned_data["note"],
    }
    if action == "supersede":
        arguments["content"] = form.cleaned_data["content"]
    try:
        result = spec.service(**arguments)
    except RecordNotFound as exc:
        raise Http404("No such memory.") from exc
    except Conflict as exc:  # StaleVersion, InvalidTransition
        _report_conflicts(request, actor, [(pk, exc)])
        return redirect(back)
    except ValidationFailed as exc:
        details = " ".join(message for messages_ in exc.errors.values() for message in messages_)
        messages.error(request, f"Nothing was applied to memory {short_id(pk)}: {exc.detail} {details}".strip())
        return redirect(back)
    if action == "supersede":
        messages.success(request, f"Memory {short_id(pk)} ({record.subject}) corrected: the new memory is {short_id(result.pk)}.")
    else:
        messages.success(request, f"Memory {short_id(pk)} ({record.subject}) {spec.done}.")
    return redirect(back)


@reviewer_required
@require_POST
def quarantine_bulk(request: ReviewerRequest) -> HttpResponse:
    """Approve or reject the selected rows one by one, each at the version its row showed;
    report how many were applied and which ones had moved on."""
    actor = request.actor
    back = safe_next(request, default=reverse("review:quarantine"))
    form = BulkDecisionForm(request.POST)
    try:
        items = form.selected_items()
    except TamperedSelection as exc:
        raise Http404("No such memory.") from exc
    if not form.is_valid():
        messages.error(request, f"Nothing was applied. {form_problem(form)}")
        return redirect(back)
    if not items:
        messages.error(request, "Nothing was applied: select at least one memory first.")
        return redirect(back)
    ids = [record_id for record_id, _ in items]
    if records_in_scope(actor).filter(pk__in=ids).count() != len(ids):
        raise Http404("No such memory.")
    without_version = [record_id for record_id, version in items if version is None]
    if without_version:
        messages.error(
            request,
            "Nothing was applied: the selection is missing the version of memory "
            f"{', '.join(short_id(i) for i in without_version)}. Reload the page and try again.",
        )
        return redirect(back)
    decision = form.cleaned_data["decision"]
    spec = ACTIONS[decision]
    applied, conflicts = 0, []
    for record_id, version in items:
        try:
            spec.service(record_id=record_id, expected_version=version, actor=actor, note=form.cleaned_data["note"])
        except (Conflict, RecordNotFound) as exc:
            conflicts.append((record_id, exc))
        else:
            applied += 1
    if applied:
        messages.success(request, f"{memories(applied)} {spec.done}.")
    _report_conflicts(request, actor, conflicts)
    return redirect(back)


# ------------------------------------------------------------------------------------------------
# memory detail


@dataclass
class HistoryEntry:
    row: object  # a HistoricalMemoryRecord
    transition: str
    changes: list[tuple[str, str, str]]  # (field, before, after), display strings
    quarantined_because: str = ""  # the reason, on the row that put the record in quarantine


# Fields whose values are the content or derived from it: hidden for forgotten records.
CONTENT_FIELDS = frozenset({"content", "content_hash"})
HIDDEN = "(hidden: the memory is forgotten)"


@reviewer_required
@replica_page
def memory_detail(request: ReviewerRequest, pk: uuid.UUID) -> HttpResponse:
    actor = request.actor
    scope = records_in_scope(actor)
    record = get_object_or_404(scope.select_related("tenant", "agent", "kind", "reviewed_by", "supersedes", SIGNED_BY), pk=pk)
    earlier, later = _supersession_chain(scope, record)
    supersede_form = None
    if record.status == Status.ACTIVE:
        supersede_form = SupersedeForm(initial={"version": record.version, "content": record.content})
    return render_page(
        request,
        "review/memory_detail.html",
        {
            "nav": "",
            "record": record,
            "earlier": earlier,
            "later": later,
            "derived_from": lineage_provenance(record),
            "derivatives": list(scope.filter(derived_from=record).select_related("kind").order_by("created_at")),
            "superseded_sources": list(superseded_sources(record)),
            "forget_requests": list(record.forget_requests.filter(tenant__in=tenants_in_scope(actor))),
            "history": _history_timeline(record),
            "state_at": asof.state_at(request, record),
            "actions": ACTIONS_FOR_STATUS.get(record.status, ()),
            "supersede_form": supersede_form,
            # Expiry and the review interval concern only records still in play: a forgotten,
            # superseded or rejected memory will neither expire nor be re-checked.
            "expiry_pending": record.status in TRANSITIONS["expire"][0],
            "review_due": record.status in TRANSITIONS["confirm"][0],
        },
    )


def _supersession_chain(scope: QuerySet[MemoryRecord], record: MemoryRecord) -> tuple[list[MemoryRecord], list[MemoryRecord]]:
    """Records this one corrects (nearest first) and records that correct it (in order)."""
    earlier: list[MemoryRecord] = []
    current = record.supersedes
    while current is not None and len(earlier) < CHAIN_LIMIT and current.pk != record.pk:
        earlier.append(current)
        current = (
            scope.select_related("kind", "supersedes").filter(pk=current.supersedes_id).first() if current.supersedes_id else None
        )
    later: list[MemoryRecord] = []
    frontier = [record.pk]
    seen = {record.pk}
    while frontier and len(later) < CHAIN_LIMIT:
        step = [
            r for r in scope.filter(supersedes_id__in=frontier).select_related("kind").order_by("created_at") if r.pk not in seen
        ]
        later.extend(step)
        seen.update(r.pk for r in step)
        frontier = [r.pk for r in step]
    return earlier, later


def _history_timeline(record: MemoryRecord) -> list[HistoryEntry]:
    """Every history row, oldest first, with what changed against the row before. Content (and
    its hash) of a forgotten record is never shown, in any row."""
    rows = list(record.history.select_related("history_user").order_by("history_date", "history_id"))
    changes_by_row = []
    user_ids: set[int] = set()
    for previous, row in pairwise([None, *rows]):
        changes = row.diff_against(previous).changes if previous is not None else []
        changes_by_row.append(changes)
        user_ids.update(
            value for change in changes if change.field == "reviewed_by" for value in (change.old, change.new) if value
        )
    usernames = dict(get_user_model().objects.filter(pk__in=user_ids).values_list("pk", "username")) if user_ids else {}

    def show(field: str, value) -> str:
        if record.is_forgotten and field in CONTENT_FIELDS:
            return HIDDEN
        if value is None or value == "":
            return "—"
        if field == "reviewed_by":
            return usernames.get(value, f"user #{value}")
        if isinstance(value, datetime):
            return value.strftime("%Y-%m-%d %H:%M:%S %Z")
        return str(value)

    timeline = []
    for previous, row, changes in zip([None, *rows], rows, changes_by_row, strict=False):
        transition = row.history_change_reason or {"+": "created", "~": "changed", "-": "deleted"}.get(row.history_type, "")
        shown = [(change.field, show(change.field, change.old), show(change.field, change.new)) for change in changes]
        entered_quarantine = row.status == Status.QUARANTINED and (previous is None or previous.status != Status.QUARANTINED)
        timeline.append(
            HistoryEntry(
                row=row,
                transition=transition,
                # A change that reads the same before and after (times apart by less than the second
                # shown, say) is no change to a reader: left out. Hidden content still says it changed.
                changes=[(field, before, after) for field, before, after in shown if before != after or before == HIDDEN],
                quarantined_because=row.quarantine_reason if entered_quarantine else "",
            )
        )
    return timeline


# ------------------------------------------------------------------------------------------------
# forget requests


@reviewer_required
@replica_page
def forget_list(request: ReviewerRequest) -> HttpResponse:
    requests_ = forget_requests_in_scope(request.actor).annotate(receipt_count=Count("receipts")).order_by("-requested_at")
    page = page_of(request, requests_)
    return render_page(request, "review/forget_list.html", {"nav": "forget", "page": page})


@reviewer_required
@replica_page
def forget_detail(request: ReviewerRequest, pk: uuid.UUID) -> HttpResponse:
    forget_request = get_object_or_404(forget_requests_in_scope(request.actor), pk=pk)
    return render_page(
        request,
        "review/forget_detail.html",
        {
            "nav": "forget",
            "forget_request": forget_request,
            "receipts": list(forget_request.receipts.all()),
        },
    )


@reviewer_required
def forget_new(request: ReviewerRequest) -> HttpResponse:
    """Three steps: the form (GET), a confirmation page naming what will be forgotten (POST), and
    the forget itself (POST with step=confirm). Only the last one changes anything."""
    actor = request.actor
    tenants = tenants_in_scope(actor)
    if request.method != "POST":
        return render_page(request, "review/forget_new.html", {"nav": "forget", "form": ForgetRequestForm(tenants=tenants)})
    form = ForgetRequestForm(request.POST, tenants=tenants)
    if form.tenant_out_of_scope():
        raise Http404("No such tenant.")
    step = request.POST.get("step", "")
    if not form.is_valid() or step == "edit":
        return render_page(
            request, "review/forget_new.html", {"nav": "forget", "form": form}, status=200 if form.is_valid() else 400
        )
    tenant, subject, reason = form.cleaned_data["tenant"], form.cleaned_data["subject"], form.cleaned_data["reason"]
    if step != "confirm":
        matching = records_about(records_in_scope(actor), tenant_id=tenant.pk, subject=subject).exclude(status=Status.FORGOTTEN)
        return render_page(
            request,
            "review/forget_confirm.html",
            {
                "nav": "forget",
                "form": form,
                "tenant": tenant,
                "subject": subject,
                "reason": reason,
                "record_count": matching.count(),
            },
        )
    try:
        forget_request = forget_request_create(actor=actor, tenant=tenant, subject=subject, reason=reason)
    except ValidationFailed as exc:
        for field, errors in exc.errors.items():
            for error in errors:
                form.add_error(field if field in form.fields else None, error)
        return render_page(request, "review/forget_new.html", {"nav": "forget", "form": form}, status=400)
    except RecordNotFound as exc:
        raise Http404("No such tenant.") from exc
    messages.success(
        request,
        f"Forget request filed for {subject} in {tenant.slug}: {memories(forget_request.affected)} "
        "forgotten; propagation into copies is under way.",
    )
    return redirect("review:forget_detail", pk=forget_request.pk)
