"""A form post past Django's upload limits (DATA_UPLOAD_MAX_NUMBER_FIELDS: e.g. a quarantine bulk
decision naming thousands of memories, two fields each; DATA_UPLOAD_MAX_NUMBER_FILES;
DATA_UPLOAD_MAX_MEMORY_SIZE) answered with a page that says what happened and that nothing was
applied, and a warning log line. Left to Django, the limit surfaces wherever the form is first
read (the CSRF check) and is logged as an ERROR by django.security with a bare "Bad Request".

The form is read here exactly where the CSRF check would read it: POSTs to views that are not
CSRF-exempt (the API's views are exempt and answer their own limits as problems)."""

import logging

from django.conf import settings
from django.core.exceptions import RequestDataTooBig, TooManyFieldsSent, TooManyFilesSent
from django.http import UnreadablePostError
from django.shortcuts import render
from django.utils.http import url_has_allowed_host_and_scheme

logger = logging.getLogger("governed_memory.request")


class FormLimitMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_view(self, request, view_func, view_args, view_kwargs):
        if request.method != "POST" or getattr(view_func, "csrf_exempt", False):
            return None
        try:
            request.POST  # noqa: B018 - parsed once, here; the CSRF check and the view reuse it
        except TooManyFieldsSent:
            status, message = (
                400,
                (
                    f"The form sent more than {settings.DATA_UPLOAD_MAX_NUMBER_FIELDS} fields; each "
                    "memory selected for a bulk decision sends two. Select fewer at a time (a page "
                    "of the queue) and try again."
                ),
            )
        except TooManyFilesSent:
            status, message = 400, f"The form sent more than {settings.DATA_UPLOAD_MAX_NUMBER_FILES} files."
        except RequestDataTooBig:
            status, message = 413, f"The form sent more than {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes."
        except UnreadablePostError:
            return None  # the client went away mid-body: the CSRF check refuses the post, as before
        else:
            return None
        logger.warning(
            "form over the upload limits",
            extra={"event": "form_limit", "method": request.method, "path": request.path, "status": status},
        )
        back = request.headers.get("Referer")
        if not url_has_allowed_host_and_scheme(back, allowed_hosts={request.get_host()}, require_https=request.is_secure()):
            back = None
        return render(request, "400.html", {"message": message, "back": back}, status=status)
