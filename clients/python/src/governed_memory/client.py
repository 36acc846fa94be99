"""`Client` (sync) and `AsyncClient` (async) for the governed memory API, on httpx. Both send the
calls `governed_memory._core` defines, with the same retry policy; only the I/O differs.

    from governed_memory import Client, Provenance

    with Client("http://127.0.0.1:8000", token="gma_...") as memory:
        memory.remember("Prefers email over phone.", subject="customer/acme", purpose="support",
                        kind="preference", confidence=0.9, provenance=Provenance.user_turn("s-1", 12))
        print(memory.recall("how to contact acme", purpose="support").to_prompt())
"""

from __future__ import annotations

import builtins
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping
from datetime import datetime
from typing import Any, TypeVar

import anyio
import httpx

from governed_memory import _core
from governed_memory._core import Call, Retry, RetryPolicy
from governed_memory.errors import Conflict, GovernedMemoryError
from governed_memory.models import BatchResult, ForgetRequest, Memory, MemoryDraft, Provenance, RecallResult

T = TypeVar("T")
logger = logging.getLogger("governed_memory")

# Failures after which the request may or may not have reached the server: retried for idempotent
# calls only. (Other transport errors, such as an unsupported URL scheme, are not worth a retry.)
RETRYABLE_TRANSPORT_ERRORS = (httpx.NetworkError, httpx.TimeoutException, httpx.RemoteProtocolError)


def _log_retry(call: Call[Any], why: str, delay: float, attempt: int, policy: RetryPolicy) -> None:
    logger.info(
        "Retrying %s %s after %s in %.2f s (attempt %d of %d)", call.method, call.path, why, delay, attempt + 1, policy.attempts
    )


class Client:
    """A synchronous client. `base_url` and `token` default to the environment
    (GOVERNED_MEMORY_URL, GOVERNED_MEMORY_TOKEN). `retry` sets the retry policy (`NO_RETRY` turns
    retries off); `transport` and `headers` pass through to httpx. Use it as a context manager,
    or call `close()`."""

    def __init__(
        self,
        base_url: str | None = None,
        token: str | None = None,
        *,
        timeout: httpx.Timeout | float | None = None,
        retry: RetryPolicy | None = None,
        transport: httpx.BaseTransport | None = None,
        headers: Mapping[str, str] | None = None,
    ):
        base, token = _core.settings_from_env(base_url, token)
        self.retry_policy = retry or RetryPolicy()
        self._http = httpx.Client(transport=transport, **_core.client_options(base, token, timeout, headers))

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    # ----------------------------------------------------------------------------------------
    # writes

    def remember(
        self,
        content: str,
        *,
        subject: str,
        purpose: str,
        kind: str,
        provenance: Provenance,
        confidence: float,
        authority: str | None = None,
        ttl_seconds: int | None = None,
        expires_at: datetime | None = None,
        valid_from: datetime | None = None,
        valid_to: datetime | None = None,
        supersedes: str | Memory | None = None,
        supersedes_version: int | None = None,
        derived_from: Iterable[str | Memory] | None = None,
        idempotency_key: str | None = None,
    ) -> Memory:
        """Write one memory: a distilled claim with its source. `authority` defaults to the one
        the provenance's source carries (`Provenance.user_turn` -> user, `web_page` -> third
        party, ...). Returns the record: `active`, or `quarantined` (`awaiting_review`) until a
        human reviewer promotes it. To correct a record, pass it as `supersedes` (its version is
        taken from it). The write carries an idempotency key (yours, or one made for this call)
        that every retry reuses, so it is stored once."""
        draft = _core.draft_from(
            content,
            supersedes,
            supersedes_version,
            subject=subject,
            purpose=purpose,
            kind=kind,
            provenance=provenance,
            confidence=confidence,
            authority=authority,
            ttl_seconds=ttl_seconds,
            expires_at=expires_at,
            valid_from=valid_from,
            valid_to=valid_to,
            derived_from=derived_from,
            idempotency_key=idempotency_key,
        )
        return self._send(_core.write_call(draft))

    def remember_many(self, drafts: Iterable[MemoryDraft]) -> BatchResult:
        """Write many memories through the batch endpoint (in chunks of 100). Each draft is
        validated, admitted or quarantined exactly as a single write; one that fails is that
        item's `error` in the result, not an exception."""
        return _core.merge_batches([self._send(call) for _, call in _core.batch_calls(drafts)])

    def confirm(self, memory: str | Memory, *, expected_version: int | None = None, note: str = "") -> Memory:
        """Say the memory was re-checked against its source (tokens with the confirm capability).
        `expected_version` is the version you checked (taken from a Memory if you pass one); a
        stale one raises `Conflict` with the record's `current_version`."""
        return self._send(_core.confirm_call(memory, expected_version=expected_version, note=note))

    def forget(self, subject: str, *, reason: str = "") -> ForgetRequest:
        """Forget every memory about `subject` (tokens with the forget capability). Recall stops
        returning them before this returns; `forget_status` follows the propagation."""
        return self._send(_core.forget_call(subject, reason=reason))

    # ----------------------------------------------------------------------------------------
    # reads

    def recall(
        self,
        query: str = "",
        *,
        purpose: str,
        subject: str | None = None,
        kinds: Iterable[str] | None = None,
        limit: int | None = None,
        token_budget: int | None = None,
        min_relevance: float | None = None,
    ) -> RecallResult:
        """Active, unexpired memories for a task, best first, within `token_budget`, each at least
        `min_relevance` relevant (0 to 1; None: the server's default floor). No items means
        nothing relevant was found (`result.below_floor` counts what fell under the floor).
        `result.to_prompt()` renders them as one block of dated, sourced lines."""
        return self._send(
            _core.recall_call(
                query,
                purpose=purpose,
                subject=subject,
                kinds=kinds,
                limit=limit,
                token_budget=token_budget,
                min_relevance=min_relevance,
            )
        )

    def get(self, memory_id: str | Memory) -> Memory:
        """One memory by id (a UUID; anything else raises `InvalidArgument` without a request)."""
        return self._send(_core.get_call(memory_id))

    def forget_status(self, request: str | ForgetRequest) -> ForgetRequest:
        return self._send(_core.forget_status_call(request))

    def events(self, *, after: int | None = None, limit: int = 100) -> Iterator[_core.EventPage]:
        """The event feed after the cursor `after` (None: from the oldest event kept), one page at a
        time until it is read to the end; keep the last page's `next` to resume from there. A cursor
        older than the feed's retention raises `Gone` (410): start again with `after=None`."""
        while True:
            page = self._send(_core.events_call(after, limit))
            if not page.events:
                return
            yield page
            after = page.next

    def list(
        self,
        *,
        status: str | None = None,
        kind: str | None = None,
        subject: str | None = None,
        purpose: str | None = None,
        authority: str | None = None,
        trust: str | None = None,
        source_type: str | None = None,
        created_after: datetime | None = None,
        created_before: datetime | None = None,
        ordering: str | builtins.list[str] | None = None,
        page_size: int = 100,
        **filters: Any,
    ) -> Iterator[Memory]:
        """Every memory in scope matching the filters, fetching a page at a time as you iterate.
        Pass `ordering="created_at"` for an order that new writes do not shift while you page."""
        params: dict[str, Any] | None = _core.list_params(
            dict(
                status=status,
                kind=kind,
                subject=subject,
                purpose=purpose,
                authority=authority,
                trust=trust,
                source_type=source_type,
                created_after=created_after,
                created_before=created_before,
                ordering=ordering,
                **filters,
            ),
            page_size,
        )
        while params is not None:
            page = self._send(_core.list_call(params))
            yield from page.memories
            params = page.next_params

    # ----------------------------------------------------------------------------------------

    def _send(self, call: Call[T]) -> T:
        request = _core.build_request(self._http, call)
        attempt = 0
        while True:
            attempt += 1
            try:
                response = self._http.send(request)
            except RETRYABLE_TRANSPORT_ERRORS as exc:
                retry = _core.retry_after_connection_error(call, attempt, self.retry_policy)
                if retry is None:
                    raise _core.transport_error(call, self._http.base_url, exc, attempt) from exc
                _log_retry(call, type(exc).__name__, retry.delay, attempt, self.retry_policy)
                time.sleep(retry.delay)
                continue
            except httpx.TransportError as exc:
                raise _core.transport_error(call, self._http.base_url, exc, attempt) from exc
            try:
                result = _core.outcome(call, response, attempt, self.retry_policy)
            except Conflict as error:
                if call.conflict_record:
                    self._attach_current(error, call.conflict_record)
                raise
            if isinstance(result, Retry):
                _log_retry(call, str(response.status_code), result.delay, attempt, self.retry_policy)
                time.sleep(result.delay)
                continue
            return result.value

    def _attach_current(self, error: Conflict, memory_id: str) -> None:
        with contextlib.suppress(GovernedMemoryError):  # the conflict is the answer; reading it back was a courtesy
            _core.attach_current(error, self._send(_core.get_call(memory_id)))


class AsyncClient:
    """The asynchronous twin of `Client` (asyncio or trio): the same methods, awaited; `list`
    is an async iterator. Use it with `async with`, or `await close()`."""

    def __init__(
        self,
        base_url: str | None = None,
        token: str | None = None,
        *,
        timeout: httpx.Timeout | float | None = None,
        retry: RetryPolicy | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        headers: Mapping[str, str] | None = None,
    ):
        base, token = _core.settings_from_env(base_url, token)
        self.retry_policy = retry or RetryPolicy()
        self._http = httpx.AsyncClient(transport=transport, **_core.client_options(base, token, timeout, headers))

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self._http.aclose()

    async def remember(
        self,
        content: str,
        *,
        subject: str,
        purpose: str,
        kind: str,
        provenance: Provenance,
        confidence: float,
        authority: str | None = None,
        ttl_seconds: int | None = None,
        expires_at: datetime | None = None,
        valid_from: datetime | None = None,
        valid_to: datetime | None = None,
        supersedes: str | Memory | None = None,
        supersedes_version: int | None = None,
        derived_from: Iterable[str | Memory] | None = None,
        idempotency_key: str | None = None,
    ) -> Memory:
        """See `Client.remember`."""
        draft = _core.draft_from(
            content,
            supersedes,
            supersedes_version,
            subject=subject,
            purpose=purpose,
            kind=kind,
            provenance=provenance,
            confidence=confidence,
            authority=authority,
            ttl_seconds=ttl_seconds,
            expires_at=expires_at,
            valid_from=valid_from,
            valid_to=valid_to,
            derived_from=derived_from,
            idempotency_key=idempotency_key,
        )
        return await self._send(_core.write_call(draft))

    async def remember_many(self, drafts: Iterable[MemoryDraft]) -> BatchResult:
        """See `Client.remember_many`."""
        return _core.merge_batches([await self._send(call) for _, call in _core.batch_calls(drafts)])

    async def confirm(self, memory: str | Memory, *, expected_version: int | None = None, note: str = "") -> Memory:
        """See `Client.confirm`."""
        return await self._send(_core.confirm_call(memory, expected_version=expected_version, note=note))

    async def forget(self, subject: str, *, reason: str = "") -> ForgetRequest:
        """See `Client.forget`."""
        return await self._send(_core.forget_call(subject, reason=reason))

    async def recall(
        self,
        query: str = "",
        *,
        purpose: str,
        subject: str | None = None,
        kinds: Iterable[str] | None = None,
        limit: int | None = None,
        token_budget: int | None = None,
        min_relevance: float | None = None,
    ) -> RecallResult:
        """See `Client.recall`."""
        return await self._send(
            _core.recall_call(
                query,
                purpose=purpose,
                subject=subject,
                kinds=kinds,
                limit=limit,
                token_budget=token_budget,
                min_relevance=min_relevance,
            )
        )

    async def get(self, memory_id: str | Memory) -> Memory:
        return await self._send(_core.get_call(memory_id))

    async def forget_status(self, request: str | ForgetRequest) -> ForgetRequest:
        return await self._send(_core.forget_status_call(request))

    async def events(self, *, after: int | None = None, limit: int = 100) -> AsyncIterator[_core.EventPage]:
        """See `Client.events`: `async for page in client.events(after=cursor)`."""
        while True:
            page = await self._send(_core.events_call(after, limit))
            if not page.events:
                return
            yield page
            after = page.next

    async def list(
        self,
        *,
        status: str | None = None,
        kind: str | None = None,
        subject: str | None = None,
        purpose: str | None = None,
        authority: str | None = None,
        trust: str | None = None,
        source_type: str | None = None,
        created_after: datetime | None = None,
        created_before: datetime | None = None,
        ordering: str | builtins.list[str] | None = None,
        page_size: int = 100,
        **filters: Any,
    ) -> AsyncIterator[Memory]:
        """See `Client.list`: `async for memory in client.list(...)`."""
        params: dict[str, Any] | None = _core.list_params(
            dict(
                status=status,
                kind=kind,
                subject=subject,
                purpose=purpose,
                authority=authority,
                trust=trust,
                source_type=source_type,
                created_after=created_after,
                created_before=created_before,
                ordering=ordering,
                **filters,
            ),
            page_size,
        )
        while params is not None:
            page = await self._send(_core.list_call(params))
            for memory in page.memories:
                yield memory
            params = page.next_params

    async def _send(self, call: Call[T]) -> T:
        request = _core.build_request(self._http, call)
        attempt = 0
        while True:
            attempt += 1
            try:
                response = await self._http.send(request)
            except RETRYABLE_TRANSPORT_ERRORS as exc:
                retry = _core.retry_after_connection_error(call, attempt, self.retry_policy)
                if retry is None:
                    raise _core.transport_error(call, self._http.base_url, exc, attempt) from exc
                _log_retry(call, type(exc).__name__, retry.delay, attempt, self.retry_policy)
                await anyio.sleep(retry.delay)
                continue
            except httpx.TransportError as exc:
                raise _core.transport_error(call, self._http.base_url, exc, attempt) from exc
            try:
                result = _core.outcome(call, response, attempt, self.retry_policy)
            except Conflict as error:
                if call.conflict_record:
                    await self._attach_current(error, call.conflict_record)
                raise
            if isinstance(result, Retry):
                _log_retry(call, str(response.status_code), result.delay, attempt, self.retry_policy)
                await anyio.sleep(result.delay)
                continue
            return result.value

    async def _attach_current(self, error: Conflict, memory_id: str) -> None:
        with contextlib.suppress(GovernedMemoryError):
            _core.attach_current(error, await self._send(_core.get_call(memory_id)))
