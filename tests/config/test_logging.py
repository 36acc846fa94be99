"""Error log lines: one JSON line each, carrying the method and path but never the query string
(filter values such as a subject) or the exception's message; Django's own plain-text console
handler and admin mails are gone."""

import json
import logging

import pytest
from django.conf import settings
from django.test import Client
from django.urls import path
from django.utils.module_loading import import_string
from rest_framework.permissions import AllowAny
from rest_framework.views import APIView

from config.urls import urlpatterns as app_urlpatterns
from tests.api.test_logs import json_log  # noqa: F401  (fixture: every log record, through the JSON handler)

pytestmark = pytest.mark.django_db

CANARY = "canary-xyz-subject"


def failing_page(request):
    raise ValueError(f"Failing row contains ({CANARY})")


class FailingEndpoint(APIView):
    permission_classes = [AllowAny]

    def get(self, request):
        raise ValueError(f"Failing row contains ({CANARY})")


# The app's URLs plus two views that fail: a page (Django's 500 path) and an API view (DRF's).
urlpatterns = [path("boom/", failing_page), path("api/v1/boom/", FailingEndpoint.as_view()), *app_urlpatterns]


def handlers_reached_from(name: str) -> list[logging.Handler]:
    logger, handlers = logging.getLogger(name), []
    while logger:
        handlers += [h for h in logger.handlers if not type(h).__module__.startswith("_pytest")]  # pytest's capture
        logger = logger.parent if logger.propagate else None
    return handlers


def test_django_request_errors_reach_only_the_json_handler():
    json_formatter = import_string(settings.LOGGING["formatters"]["json"]["()"])
    for name in ("django.request", "django.security.DisallowedHost", "django"):
        handlers = handlers_reached_from(name)
        assert len(handlers) == 1 and isinstance(handlers[0].formatter, json_formatter), (name, handlers)


@pytest.mark.parametrize("debug", [False, True])
def test_error_lines_carry_the_path_but_not_the_query_string(json_log, settings, debug):  # noqa: F811
    # through the settings fixture, which restores it (override_settings as a decorator beside the
    # fixture left this module as every later test's URLconf)
    settings.ROOT_URLCONF = __name__
    settings.DEBUG = debug  # DEBUG used to add a plain-text line with the message and traceback
    client = Client(raise_request_exception=False)
    query = {"subject": CANARY, "kind": "preference"}
    assert client.get("/boom/", query).status_code == 500
    assert client.get("/api/v1/boom/", query).status_code == 500
    assert client.get("/api/v1/no-such-endpoint/", query).status_code == 404
    assert client.get("/no-such-page/", query).status_code == 404
    assert client.get("/api/v1/memories/", query).status_code == 401

    output = json_log.getvalue()
    assert CANARY not in output
    lines = [json.loads(line) for line in output.splitlines()]  # every line is JSON
    errors = [line for line in lines if line["logger"] == "django.request"]
    assert [(e["method"], e["path"], e["status_code"]) for e in errors] == [("GET", "/boom/", 500), ("GET", "/api/v1/boom/", 500)]
    assert all("request" not in e and e["request_id"] for e in errors)
    assert errors[0]["exception_type"] == "ValueError"
    requests = [line for line in lines if line.get("event") == "request"]
    assert [r["path"] for r in requests] == [
        "/boom/",
        "/api/v1/boom/",
        "/api/v1/no-such-endpoint/",
        "/no-such-page/",
        "/api/v1/memories/",
    ]
