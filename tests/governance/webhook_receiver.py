"""A real HTTP receiver for webhook tests: a threading http.server on 127.0.0.1 that records every
request (path, headers, body) and answers what the test tells it to."""

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from standardwebhooks import Webhook


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: str

    @property
    def event(self) -> dict:
        return json.loads(self.body)


@dataclass
class Receiver:
    """`answer(received) -> (status, body bytes, extra headers)`; the default is 200 `{}`."""

    received: list[Received] = field(default_factory=list)
    answer: Callable[[Received], tuple[int, bytes, dict[str, str]]] = lambda r: (200, b"{}", {})
    server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def verified(self, secret: str) -> list[dict]:
        """Every body received, each verified with `secret` by the standardwebhooks library."""
        return [Webhook(secret).verify(r.body, r.headers) for r in self.received]

    def start(self) -> "Receiver":
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0))).decode()
                got = Received(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                status, payload, headers = receiver.answer(got)
                receiver.received.append(got)
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args) -> None:  # quiet
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
