"""What every reviewer page shares: the access check that gives a view its scoped Actor, page
rendering, safe redirects and a few message helpers."""

from collections.abc import Callable
from functools import wraps
from typing import TYPE_CHECKING, Concatenate, ParamSpec, TypedDict, cast

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Page, Paginator
from django.http import HttpRequest, HttpResponse
from django.http.response import HttpResponseBase
from django.shortcuts import render
from django.urls import NoReverseMatch, reverse
from django.utils import timezone
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import ngettext

from memory import replicas
from memory.actors import Actor
from memory.api.typing import UserRequest

if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations

    from memory.models import MemoryRecord

    class _LastChange(TypedDict):
        last_change: object | None  # the record's latest history row (a HistoricalMemoryRecord)

    # A record as the pages that report a conflict show it, with what changed it last (set on the
    # instance for the template). Not a column.
    RecordWithLastChange = WithAnnotations[MemoryRecord, _LastChange]

P = ParamSpec("P")

SHORT_ID = 8
LIST_PAGE_SIZE = 25  # rows per page of the reviewer's lists


class ReviewerRequest(UserRequest):
    """A request to a reviewer page (a view behind `reviewer_required`): a logged-in user, with the
    Actor scoped to the reviewer's tenants as `actor`. Only for annotations, like UserRequest."""

    actor: Actor


def reviewer_required(
    view: Callable[Concatenate[ReviewerRequest, P], HttpResponseBase],
) -> Callable[Concatenate[HttpRequest, P], HttpResponseBase]:
    """Logged in (else to the login page) and a reviewer of at least one tenant (else 403). The
    resulting Actor, scoped to the reviewer's tenants, is `request.actor` for the view."""

    @login_required
    @wraps(view)
    def wrapper(request: HttpRequest, *args: P.args, **kwargs: P.kwargs) -> HttpResponseBase:
        # login_required let only a logged-in user through, and the actor is set just below.
        reviewer = cast(ReviewerRequest, request)
        actor = Actor.for_user(reviewer.user)
        if actor.tenant_ids is not None and not actor.tenant_ids:
            raise PermissionDenied("Your account is not a reviewer of any tenant.")
        reviewer.actor = actor
        return view(reviewer, *args, **kwargs)

    return wrapper


def replica_page(
    view: Callable[Concatenate[ReviewerRequest, P], HttpResponseBase],
) -> Callable[Concatenate[ReviewerRequest, P], HttpResponseBase]:
    """A reviewer's read page (under `reviewer_required`): a GET may be answered from a read
    replica that has replayed the reviewer's tenants' forgets and revocations and this reviewer's
    own last changes (memory.replicas); the primary otherwise."""

    @wraps(view)
    def wrapper(request: ReviewerRequest, *args: P.args, **kwargs: P.kwargs) -> HttpResponseBase:
        if request.method != "GET" or not replicas.aliases():
            return view(request, *args, **kwargs)
        return replicas.read_on_replica(
            lambda: view(request, *args, **kwargs),
            tenant_ids=request.actor.tenant_ids,
            writer=replicas.writer_key(user_id=request.user.pk),
        )

    return wrapper


def render_page(request: HttpRequest, template: str, context: dict, *, status: int = 200) -> HttpResponse:
    # `now` lets templates tell past from future times ("3 days ago" / "in 5 days").
    return render(request, template, {"now": timezone.now(), **context}, status=status)


def page_of(request: HttpRequest, rows, per_page: int = LIST_PAGE_SIZE) -> Page:
    """The page of `rows` the request asks for (`?page=`; the first, or the last if past the end)."""
    return Paginator(rows, per_page).get_page(request.GET.get("page"))


def safe_next(request: HttpRequest, default: str) -> str:
    """Where to go back after a POST: the page the form was on, if it is one of ours."""
    target = request.POST.get("next", "")
    if target and url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}, require_https=request.is_secure()):
        return target
    return default


def short_id(record_id) -> str:
    return str(record_id)[:SHORT_ID]


def memories(count: int) -> str:
    return ngettext("%(count)d memory", "%(count)d memories", count) % {"count": count}


def optional_url(name: str) -> str | None:
    """A page another part of the project may not have added yet (dedup proposals)."""
    try:
        return reverse(name)
    except NoReverseMatch:
        return None


# How a run was started, in a reviewer's words, whichever record says it: a job run's trigger
# (beat, run_job, admin, ...) or a golden run's (manual, nightly, index_change). One wording
# everywhere, so the home page and the golden page do not name the same start two ways.
HOW_STARTED = {
    "beat": "on schedule",
    "nightly": "on schedule",
    "run_job": "by command",
    "command": "by command",
    "admin": "from the admin",
    "api": "through the API",
    "restore": "after a restore",
    "manual": "on request",
    "index_change": "for an index change",
}


def how_started(trigger: str) -> str:
    return HOW_STARTED.get(trigger, trigger.replace("_", " "))


def with_how_started(job_runs: list[dict]) -> list[dict]:
    """governance.jobs.selectors.last_job_runs rows, each run with `how` (how_started of its trigger)."""
    for item in job_runs:
        if item["run"] is not None:
            item["run"].how = how_started(item["run"].trigger)
    return job_runs


def form_problem(form) -> str:
    """The form's errors as one sentence for a message: "Version: Enter a whole number."."""
    parts = []
    for name, errors in form.errors.items():
        label = form[name].label if name in form.fields else "Form"
        parts.append(f"{label}: {' '.join(errors)}")
    return "; ".join(parts)
