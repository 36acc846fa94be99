"""Malformed input to `governed-memory-mcp` and the Python client, against a live server: ids that
try to climb out of their URL path never reach any endpoint (gunicorn's access log and the
database say so), every bad tool argument is a plain tool error that sends nothing, and every
malformed JSON-RPC line on stdio gets its JSON-RPC error while the server goes on serving."""

import asyncio
import json
import os
import queue
import subprocess
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.conf import settings
from mcp import Client as McpClient
from mcp.client.stdio import StdioServerParameters

from governance.models import ForgetRequest
from governed_memory import Client, GovernedMemoryError, InvalidArgument, _core, _tools
from governed_memory._mcp_guard import MAX_MESSAGE_BYTES, MAX_NESTING, rejection
from memory import models as memory_models
from memory import validation
from memory.api.views import UUID_PATTERN
from memory.models import MemoryRecord
from tests.clients.conftest import RecordingTransport, user_fact
from tests.clients.test_mcp_server import COMMAND, USER_SAYS, over_stdio, server_env, text_of
from tests.processes import GunicornServer, wait_for

pytestmark = pytest.mark.django_db(transaction=True)

CLIMBING_IDS = [
    "../forget/?",
    "../../../admin/",
    "..",
    ".",
    "%2e%2e%2fforget",
    "x" * 100_000,
    "6f1c2b7e-0c4a-4d8e-9b1a-2f3c4d5e6f70/../../../forget",
    "6f1c2b7e-0c4a-4d8e-9b1a-2f3c4d5e6f70?x=1",
    "6f1c2b7e-0c4a-4d8e-9b1a-2f3c4d5e6f70\n",
]


@pytest.fixture(scope="module")
def api_server(django_db_setup, tmp_path_factory):
    """The live server, with gunicorn's access log: which requests reached the app at all."""
    directory = tmp_path_factory.mktemp("gunicorn")
    server = GunicornServer(directory / "gunicorn.log", GUNICORN_CMD_ARGS=f"--access-logfile {directory / 'access.log'}")
    server.access_log = directory / "access.log"
    server.start()
    yield server
    server.stop()


def requests_seen(api_server) -> list[str]:
    """The request lines in the access log, e.g. "POST /api/v1/recall/ HTTP/1.1"."""
    if not api_server.access_log.exists():
        return []
    return [line.split('"')[1] for line in api_server.access_log.read_text().splitlines() if '"' in line]


def requests_since(api_server, since: int, *, until: str) -> list[str]:
    """The requests logged after the first `since`, once one starting with `until` is among them:
    gunicorn logs a request after answering it, and its one worker answers in order, so nothing
    sent before that request can still be missing."""

    def seen():
        lines = requests_seen(api_server)[since:]
        return lines if any(line.startswith(until) for line in lines) else None

    return wait_for(seen, timeout=10, what=f"{until} in the access log")


def run(session):
    return asyncio.run(session())


# --------------------------------------------------------------------------------------------
# ids in URL paths


def test_ids_that_climb_out_of_their_path_are_refused_by_the_mcp_server_and_reach_no_endpoint(api_server, token):
    unknown = uuid.uuid4()

    async def session():
        async with over_stdio(api_server, token) as mcp:
            stored = await mcp.call_tool("remember", USER_SAYS)
            climbs = [
                await mcp.call_tool("confirm", {"memory_id": bad, "expected_version": 1, "note": "re-checked"})
                for bad in CLIMBING_IDS
            ]
            correction = await mcp.call_tool("remember", {**USER_SAYS, "supersedes": "../forget/", "supersedes_version": 1})
            # A well-formed id, in any form a UUID takes, reaches its own endpoint in canonical form.
            missing = await mcp.call_tool("confirm", {"memory_id": unknown.hex.upper(), "expected_version": 1})
            return stored.structured_content["id"], climbs, correction, missing

    memory_id, climbs, correction, missing = run(session)
    for result in [*climbs, correction]:
        assert result.is_error
        assert text_of(result).startswith("Error executing tool ")
        assert "invalid arguments, nothing was sent" in text_of(result)
        assert "must be a UUID such as" in text_of(result) and "xxxxxxxx" not in text_of(result)
    assert missing.is_error and "404" in text_of(missing)
    confirm_unknown = f"POST /api/v1/memories/{unknown}/confirm/ HTTP/1.1"
    requests = requests_since(api_server, 0, until=confirm_unknown)
    remembered = len(requests) - 1 - requests[::-1].index("POST /api/v1/memories/ HTTP/1.1")
    assert requests[remembered + 1 :] == [confirm_unknown], "a refused call reached the server"
    record = MemoryRecord.objects.get(pk=memory_id)
    assert (record.version, record.status, record.history.count()) == (1, "active", 1)
    assert MemoryRecord.objects.count() == 1 and ForgetRequest.objects.count() == 0


def test_the_python_client_refuses_unsafe_ids_keys_and_text_before_sending_anything(api_server, token):
    transport = RecordingTransport()
    with Client(api_server.base, token, transport=transport) as client:
        memory = client.remember(**user_fact(1))
        sent = len(transport.exchanges)
        for bad in CLIMBING_IDS:
            with pytest.raises(InvalidArgument, match="A memory id must be a UUID"):
                client.confirm(bad, expected_version=1)
            with pytest.raises(InvalidArgument, match="A memory id must be a UUID"):
                client.get(bad)
            with pytest.raises(InvalidArgument, match="A forget request id must be a UUID"):
                client.forget_status(bad)
        with pytest.raises(InvalidArgument, match="A memory id must be a UUID"):
            client.remember(**user_fact(2), supersedes="../forget/", supersedes_version=1)
        for key in ("ключ", "two words", "line\r\nX-Injected: 1", "k" * 201, ""):
            with pytest.raises(InvalidArgument, match="idempotency_key must be 1 to 200 visible ASCII characters"):
                client.remember(**user_fact(3), idempotency_key=key)
        with pytest.raises(InvalidArgument, match="POST memories/ was not sent: a text value is not valid Unicode"):
            client.remember(**user_fact(4, content="half an emoji \ud83d"))
        with pytest.raises(InvalidArgument, match="GET memories/ was not sent: URL component 'query' too long"):
            list(client.list(subject="x" * 100_000))
        assert len(transport.exchanges) == sent, "a refused call reached the server"

        assert client.get(memory.id.upper().replace("-", "")) == memory
        assert client.get(uuid.UUID(memory.id)) == memory
        assert [e.path for e in transport.exchanges[sent:]] == [f"/api/v1/memories/{memory.id}/"] * 2
        assert client.remember(**user_fact(1), idempotency_key="s-1-turn-1!").id != memory.id

    error = InvalidArgument("x")
    assert isinstance(error, GovernedMemoryError) and isinstance(error, ValueError)
    record = MemoryRecord.objects.get(pk=memory.id)
    assert (record.version, record.status) == (1, "active") and MemoryRecord.objects.count() == 2


# --------------------------------------------------------------------------------------------
# tool arguments


def test_idempotency_keys_a_header_cannot_carry_are_tool_errors_and_good_ones_still_replay(api_server, token):
    async def session():
        async with over_stdio(api_server, token) as mcp:
            bad = [
                await mcp.call_tool("remember", {**USER_SAYS, "idempotency_key": key})
                for key in ("ключ", "two words", "line\r\nX-Injected: 1", "k" * 201, "")
            ]
            first = await mcp.call_tool("remember", {**USER_SAYS, "idempotency_key": "s-9-turn-3"})
            again = await mcp.call_tool("remember", {**USER_SAYS, "idempotency_key": "s-9-turn-3"})
            return bad, first, again

    bad, first, again = run(session)
    for result in bad:
        assert result.is_error
        assert text_of(result).splitlines()[1:] == [
            "  idempotency_key: must be 1 to 200 visible ASCII characters (letters, digits and punctuation; no spaces)"
        ]
    assert not first.is_error and not again.is_error
    assert again.structured_content["id"] == first.structured_content["id"]
    assert "already stored, nothing new was written" in text_of(again)
    assert MemoryRecord.objects.count() == 1


BAD_ARGUMENTS = [
    ("remember", {**USER_SAYS, "subject": "x" * 100_000}, "subject: String should have at most 200 characters"),
    ("remember", {**USER_SAYS, "content": "Acme\x00prefers email."}, "content: must not contain NUL characters"),
    ("remember", {**USER_SAYS, "content": ""}, "content: String should have at least 1 character"),
    ("remember", {**USER_SAYS, "confidence": 2}, "confidence: Input should be less than or equal to 1"),
    ("remember", {**USER_SAYS, "source_type": "rumour"}, "source_type: Input should be 'user_turn', 'tool_output'"),
    ("remember", {**USER_SAYS, "kind": "k" * 65}, "kind: String should have at most 64 characters"),
    ("remember", {**USER_SAYS, "session_id": "s" * 201}, "session_id: String should have at most 200 characters"),
    ("remember", {**USER_SAYS, "source_uri": "u" * 1001}, "source_uri: String should have at most 1000 characters"),
    ("remember", {**USER_SAYS, "ttl_seconds": 0}, "ttl_seconds: Input should be greater than or equal to 1"),
    (
        "remember",
        {**USER_SAYS, "supersedes": str(uuid.uuid4()), "supersedes_version": 2**40},
        "supersedes_version: Input should be less than or equal to 2147483647",
    ),
    ("remember", {**USER_SAYS, "observed_at": "yesterday"}, "observed_at must be an ISO 8601 date-time with a zone"),
    ("remember", {key: value for key, value in USER_SAYS.items() if key != "subject"}, "subject: Field required"),
    ("recall", {"query": "q" * 1001}, "query: String should have at most 1000 characters"),
    ("recall", {"query": "acme", "kinds": ["preference"] * 21}, "kinds: List should have at most 20 items"),
    ("recall", {"query": "acme", "kinds": ["preference", ""]}, "kinds.1: String should have at least 1 character"),
    ("recall", {"query": "acme", "limit": 0}, "limit: Input should be greater than or equal to 1"),
    ("recall", {"query": "acme", "token_budget": 10**7}, "token_budget: Input should be less than or equal to 1000000"),
    ("recall", {"query": "acme", "purpose": "p" * 101}, "purpose: String should have at most 100 characters"),
    ("forget", {"subject": ""}, "subject: String should have at least 1 character"),
    ("forget", {"subject": "customer/acme", "reason": "r" * 501}, "reason: String should have at most 500 characters"),
    ("confirm", {"memory_id": str(uuid.uuid4()), "expected_version": "one"}, "expected_version: Input should be a valid integer"),
    (
        "confirm",
        {"memory_id": str(uuid.uuid4()), "expected_version": 0},
        "expected_version: Input should be greater than or equal to 1",
    ),
    ("confirm", {}, "memory_id: Field required"),
    ("list_memories", {"status": "bogus"}, "status: Input should be 'active', 'quarantined'"),
    ("list_memories", {"subject": "x" * 100_000}, "subject: String should have at most 200 characters"),
    ("list_memories", {"limit": 10**6}, "limit: Input should be less than or equal to 200"),
    ("no_such_tool", {}, "Unknown tool: no_such_tool"),
]


def test_every_bad_tool_argument_is_a_plain_tool_error_and_nothing_is_sent(api_server, token):
    async def session():
        async with over_stdio(api_server, token) as mcp:
            before = len(requests_seen(api_server))
            results = [await mcp.call_tool(name, arguments) for name, arguments, _ in BAD_ARGUMENTS]
            await mcp.call_tool("list_memories", {"limit": 1})  # the one call that reaches the server
            return before, results

    before, results = run(session)
    for (name, _, expected), result in zip(BAD_ARGUMENTS, results, strict=True):
        text = text_of(result)
        assert result.is_error, name
        assert expected in text, (name, text)
        assert "xxxxxxxxxx" not in text and "errors.pydantic.dev" not in text and "input_value" not in text
    listed = "GET /api/v1/memories/?page_size=1 HTTP/1.1"
    assert requests_since(api_server, before, until=listed) == [listed], "a refused call reached the server"
    assert MemoryRecord.objects.count() == 0 and ForgetRequest.objects.count() == 0


def test_a_crash_inside_a_tool_is_a_plain_tool_error_and_the_server_goes_on(api_server, token):
    env = {**server_env(api_server, token), "GOVERNED_MEMORY_URL": "http://127.0.0.1:not-a-port"}

    async def session():
        async with McpClient(StdioServerParameters(command=COMMAND, env=env)) as mcp:
            crashed = await mcp.call_tool("remember", USER_SAYS)
            tools = (await mcp.list_tools()).tools
            return crashed, tools

    crashed, tools = run(session)
    assert crashed.is_error
    assert text_of(crashed) == (
        "Error executing tool remember: it failed inside the MCP server (InvalidURL). It may or may not have reached "
        "the memory service: check with list_memories before repeating a write."
    )
    assert len(tools) == 5


class _SurrogateService(BaseHTTPRequestHandler):
    """A misbehaving service: recall answers with a lone surrogate escape, which Python's json reads."""

    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        body = json.dumps(
            {
                "items": [
                    {
                        "id": str(uuid.UUID(int=1)),
                        "kind": "preference",
                        "subject": "customer/acme",
                        "content": "broken \ud800 text",
                        "authority": "user",
                        "trust": "trusted",
                    }
                ],
                "tokens_used": 3,
                "omitted_for_budget": 0,
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_text_from_the_service_that_is_not_unicode_is_a_tool_error_not_a_dead_server():
    service = ThreadingHTTPServer(("127.0.0.1", 0), _SurrogateService)
    threading.Thread(target=service.serve_forever, daemon=True).start()
    env = {
        "GOVERNED_MEMORY_URL": f"http://127.0.0.1:{service.server_address[1]}",
        "GOVERNED_MEMORY_TOKEN": "gma_x",
        "GOVERNED_MEMORY_PURPOSE": "support",
    }

    async def session():
        async with McpClient(StdioServerParameters(command=COMMAND, env=env)) as mcp:
            recalled = await mcp.call_tool("recall", {"query": "acme"})
            tools = (await mcp.list_tools()).tools
            return recalled, tools

    try:
        recalled, tools = run(session)
    finally:
        service.shutdown()
        service.server_close()
    assert recalled.is_error
    assert text_of(recalled) == "Error executing tool recall: the memory service answered with text that is not Unicode."
    assert len(tools) == 5


def test_the_tools_limits_are_the_services():
    fields = validation.ProvenanceSerializer().fields
    recall = validation.RecallQuerySerializer().fields
    assert _core.IDEMPOTENCY_KEY_MAX_CHARS == memory_models.IDEMPOTENCY_KEY_MAX_CHARS
    assert _core._UUID.pattern == UUID_PATTERN
    assert (_tools.SUBJECT_MAX_CHARS, _tools.PURPOSE_MAX_CHARS, _tools.NOTE_MAX_CHARS) == (
        memory_models.SUBJECT_MAX_CHARS,
        memory_models.PURPOSE_MAX_CHARS,
        memory_models.NOTE_MAX_CHARS,
    )
    assert _tools.KIND_MAX_CHARS == memory_models.MemoryKind._meta.get_field("name").max_length
    assert {fields[name].max_length for name in ("session_id", "turn_id", "tool")} == {_tools.PROVENANCE_TEXT_MAX_CHARS}
    assert _tools.URI_MAX_CHARS == fields["uri"].max_length
    assert (_tools.RECALL_QUERY_MAX_CHARS, _tools.RECALL_KINDS_MAX_ITEMS, _tools.TTL_MAX_SECONDS) == (
        validation.RECALL_QUERY_MAX_CHARS,
        validation.RECALL_KINDS_MAX_ITEMS,
        validation.TTL_MAX_SECONDS,
    )
    assert _tools.RECALL_LIMIT_MAX == settings.MEMORY_RECALL_MAX_LIMIT
    assert _tools.TOKEN_BUDGET_MAX == recall["token_budget"].max_value


# --------------------------------------------------------------------------------------------
# JSON-RPC on stdio


class RawStdio:
    """The server process driven line by line, as a broken or hostile client would."""

    def __init__(self, env: dict[str, str], stderr):
        self.process = subprocess.Popen(
            [COMMAND], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, env={**os.environ, **env}
        )
        self.lines: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.process.stdout:
            self.lines.put(line)

    def send(self, line: bytes) -> None:
        self.process.stdin.write(line + b"\n")
        self.process.stdin.flush()

    def receive(self, timeout: float = 20) -> dict:
        try:
            return json.loads(self.lines.get(timeout=timeout))
        except queue.Empty:
            raise AssertionError(f"no answer within {timeout} s") from None

    def ask(self, line: bytes) -> dict:
        self.send(line)
        return self.receive()

    def close(self) -> None:
        self.process.stdin.close()
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def _message(**fields) -> bytes:
    return json.dumps({"jsonrpc": "2.0", **fields}).encode()


DEEP = 5000
MALFORMED = [
    # (what, line, code, id)
    ("not JSON", b"this is not json", -32700, None),
    ("a cut-off message", b'{"jsonrpc": "2.0", "id": 3, "method": "ping", "par', -32700, None),
    ("bytes that are not UTF-8", b'{"jsonrpc": "2.0", "id": 4, "method": "ping", "x": "\xff\xfe"}', -32700, None),
    ("a surrogate encoded as bytes", b'{"jsonrpc": "2.0", "id": 5, "method": "ping", "x": "\xed\xa0\x80"}', -32700, None),
    (
        "a lone surrogate escape",
        b'{"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": {"name": "recall", "arguments": {"query": "\\ud800"}}}',
        -32600,
        6,
    ),
    ("a lone surrogate in the id", b'{"jsonrpc": "2.0", "id": "\\udfff", "method": "ping"}', -32600, None),
    (
        f"{DEEP} levels of nesting",
        b'{"jsonrpc": "2.0", "id": 7, "method": "ping", "params": {"a": ' + b"[" * DEEP + b"]" * DEEP + b"}}",
        -32700,
        None,
    ),
    (
        "nesting past the limit",
        _message(id=8, method="ping", params={"a": json.loads("[" * MAX_NESTING + "]" * MAX_NESTING)}),
        -32600,
        8,
    ),
    ("no method", _message(id=9), -32600, 9),
    ("JSON-RPC 1.0", json.dumps({"jsonrpc": "1.0", "id": 10, "method": "ping"}).encode(), -32600, 10),
    ("a boolean id", _message(id=True, method="ping"), -32600, None),
    ("a null id", _message(id=None, method="ping"), -32600, None),
    ("an object id", _message(id={"a": 1}, method="ping"), -32600, None),
    ("a batch", b"[" + _message(id=11, method="ping") + b"]", -32600, None),
    ("an empty batch", b"[]", -32600, None),
    ("a bare number", b"42", -32600, None),
    ("params that are not an object", _message(id="twelve", method="tools/call", params="recall"), -32600, "twelve"),
    ("a message over the size limit", _message(id=13, method="ping", params={"pad": "x" * MAX_MESSAGE_BYTES}), -32600, None),
]


def test_every_malformed_json_rpc_line_on_stdio_gets_its_error_and_the_server_goes_on(api_server, token, tmp_path):
    stderr = (tmp_path / "stderr.log").open("wb")
    raw = RawStdio(server_env(api_server, token), stderr)
    try:
        hello = raw.ask(
            _message(
                id=1,
                method="initialize",
                params={"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
            )
        )
        assert hello["id"] == 1 and hello["result"]["serverInfo"]["name"] == "governed-memory"
        raw.send(_message(method="notifications/initialized"))
        raw.send(b"")  # a blank line carries no message and gets no answer

        for what, line, code, request_id in MALFORMED:
            answer = raw.ask(line)
            assert answer["jsonrpc"] == "2.0", what
            assert (answer["error"]["code"], answer["id"]) == (code, request_id), (what, answer)
            assert answer["error"]["message"].startswith("Parse error" if code == -32700 else "Invalid Request"), what
            assert "result" not in answer

        assert raw.ask(_message(id=99, method="ping")) == {"jsonrpc": "2.0", "id": 99, "result": {}}
        listed = raw.ask(_message(id=100, method="tools/list"))
        assert {tool["name"] for tool in listed["result"]["tools"]} == {
            "remember",
            "recall",
            "forget",
            "confirm",
            "list_memories",
        }
        called = raw.ask(
            _message(
                id=101,
                method="tools/call",
                params={"name": "confirm", "arguments": {"memory_id": "../forget/?", "expected_version": 1}},
            )
        )
        assert called["id"] == 101 and called["result"]["isError"] is True
        assert raw.process.poll() is None
    finally:
        raw.close()
        stderr.close()
    assert raw.process.returncode == 0, (tmp_path / "stderr.log").read_text()[-3000:]
    assert ForgetRequest.objects.count() == 0 and MemoryRecord.objects.count() == 0


@pytest.mark.parametrize(
    ("what", "line", "message"),
    [
        (
            "not JSON",
            b"{oops",
            "Parse error: the message is not valid JSON: Expecting property name enclosed in double quotes at character 1.",
        ),
        ("not UTF-8", b'"\xff"', "Parse error: the message is not UTF-8 text."),
        ("too deep", b"[" * DEEP + b"]" * DEEP, f"Parse error: the message is nested deeper than {MAX_NESTING} levels."),
        (
            "a lone surrogate",
            b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"q": "\\ud800"}}',
            "Invalid Request: a string holds a lone surrogate (\\ud800-\\udfff), which is not Unicode text.",
        ),
        (
            "a boolean id",
            b'{"jsonrpc": "2.0", "id": true, "method": "ping"}',
            "Invalid Request: a request's id must be a string or an integer.",
        ),
    ],
)
def test_the_error_says_what_is_wrong_with_the_line(what, line, message):
    assert rejection(line).error.message == message
    assert rejection(_message(id=1, method="ping", params={"q": "😀 fine"})) is None
