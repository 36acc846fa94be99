"""What the sync and async clients share, without I/O: each endpoint as a `Call` (method, path,
body, whether it may be retried, how to read the answer), the retry policy, and how a response
becomes a value or a typed error. `Client` and `AsyncClient` only send calls and sleep.

Retries: a 429 is retried after the server's `Retry-After` for every call (a limited request was
not processed). A connection error, a timeout, or a 502/503/504 from a proxy is retried only for
idempotent calls: reads (get, list, recall, forget status) and writes, which always carry an
idempotency key, reused on every attempt, so the server stores them once. `confirm` (a
compare-and-swap) and `forget` are never retried after the request may have reached the server.

Nothing a caller passes can change which endpoint a call reaches: ids are checked to be UUIDs
(the API's ids) and percent-quoted before they enter a URL path, the idempotency key must be
something an HTTP header can carry, and a request httpx cannot build (text that is not Unicode,
a URL too long) is refused as `InvalidArgument` before anything is sent.
"""

from __future__ import annotations

import email.utils
import os
import random
import re
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, TypeVar
from urllib.parse import parse_qsl, quote, urlsplit

import httpx

from governed_memory._version import __version__
from governed_memory.errors import Conflict, InvalidArgument, TransportError, UnexpectedResponse, error_from_problem
from governed_memory.models import BatchItemResult, BatchResult, ForgetRequest, Memory, MemoryDraft, RecallResult

T = TypeVar("T")

URL_ENV = "GOVERNED_MEMORY_URL"
TOKEN_ENV = "GOVERNED_MEMORY_TOKEN"
API_PREFIX = "/api/v1/"
BATCH_MAX_ITEMS = 100  # the server's limit per batch request; longer lists are sent in chunks
RETRYABLE_GATEWAY_STATUSES = frozenset({502, 503, 504})
DEFAULT_TIMEOUT = httpx.Timeout(30.0, connect=5.0)
IDEMPOTENCY_KEY_MAX_CHARS = 200  # the server's limit (memory.models); tests/clients compares the two
# The server's id pattern (memory.api.views.UUID_PATTERN): record and forget request ids are UUIDs.
_UUID = re.compile(r"[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}")
UUID_RULE = "must be a UUID such as 6f1c2b7e-0c4a-4d8e-9b1a-2f3c4d5e6f70, as the service returns it"
# Visible ASCII: what an HTTP header carries unchanged (no line break to split it, no space to trim).
IDEMPOTENCY_KEY_PATTERN = rf"[!-~]{{1,{IDEMPOTENCY_KEY_MAX_CHARS}}}"
IDEMPOTENCY_KEY_RULE = (
    f"must be 1 to {IDEMPOTENCY_KEY_MAX_CHARS} visible ASCII characters (letters, digits and punctuation; no spaces)"
)
# What httpx raises while building a request from a caller's values (a lone surrogate in the JSON
# body or the query, a NaN, a URL over its length limit): refused as InvalidArgument, nothing sent.
UNBUILDABLE = (httpx.InvalidURL, ValueError)


@dataclass(frozen=True)
class RetryPolicy:
    """`attempts` counts the first try. Backoff after a connection error or a gateway error
    without `Retry-After`: `backoff` seconds, doubling, at most `max_backoff`, with jitter. A 429
    waits exactly what `Retry-After` says, unless that is longer than `max_retry_after`: then the
    call raises `RateLimited` at once rather than block."""

    attempts: int = 4
    backoff: float = 0.5
    max_backoff: float = 8.0
    max_retry_after: float = 60.0

    def backoff_delay(self, attempt: int) -> float:
        delay: float = min(self.max_backoff, self.backoff * (2 ** (attempt - 1)))
        return delay * random.uniform(0.5, 1.0)


NO_RETRY = RetryPolicy(attempts=1)


@dataclass
class Call(Generic[T]):
    method: str
    path: str  # relative to /api/v1/
    parse: Callable[[httpx.Response], T]
    json: Any = None
    params: Mapping[str, Any] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    idempotent: bool = False
    conflict_record: str | None = None  # a 409 reads this record back (Conflict.current)


@dataclass(frozen=True)
class Retry:
    delay: float


@dataclass(frozen=True)
class Done(Generic[T]):
    value: T


def settings_from_env(base_url: str | None, token: str | None) -> tuple[str, str]:
    base_url = base_url or os.environ.get(URL_ENV)
    token = token or os.environ.get(TOKEN_ENV)
    if not base_url:
        raise ValueError(f"No server URL: pass base_url or set {URL_ENV} (e.g. http://127.0.0.1:8000).")
    if not token:
        raise ValueError(f"No token: pass token or set {TOKEN_ENV} (an agent token, gma_...).")
    return api_base(base_url), token


def api_base(base_url: str) -> str:
    """The API root for a server URL: `http://host:8000` and `http://host:8000/api/v1` both
    give `http://host:8000/api/v1/`."""
    base = base_url.rstrip("/")
    if not base.endswith(API_PREFIX.rstrip("/")):
        base += API_PREFIX.rstrip("/")
    return base + "/"


def client_options(
    base: str, token: str, timeout: httpx.Timeout | float | None, headers: Mapping[str, str] | None
) -> dict[str, Any]:
    return {
        "base_url": base,
        "timeout": DEFAULT_TIMEOUT if timeout is None else timeout,
        "headers": {
            "Authorization": f"Bearer {token}",
            "Accept": "application/json, application/problem+json",
            "User-Agent": f"governed-memory-client/{__version__}",
            **(headers or {}),
        },
        "follow_redirects": False,
    }


def new_idempotency_key() -> str:
    return f"gmc-{uuid.uuid4().hex}"


def checked_idempotency_key(key: str) -> str:
    """The key goes into a header: anything but 1 to IDEMPOTENCY_KEY_MAX_CHARS visible ASCII
    characters would fail inside httpx (a non-ASCII letter) or change on the way (a space)."""
    if not isinstance(key, str) or not re.fullmatch(IDEMPOTENCY_KEY_PATTERN, key):
        raise InvalidArgument(f"idempotency_key {IDEMPOTENCY_KEY_RULE}.")
    return key


def uuid_id(value: object, what: str) -> str:
    """An id in its canonical form, or InvalidArgument: the API's ids are UUIDs, so nothing else
    is worth sending, and an id such as `../forget/` must never become part of a URL."""
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, str) and _UUID.fullmatch(value):
        return str(uuid.UUID(value))
    raise InvalidArgument(f"{what} {UUID_RULE}.")


def api_path(*segments: str) -> str:
    """A path under /api/v1/, each segment percent-quoted: no value can add a segment or a query."""
    return "".join(f"{quote(segment, safe='')}/" for segment in segments)


def build_request(http: httpx.Client | httpx.AsyncClient, call: Call[Any]) -> httpx.Request:
    try:
        return http.build_request(call.method, call.path, json=call.json, params=call.params, headers=call.headers)
    except UNBUILDABLE as exc:
        why = "a text value is not valid Unicode (it holds a lone surrogate)" if isinstance(exc, UnicodeError) else str(exc)
        raise InvalidArgument(f"{call.method} {call.path} was not sent: {why}.") from None


# --------------------------------------------------------------------------------------------
# responses


def outcome(call: Call[T], response: httpx.Response, attempt: int, policy: RetryPolicy) -> Done[T] | Retry:
    """What to do with a response: its value, a retry after a delay, or (raised) a typed error."""
    status = response.status_code
    if 200 <= status < 300:
        return Done(call.parse(response))
    retry_after = parse_retry_after(response.headers.get("Retry-After"))
    can_retry = attempt < policy.attempts
    if status == 429 and can_retry and (retry_after is None or retry_after <= policy.max_retry_after):
        return Retry(retry_after if retry_after is not None else policy.backoff_delay(attempt))
    if status in RETRYABLE_GATEWAY_STATUSES and call.idempotent and can_retry:
        return Retry(min(retry_after, policy.max_retry_after) if retry_after is not None else policy.backoff_delay(attempt))
    raise error_from_problem(status, problem_body(response), retry_after=retry_after)


def retry_after_connection_error(call: Call[Any], attempt: int, policy: RetryPolicy) -> Retry | None:
    if call.idempotent and attempt < policy.attempts:
        return Retry(policy.backoff_delay(attempt))
    return None


def transport_error(call: Call[Any], base_url: httpx.URL, exc: Exception, attempts: int) -> TransportError:
    tries = f" after {attempts} attempts" if attempts > 1 else ""
    return TransportError(f"{call.method} {base_url}{call.path} failed{tries}: {type(exc).__name__}: {exc}")


def problem_body(response: httpx.Response) -> dict[str, Any]:
    """The problem in an error response; a body that is not one (say, a proxy's HTML page) gives a
    minimal problem from the status line."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict):
        return body
    return {
        "type": "about:blank",
        "title": response.reason_phrase or "Request failed",
        "status": response.status_code,
        "detail": "",
        "instance": response.request.url.path if response.request else "",
    }


def parse_retry_after(value: str | None) -> float | None:
    """`Retry-After` as seconds: delta-seconds, or an HTTP date."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def json_body(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        raise UnexpectedResponse(
            f"The server answered {response.status_code} without a JSON body.", status=response.status_code
        ) from None


def attach_current(error: Conflict, record: Memory) -> None:
    error._attach_current(record)


# --------------------------------------------------------------------------------------------
# the endpoints, each defined once


def _memory(response: httpx.Response) -> Memory:
    return Memory.from_json(json_body(response), replayed=response.headers.get("Idempotent-Replayed") == "true")


def record_id(memory: str | uuid.UUID | Memory) -> str:
    return uuid_id(memory.id if isinstance(memory, Memory) else memory, "A memory id")


def write_call(draft: MemoryDraft) -> Call[Memory]:
    key = checked_idempotency_key(draft.idempotency_key) if draft.idempotency_key is not None else new_idempotency_key()
    return Call(
        "POST",
        "memories/",
        _memory,
        json=draft.to_json(),
        headers={"Idempotency-Key": key},
        idempotent=True,
        conflict_record=record_id(draft.supersedes) if draft.supersedes is not None else None,
    )


def batch_calls(drafts: Iterable[MemoryDraft]) -> list[tuple[int, Call[list[BatchItemResult]]]]:
    """One call per chunk of at most BATCH_MAX_ITEMS drafts, each with its offset in the list.
    Every item carries an idempotency key, generated once, so a retried chunk writes nothing twice."""
    drafts = list(drafts)
    calls = []
    for offset in range(0, len(drafts), BATCH_MAX_ITEMS):
        chunk = drafts[offset : offset + BATCH_MAX_ITEMS]
        items = [{**draft.to_json(), "idempotency_key": draft.idempotency_key or new_idempotency_key()} for draft in chunk]
        calls.append((offset, Call("POST", "memories/batch/", _batch_results(offset), json={"items": items}, idempotent=True)))
    return calls


def _batch_results(offset: int) -> Callable[[httpx.Response], list[BatchItemResult]]:
    def parse(response: httpx.Response) -> list[BatchItemResult]:
        body = json_body(response)
        results = body.get("results") if isinstance(body, dict) else None
        if not isinstance(results, list):
            raise UnexpectedResponse("The batch answer has no list of results.", status=response.status_code)
        parsed = []
        for position, result in enumerate(results):
            if not isinstance(result, dict):
                raise UnexpectedResponse("A batch result is not an object.", status=response.status_code)
            index, status, record, problem = (result.get(name) for name in ("index", "status", "record", "problem"))
            index = offset + (index if isinstance(index, int) else position)
            status = status if isinstance(status, int) else 0
            if isinstance(record, dict):
                parsed.append(BatchItemResult(index, status, memory=Memory.from_json(record)))
            else:
                problem = problem if isinstance(problem, dict) else {}
                parsed.append(BatchItemResult(index, status, error=error_from_problem(status or 400, problem)))
        return parsed

    return parse


def merge_batches(parts: list[list[BatchItemResult]]) -> BatchResult:
    return BatchResult(results=tuple(result for part in parts for result in part))


def recall_call(
    query: str,
    *,
    purpose: str,
    subject: str | None,
    kinds: Iterable[str] | None,
    limit: int | None,
    token_budget: int | None,
    min_relevance: float | None = None,
) -> Call[RecallResult]:
    body: dict[str, Any] = {"query": query, "purpose": purpose}
    if subject is not None:
        body["subject"] = subject
    if kinds is not None:
        body["kinds"] = list(kinds)
    if limit is not None:
        body["limit"] = limit
    if token_budget is not None:
        body["token_budget"] = token_budget
    if min_relevance is not None:
        body["min_relevance"] = min_relevance
    return Call("POST", "recall/", lambda r: RecallResult.from_json(json_body(r)), json=body, idempotent=True)


def get_call(memory: str | Memory) -> Call[Memory]:
    return Call("GET", api_path("memories", record_id(memory)), _memory, idempotent=True)


def list_params(filters: Mapping[str, Any], page_size: int) -> dict[str, Any]:
    params: dict[str, Any] = {"page_size": page_size}
    for name, value in filters.items():
        if value is None:
            continue
        if isinstance(value, datetime):
            value = value.isoformat()
        elif isinstance(value, (list, tuple)):
            value = ",".join(value)
        params[name] = value
    return params


@dataclass(frozen=True)
class Page:
    memories: list[Memory]
    next_params: dict[str, str] | None  # the query of the next page, None after the last


def list_call(params: Mapping[str, Any]) -> Call[Page]:
    def parse(response: httpx.Response) -> Page:
        body = json_body(response)
        results = body.get("results") if isinstance(body, dict) else None
        if not isinstance(results, list):
            raise UnexpectedResponse("The list answer has no results.", status=response.status_code)
        next_url = body.get("next")
        # Follow the next page by its query only: the host in `next` is what the server saw, which
        # behind a proxy need not be the address this client uses.
        next_params = None
        if isinstance(next_url, str) and next_url:
            next_params = dict(parse_qsl(urlsplit(next_url).query, keep_blank_values=True))
        return Page([Memory.from_json(item) for item in results], next_params)

    return Call("GET", "memories/", parse, params=dict(params), idempotent=True)


def confirm_call(memory: str | Memory, *, expected_version: int | None, note: str) -> Call[Memory]:
    if expected_version is None:
        if not isinstance(memory, Memory):
            raise TypeError("confirm() needs expected_version (or pass the Memory you looked at).")
        expected_version = memory.version
    memory_id = record_id(memory)
    return Call(
        "POST",
        api_path("memories", memory_id, "confirm"),
        _memory,
        json={"expected_version": expected_version, "note": note},
        conflict_record=memory_id,
    )


def forget_call(subject: str, *, reason: str) -> Call[ForgetRequest]:
    return Call("POST", "forget/", lambda r: ForgetRequest.from_json(json_body(r)), json={"subject": subject, "reason": reason})


@dataclass(frozen=True)
class EventPage:
    """One page of the event feed: the events (as the server sends them: ids and metadata, never
    content) and the cursor to pass as `after` for the next page."""

    events: list[dict[str, Any]]
    next: int


def events_call(after: int | None, limit: int) -> Call[EventPage]:
    def parse(response: httpx.Response) -> EventPage:
        body = json_body(response)
        if not isinstance(body, dict) or not isinstance(body.get("events"), list) or not isinstance(body.get("next"), int):
            raise UnexpectedResponse("The event feed's answer has no events or next.", status=response.status_code)
        return EventPage(events=body["events"], next=body["next"])

    params: dict[str, Any] = {"limit": limit} | ({"after": after} if after is not None else {})
    return Call("GET", api_path("events"), parse, params=params, idempotent=True)


def forget_status_call(request: str | uuid.UUID | ForgetRequest) -> Call[ForgetRequest]:
    request_id = uuid_id(request.id if isinstance(request, ForgetRequest) else request, "A forget request id")
    return Call("GET", api_path("forget", request_id), lambda r: ForgetRequest.from_json(json_body(r)), idempotent=True)


def draft_from(content: str, supersedes: str | Memory | None, supersedes_version: int | None, **fields: Any) -> MemoryDraft:
    """A MemoryDraft for `remember(...)`: a superseded Memory gives its id and, unless told
    otherwise, the version the caller looked at."""
    if isinstance(supersedes, Memory) and supersedes_version is None:
        supersedes_version = supersedes.version
    if supersedes is not None:
        supersedes = record_id(supersedes)
    if fields.get("derived_from") is not None:
        fields["derived_from"] = tuple(record_id(m) for m in fields["derived_from"])
    return MemoryDraft(content=content, supersedes=supersedes, supersedes_version=supersedes_version, **fields)
