"""What every reviewer page shares: the access check that gives a view its scoped Actor, page
rendering, safe redirects and a few message helpers."""

from functools import wraps

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import NoReverseMatch, reverse
from django.utils import timezone
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import ngettext

from memory.actors import Actor

SHORT_ID = 8


def reviewer_required(view):
    """Logged in (else to the login page) and a reviewer of at least one tenant (else 403). The
    resulting Actor, scoped to the reviewer's tenants, is `request.actor` for the view."""

    @login_required
    @wraps(view)
    def wrapper(request: HttpRequest, *args, **kwargs) -> HttpResponse:
        actor = Actor.for_user(request.user)
        if actor.tenant_ids is not None and not actor.tenant_ids:
            raise PermissionDenied("Your account is not a reviewer of any tenant.")
        request.actor = actor
        return view(request, *args, **kwargs)

    return wrapper


def render_page(request: HttpRequest, template: str, context: dict, *, status: int = 200) -> HttpResponse:
    # `now` lets templates tell past from future times ("3 days ago" / "in 5 days").
    return render(request, template, {"now": timezone.now(), **context}, status=status)


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


def form_problem(form) -> str:
    """The form's errors as one sentence for a message: "Version: Enter a whole number."."""
    parts = []
    for name, errors in form.errors.items():
        label = form[name].label if name in form.fields else "Form"
        parts.append(f"{label}: {' '.join(errors)}")
    return "; ".join(parts)
