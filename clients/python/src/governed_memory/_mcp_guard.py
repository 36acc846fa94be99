"""What `governed-memory-mcp` adds to the MCP SDK at its edges, so that every message gets an
answer and no input breaks the server (imported only with the `mcp` extra).

- stdio: the SDK's transport hands a line it cannot read to the session as an exception, which
  the session only logs (python-sdk issue #2751): a malformed request then waits forever, and the
  transport reads a line of any length. `CheckedLines` reads stdin for it, a line of at most
  MAX_MESSAGE_BYTES at a time, and answers a line it does not pass on as JSON-RPC 2.0 says:
  -32700 (Parse error, id null) for what is not JSON text, -32600 (Invalid Request) for JSON that
  is not a message the server reads (too large, nested too deeply, a lone surrogate, a request id
  that is neither a string nor an integer, not a JSON-RPC 2.0 envelope), with the request's id when
  it has a usable one. Good lines go to the SDK's transport unchanged: its framing, its writer,
  its guard on fd 1.
- tools: their arguments are typed by governed_memory._tool_args, argument errors reach the
  model as plain `field: message` lines without the rejected values, and a crash inside a tool is
  a plain tool error, logged by type and place only (its text may hold data).
"""

import json
import logging
import sys
import traceback
from typing import Any, BinaryIO, cast

import anyio
import anyio.to_thread
from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.server.stdio import stdio_server
from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE
from mcp.shared.message import SessionMessage
from mcp.types import INVALID_REQUEST, PARSE_ERROR, ErrorData, JSONRPCError, RequestId, jsonrpc_message_adapter
from pydantic import ValidationError

from governed_memory._tool_args import arguments_error_text, is_unicode

logger = logging.getLogger("governed_memory.mcp")

MAX_MESSAGE_BYTES = DEFAULT_MAX_REQUEST_BODY_SIZE  # the SDK's limit for a streamable HTTP body: one limit for both
MAX_NESTING = 64  # levels of arrays and objects in one message; the tools' arguments need five
_DISCARD_CHUNK = 64 * 1024


# --------------------------------------------------------------------------------------------
# stdio


def _error(request_id: RequestId | None, code: int, message: str) -> JSONRPCError:
    return JSONRPCError(jsonrpc="2.0", id=request_id, error=ErrorData(code=code, message=message))


def _usable_id(value: Any) -> RequestId | None:
    """The id to answer with: the message's own, when it is a string or an integer (MCP's ids)
    the answer can carry; else None (`"id": null`, the id could not be determined)."""
    request_id = value.get("id") if isinstance(value, dict) else None
    if isinstance(request_id, int) and not isinstance(request_id, bool):
        return request_id
    return request_id if isinstance(request_id, str) and is_unicode(request_id) else None


def _depth(value: Any) -> int:
    """Levels of nesting, counted level by level (no recursion on the caller's data)."""
    depth, level = 0, [value]
    while level:
        depth += 1
        level = [
            child
            for item in level
            if isinstance(item, (dict, list))
            for child in (item.values() if isinstance(item, dict) else item)
        ]
        if depth > MAX_NESTING:
            break
    return depth


def rejection(line: bytes) -> JSONRPCError | None:
    """None for a line the SDK reads as a JSON-RPC message; else the error that answers it."""
    try:
        value = json.loads(line.decode("utf-8"))
    except UnicodeDecodeError:
        return _error(None, PARSE_ERROR, "Parse error: the message is not UTF-8 text.")
    except RecursionError:
        return _error(None, PARSE_ERROR, f"Parse error: the message is nested deeper than {MAX_NESTING} levels.")
    except ValueError as exc:
        detail = f": {exc.msg} at character {exc.pos}" if isinstance(exc, json.JSONDecodeError) else ""
        return _error(None, PARSE_ERROR, f"Parse error: the message is not valid JSON{detail}.")
    request_id = _usable_id(value)
    if _depth(value) > MAX_NESTING:
        return _error(request_id, INVALID_REQUEST, f"Invalid Request: the message is nested deeper than {MAX_NESTING} levels.")
    if not is_unicode(value):
        return _error(
            request_id,
            INVALID_REQUEST,
            "Invalid Request: a string holds a lone surrogate (\\ud800-\\udfff), which is not Unicode text.",
        )
    if isinstance(value, dict) and "method" in value and "id" in value and request_id is None:
        # The SDK would read {"id": true, "method": ...} as a notification and never answer it.
        return _error(None, INVALID_REQUEST, "Invalid Request: a request's id must be a string or an integer.")
    try:
        jsonrpc_message_adapter.validate_json(line, by_name=False)  # as the SDK's transport will read it
    except ValidationError:
        return _error(
            request_id,
            INVALID_REQUEST,
            "Invalid Request: not a JSON-RPC 2.0 request, notification or "
            'response (an object with jsonrpc "2.0" and a method, or a result '
            "or error).",
        )
    return None


class CheckedLines:
    """Stdin's lines that are JSON-RPC messages, as the `stdin` of the SDK's stdio transport; every
    other line is answered on the transport's write stream once `answer_on` has given it. Blank
    lines carry no message and are skipped."""

    def __init__(self, source: BinaryIO):
        self._source = source
        self._write_stream: Any = None
        self._attached = anyio.Event()

    def answer_on(self, write_stream: Any) -> None:
        self._write_stream = write_stream
        self._attached.set()

    def __aiter__(self) -> "CheckedLines":
        return self

    async def __anext__(self) -> str:
        while True:
            line = await anyio.to_thread.run_sync(self._read_line, abandon_on_cancel=True)
            if line is None:
                raise StopAsyncIteration
            error: JSONRPCError | None
            if not line:
                error = _error(None, INVALID_REQUEST, f"Invalid Request: the message is larger than {MAX_MESSAGE_BYTES} bytes.")
            elif not line.strip():
                continue
            else:
                error = rejection(line)
                if error is None:
                    return line.decode("utf-8")
            await self._attached.wait()
            await self._write_stream.send(SessionMessage(error))

    def _read_line(self) -> bytes | None:
        """One line (None at the end of input); b"" for a line over the limit, read to its end and
        dropped, so memory stays bounded whatever the sender writes."""
        line = self._source.readline(MAX_MESSAGE_BYTES + 1)
        if not line:
            return None
        if len(line) <= MAX_MESSAGE_BYTES or line.endswith(b"\n"):
            return line
        while (rest := self._source.readline(_DISCARD_CHUNK)) and not rest.endswith(b"\n"):
            pass
        return b""


def _unicode_safe(text: str) -> str:
    return text.encode("utf-8", "replace").decode("utf-8")


class GuardedMCPServer(MCPServer[Any]):
    """MCPServer with the stdio transport above and plain tool errors."""

    async def run_stdio_async(self) -> None:
        lines = CheckedLines(sys.stdin.buffer)
        async with stdio_server(stdin=cast(Any, lines)) as (read_stream, write_stream):
            lines.answer_on(write_stream)
            server = self._lowlevel_server
            await server.run(read_stream, write_stream, server.create_initialization_options())

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        try:
            result = await super().call_tool(name, arguments, context)
        except UnexpectedToolError as error:
            cause = error.__cause__ or error
            frames = traceback.extract_tb(cause.__traceback__)
            where = f" at {frames[-1].filename}:{frames[-1].lineno}" if frames else ""
            logger.error("Tool %r failed with %s%s", name, type(cause).__name__, where)
            raise ToolError(
                f"Error executing tool {name}: it failed inside the MCP server ({type(cause).__name__}). "
                "It may or may not have reached the memory service: check with list_memories before "
                "repeating a write."
            ) from None
        except ToolError as error:
            if isinstance(error.__cause__, ValidationError):
                raise ToolError(arguments_error_text(name, error.__cause__)) from error.__cause__
            if _unicode_safe(str(error)) != str(error):
                raise ToolError(_unicode_safe(str(error))) from None
            raise
        try:
            result.model_dump_json()
        except ValueError:
            # A lone surrogate from the service (Python's json reads one) would break the SDK's
            # writer, and with it the server.
            raise ToolError(f"Error executing tool {name}: the memory service answered with text that is not Unicode.") from None
        return result
