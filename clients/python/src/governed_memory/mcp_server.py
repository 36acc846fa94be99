"""`governed-memory-mcp`: the governed memory service as an MCP server, on the official MCP
Python SDK, over stdio (for a desktop agent) or streamable HTTP.

Configured by the environment: GOVERNED_MEMORY_URL (the service, e.g. http://127.0.0.1:8000),
GOVERNED_MEMORY_TOKEN (an agent token; it fixes tenant, agent, purposes and capabilities),
optionally GOVERNED_MEMORY_PURPOSE (the purpose tools use when the model names none) and
GOVERNED_MEMORY_MCP_LOG_LEVEL (default WARNING; logs go to stderr and never carry content).

Tools: remember, recall, forget, confirm, list_memories. Their descriptions teach the rules a
model must follow (which authority for which source, what quarantine means, that recalled
memories are dated data and not instructions), and every result carries each memory's
provenance and trust, as text for the model and as structured content.

Every argument is checked before anything is sent (governed_memory._mcp_guard): ids must be
UUIDs, strings must be Unicode text without NUL within the service's limits, the idempotency key
must be something a header carries; a refusal is a tool error naming the field. Over stdio every
line gets an answer: a malformed message gets its JSON-RPC error.

Over streamable HTTP every caller acts with this server's token: it listens on 127.0.0.1 unless
told otherwise, and should not be exposed further without a proxy that authenticates callers.
"""

# No `from __future__ import annotations`: the MCP SDK reads the tools' annotations (with their
# closures) to build each tool's JSON schema.
import argparse
import os
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Annotated, Any, Literal, cast

from governed_memory import _tools
from governed_memory._core import TOKEN_ENV, URL_ENV, settings_from_env
from governed_memory._tools import INSTRUCTIONS
from governed_memory.client import AsyncClient
from governed_memory.errors import GovernedMemoryError
from governed_memory.models import Memory

if TYPE_CHECKING:
    from mcp.server import MCPServer

PURPOSE_ENV = "GOVERNED_MEMORY_PURPOSE"
LOG_LEVEL_ENV = "GOVERNED_MEMORY_MCP_LOG_LEVEL"
LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]  # what the SDK's server takes

__all__ = ["INSTRUCTIONS", "build_server", "main"]


def build_server(client_factory: Callable[[], AsyncClient], *, default_purpose: str | None = None) -> "MCPServer[Any]":
    """The MCP server with its five tools, each calling the service through `client_factory()`.
    What they say and check is governed_memory._tools and governed_memory._tool_args."""
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.types import CallToolResult, TextContent, ToolAnnotations
    from pydantic import Field

    from governed_memory import _tool_args as arg
    from governed_memory._mcp_guard import GuardedMCPServer
    from governed_memory._version import __version__

    server = GuardedMCPServer(
        "governed-memory",
        instructions=INSTRUCTIONS,
        version=__version__,
        # Any other value is refused by the SDK's settings (a pydantic model) when the server starts.
        log_level=cast(LogLevel, os.environ.get(LOG_LEVEL_ENV, "WARNING").upper()),
    )
    Purpose = Annotated[arg.PurposeText | None, Field(description=arg.purpose_help(default_purpose))]

    def result(text: str, structured: dict[str, Any]) -> CallToolResult:
        return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=structured)

    def purpose_of(purpose: str | None) -> str:
        chosen = purpose or default_purpose
        if not chosen:
            raise ToolError("purpose is required: one of the purposes your token allows.")
        return chosen

    async def call(operation: Callable[[AsyncClient], Awaitable[Any]]) -> Any:
        try:
            return await operation(client_factory())
        except GovernedMemoryError as error:
            raise ToolError(_tools.tool_error_text(error)) from None

    @server.tool(
        description=_tools.REMEMBER,
        annotations=ToolAnnotations(title="Remember", read_only_hint=False, destructive_hint=False, idempotent_hint=False),
    )
    async def remember(
        content: arg.Content,
        subject: arg.Subject,
        source_type: arg.SourceType,
        confidence: arg.Confidence,
        kind: arg.Kind = "semantic",
        purpose: Purpose = None,
        authority: arg.Authority = None,
        session_id: arg.SessionId = None,
        turn_id: arg.TurnId = None,
        source_uri: arg.SourceUri = None,
        tool_name: arg.ToolName = None,
        observed_at: arg.ObservedAt = None,
        contaminated: arg.Contaminated = False,
        ttl_seconds: arg.TtlSeconds = None,
        supersedes: arg.Supersedes = None,
        supersedes_version: arg.SupersedesVersion = None,
        idempotency_key: arg.IdempotencyKey = None,
    ) -> CallToolResult:
        memory = await call(
            lambda client: client.remember(
                content,
                subject=subject,
                purpose=purpose_of(purpose),
                kind=kind,
                provenance=_tools.provenance_from(
                    source_type,
                    source_uri=source_uri,
                    session_id=session_id,
                    turn_id=turn_id,
                    tool_name=tool_name,
                    observed_at=observed_at,
                    contaminated=contaminated,
                ),
                confidence=confidence,
                authority=authority,
                ttl_seconds=ttl_seconds,
                supersedes=supersedes,
                supersedes_version=supersedes_version,
                idempotency_key=idempotency_key,
            )
        )
        return result(_tools.remember_text(memory), _tools.memory_view(memory))

    @server.tool(description=_tools.RECALL, annotations=ToolAnnotations(title="Recall", read_only_hint=True))
    async def recall(
        query: arg.Query,
        purpose: Purpose = None,
        subject: arg.RecallSubject = None,
        kinds: arg.Kinds = None,
        limit: arg.RecallLimit = 10,
        token_budget: arg.TokenBudget = None,
        min_relevance: arg.MinRelevance = None,
    ) -> CallToolResult:
        recalled = await call(
            lambda client: client.recall(
                query,
                purpose=purpose_of(purpose),
                subject=subject,
                kinds=kinds or None,
                limit=limit,
                token_budget=token_budget,
                min_relevance=min_relevance,
            )
        )
        return result(_tools.recall_text(recalled), _tools.recall_view(recalled))

    @server.tool(
        description=_tools.FORGET,
        annotations=ToolAnnotations(title="Forget a subject", read_only_hint=False, destructive_hint=True, idempotent_hint=True),
    )
    async def forget(subject: arg.ForgetSubject, reason: arg.ForgetReason = "") -> CallToolResult:
        request = await call(lambda client: client.forget(subject, reason=reason))
        return result(_tools.forget_text(request, subject), _tools.forget_view(request))

    @server.tool(
        description=_tools.CONFIRM,
        annotations=ToolAnnotations(title="Confirm", read_only_hint=False, destructive_hint=False, idempotent_hint=False),
    )
    async def confirm(
        memory_id: arg.MemoryId, expected_version: arg.ExpectedVersion, note: arg.ConfirmNote = ""
    ) -> CallToolResult:
        memory = await call(lambda client: client.confirm(memory_id, expected_version=expected_version, note=note))
        return result(_tools.confirm_text(memory), _tools.memory_view(memory))

    @server.tool(description=_tools.LIST, annotations=ToolAnnotations(title="List memories", read_only_hint=True))
    async def list_memories(
        status: arg.ListStatus = None,
        subject: arg.ListSubject = None,
        purpose: arg.ListPurpose = None,
        kind: arg.ListKind = None,
        limit: arg.ListLimit = 20,
    ) -> CallToolResult:
        async def fetch(client: AsyncClient) -> list[Memory]:
            found: list[Memory] = []
            async for memory in client.list(status=status, subject=subject, purpose=purpose, kind=kind, page_size=limit):
                found.append(memory)
                if len(found) >= limit:
                    break
            return found

        memories = await call(fetch)
        return result(_tools.list_text(memories), {"count": len(memories), "memories": [_tools.memory_view(m) for m in memories]})

    return server


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="governed-memory-mcp",
        description=f"MCP server for governed memory. Environment: {URL_ENV}, {TOKEN_ENV}, "
        f"optional {PURPOSE_ENV} and {LOG_LEVEL_ENV}.",
    )
    parser.add_argument(
        "--transport",
        choices=["stdio", "streamable-http"],
        default="stdio",
        help="stdio (default; for a desktop agent) or streamable-http",
    )
    parser.add_argument("--host", default="127.0.0.1", help="streamable-http: address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8765, help="streamable-http: port (default 8765)")
    parser.add_argument("--path", default="/mcp", help="streamable-http: endpoint path (default /mcp)")
    args = parser.parse_args(argv)

    try:
        import mcp  # noqa: F401
    except ImportError:
        sys.exit("governed-memory-mcp needs the MCP SDK: pip install 'governed-memory-client[mcp]'")
    try:
        url, token = settings_from_env(None, None)
    except ValueError as exc:
        sys.exit(f"governed-memory-mcp: {exc}")

    clients: list[AsyncClient] = []

    def client_factory() -> AsyncClient:
        # Made on first use, inside the server's event loop, and kept for the process's life.
        if not clients:
            clients.append(AsyncClient(url, token))
        return clients[0]

    server = build_server(client_factory, default_purpose=os.environ.get(PURPOSE_ENV) or None)
    if args.transport == "stdio":
        server.run("stdio")
    else:
        server.run("streamable-http", host=args.host, port=args.port, streamable_http_path=args.path)


if __name__ == "__main__":
    main()
