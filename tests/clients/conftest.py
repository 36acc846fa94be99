"""The Python client and the MCP server against a live server: gunicorn serving the app on a free
port against the test database (tests.processes.GunicornServer), one per module. Tests commit
their rows (`transaction=True`) so the server process sees the tokens they make.

`RecordingTransport` is httpx's real transport, recording every exchange (method, path,
idempotency key, status, when it was sent); it can lose the answer to a chosen request after the
server has processed it, as a dropped connection would, to show what the client retries."""

import time
from collections.abc import Callable
from dataclasses import dataclass

import httpx
import pytest

from governed_memory import Provenance
from tests.processes import GunicornServer


@pytest.fixture(scope="module")
def api_server(django_db_setup, tmp_path_factory):
    server = GunicornServer(tmp_path_factory.mktemp("gunicorn") / "gunicorn.log")
    server.start()
    yield server
    server.stop()


@pytest.fixture
def token(credential) -> str:
    """The default agent's token (acme/support-bot, purpose support, may forget and confirm)."""
    return credential.raw_token


@dataclass
class Exchange:
    method: str
    path: str
    idempotency_key: str | None
    status: int | None  # None: the answer was lost
    sent_at: float
    retry_after: str | None


Chooser = Callable[[httpx.Request], bool]


class _Recorder:
    def __init__(self, lose: Chooser | None = None, times: int = 1):
        self.exchanges: list[Exchange] = []
        self.attempts: dict[str, int] = {}  # by method, including requests that never got an answer
        self._lose, self._times = lose, times

    def _attempt(self, request: httpx.Request) -> float:
        self.attempts[request.method] = self.attempts.get(request.method, 0) + 1
        return time.monotonic()

    def _record(self, request: httpx.Request, response: httpx.Response, sent_at: float) -> bool:
        lose = self._lose is not None and self._times > 0 and self._lose(request)
        if lose:
            self._times -= 1
        self.exchanges.append(
            Exchange(
                request.method,
                request.url.path,
                request.headers.get("Idempotency-Key"),
                None if lose else response.status_code,
                sent_at,
                response.headers.get("Retry-After"),
            )
        )
        return lose

    def to(self, path_suffix: str) -> list[Exchange]:
        return [e for e in self.exchanges if e.path.endswith(path_suffix)]


class RecordingTransport(_Recorder, httpx.BaseTransport):
    def __init__(self, lose: Chooser | None = None, times: int = 1):
        super().__init__(lose, times)
        self._inner = httpx.HTTPTransport()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        sent_at = self._attempt(request)
        response = self._inner.handle_request(request)
        response.read()
        if self._record(request, response, sent_at):
            response.close()
            raise httpx.ReadError("the connection dropped before the answer arrived", request=request)
        return response

    def close(self) -> None:
        self._inner.close()


class AsyncRecordingTransport(_Recorder, httpx.AsyncBaseTransport):
    def __init__(self, lose: Chooser | None = None, times: int = 1):
        super().__init__(lose, times)
        self._inner = httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        sent_at = self._attempt(request)
        response = await self._inner.handle_async_request(request)
        await response.aread()
        if self._record(request, response, sent_at):
            await response.aclose()
            raise httpx.ReadError("the connection dropped before the answer arrived", request=request)
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


def posts_to(path_suffix: str) -> Chooser:
    return lambda request: request.method == "POST" and request.url.path.endswith(path_suffix)


def user_fact(n: int | str = 1, **overrides) -> dict:
    """remember() arguments for a clean user turn (admitted without review)."""
    return {
        "content": f"Prefers email over phone ({n}).",
        "subject": "customer/acme",
        "purpose": "support",
        "kind": "preference",
        "confidence": 0.9,
        "provenance": Provenance.user_turn("s-1", n),
        **overrides,
    }
