"""The API's only body parser: JSON, bounded and unambiguous. A body larger than API_MAX_BODY_BYTES
is a 413 before it is read; JSON nested deeper than API_MAX_JSON_DEPTH (or too deep for the
decoder) is a 400, and so is an object that names a key twice (`{"purpose": "support", "purpose":
"billing"}`): decoders disagree on which one wins (Python's takes the last), so a check that read
one and a service that read the other would each see a different request. Nothing a client sends
can make parsing itself fail with a 500."""

from django.conf import settings
from rest_framework import exceptions, status
from rest_framework.parsers import JSONParser
from rest_framework.utils import json  # strict: NaN and Infinity are refused


class PayloadTooLarge(exceptions.APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_detail = "The request body is too large."
    default_code = "payload_too_large"


def _unique_keys(pairs: list[tuple[str, object]]) -> dict:
    """object_pairs_hook: an object as a dict, refused (ValueError, so a 400) if a key comes twice."""
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            raise ValueError(f"duplicate key {key[:100]!r} in an object.")
        seen.add(key)
    return dict(pairs)


def json_depth(value) -> int:
    """Nesting depth of decoded JSON (a scalar is 0), without recursion."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            item = item.values()
        elif not isinstance(item, list):
            deepest = max(deepest, depth)
            continue
        deepest = max(deepest, depth + 1)
        stack.extend((child, depth + 1) for child in item)
    return deepest


class BoundedJSONParser(JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        limit = settings.API_MAX_BODY_BYTES
        request = (parser_context or {}).get("request")
        try:
            declared = int(request.META.get("CONTENT_LENGTH") or 0) if request is not None else 0
        except ValueError:
            declared = 0
        if declared > limit:
            raise PayloadTooLarge(f"The request body is larger than {limit} bytes.")
        raw = stream.read(limit + 1) if stream is not None else b""
        if len(raw) > limit:
            raise PayloadTooLarge(f"The request body is larger than {limit} bytes.")
        encoding = (parser_context or {}).get("encoding") or settings.DEFAULT_CHARSET
        try:
            data = json.loads(raw.decode(encoding), object_pairs_hook=_unique_keys)
        except RecursionError:
            raise exceptions.ParseError("JSON parse error - nested too deeply.") from None
        except (ValueError, UnicodeDecodeError) as exc:
            raise exceptions.ParseError(f"JSON parse error - {exc}") from None
        if json_depth(data) > settings.API_MAX_JSON_DEPTH:
            raise exceptions.ParseError(f"JSON parse error - nested deeper than {settings.API_MAX_JSON_DEPTH} levels.")
        return data
