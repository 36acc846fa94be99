"""Login throttling around django-axes (settings: "Login throttling"): the authentication backend
that refuses a locked-out login, the client address it counts by, and the page a locked-out
person sees: the login page they used (the reviewer's or the admin's) with a message, status 429
and Retry-After."""

import ipaddress
import math

from axes.backends import AxesStandaloneBackend
from axes.helpers import get_cool_off
from django.conf import settings
from django.contrib.auth.forms import AuthenticationForm
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse

LOGIN_TEMPLATE = "registration/login.html"


class LoginThrottleBackend(AxesStandaloneBackend):
    """Axes' check, for logins that come with a request. Both login pages (Django's LoginView,
    the admin's) pass theirs; a call without one is no web login (the test client's login(), a
    shell) and has no address to count, so it goes on to the password check instead of failing."""

    def authenticate(self, request: HttpRequest | None, username=None, password=None, **kwargs):
        if request is None:
            return None
        return super().authenticate(request, username=username, password=password, **kwargs)


def client_ip(request: HttpRequest) -> str | None:
    """The address a login is counted under: REMOTE_ADDR, or behind LOGIN_PROXY_COUNT proxies
    (each appends the address it was reached from to X-Forwarded-For) the entry the outermost one
    appended, which a client cannot forge. A header that does not fit falls back to REMOTE_ADDR."""
    hops = settings.LOGIN_PROXY_COUNT
    if hops:
        forwarded = [part.strip() for part in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if part.strip()]
        if len(forwarded) >= hops:
            try:
                return str(ipaddress.ip_address(forwarded[-hops]))
            except ValueError:
                pass
    return request.META.get("REMOTE_ADDR")


def lockout_message(minutes: int) -> str:
    return (
        f"Too many failed log-ins for this account or from this address. Logging in is paused for {minutes} "
        f"minute{'s' if minutes != 1 else ''} after the last attempt; try again then, or ask an admin to lift it."
    )


def lockout_response(request: HttpRequest, original_response: HttpResponse | None = None, credentials=None) -> HttpResponse:
    """AXES_LOCKOUT_CALLABLE: the login page that refused the attempt, its form's errors replaced
    by the lockout message (so the username stays filled in), with status 429 and Retry-After."""
    seconds = max(1, math.ceil(get_cool_off(request).total_seconds()))
    message = lockout_message(math.ceil(seconds / 60))
    context = dict(getattr(original_response, "context_data", None) or {})
    form = context.get("form")
    template_name = getattr(original_response, "template_name", None)  # a TemplateResponse's
    if isinstance(form, AuthenticationForm) and template_name:
        template = template_name
    else:  # not from a login page: the reviewer login, its form bound to nothing (no password check runs)
        template, form = LOGIN_TEMPLATE, AuthenticationForm(request, data={})
        context = {"form": form, "next": ""}
    form.errors.clear()
    form.add_error(None, message)
    response = TemplateResponse(request, template, context, status=429)
    response["Retry-After"] = str(seconds)
    return response.render()
