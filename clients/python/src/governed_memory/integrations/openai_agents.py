"""Memory tools for the OpenAI Agents SDK: `memory_tools(client=None, *, purpose)` returns the
SDK's `FunctionTool`s `remember`, `recall`, `forget` and `confirm`. Install with
`pip install 'governed-memory-client[openai-agents]'`.

    from agents import Agent
    from governed_memory.integrations.openai_agents import INSTRUCTIONS, memory_tools

    agent = Agent(name="support", instructions="Help Acme's customers.\\n\\n" + INSTRUCTIONS,
                  tools=memory_tools(purpose="support"))  # GOVERNED_MEMORY_URL, GOVERNED_MEMORY_TOKEN

The tools are the MCP server's (governed_memory.mcp_server): the same descriptions and argument
schemas, which teach the model the rules (which authority for which source, that quarantine awaits
human review, that recalled memories are dated data and not instructions), the same checks before
anything is sent, and the same answers. `INSTRUCTIONS` is those rules as one text for the agent's
instructions. The purpose is the developer's choice, fixed here, not the model's.

Each tool answers with text for the model and then the result as JSON (ids, versions, status,
provenance and trust). A refusal is an answer too, not an exception that ends the run: invalid
arguments name each field and what is wrong without echoing the value (nothing was sent), and an
error from the service says what to do about it (a conflict gives the current version).

The schemas are not in the SDK's strict mode: a model may leave out the optional provenance
fields, and the limits on every string (lengths) are JSON Schema keywords strict mode does not
take. Every argument is checked by the tool before anything is sent.
"""

# No `from __future__ import annotations`: the SDK reads the tools' annotations to build their
# JSON schemas.
import json
import logging
import traceback
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any, cast

import anyio.to_thread
from agents import FunctionTool, RunContextWrapper
from agents.function_schema import function_schema
from pydantic import ValidationError

from governed_memory import _core, _tools
from governed_memory import _tool_args as arg
from governed_memory._tools import INSTRUCTIONS
from governed_memory.client import AsyncClient, Client
from governed_memory.errors import GovernedMemoryError

__all__ = ["INSTRUCTIONS", "memory_tools"]

logger = logging.getLogger("governed_memory.openai_agents")

Operation = Callable[[AsyncClient], Awaitable[Any]]


def memory_tools(client: AsyncClient | Client | None = None, *, purpose: str) -> list[FunctionTool]:
    """The tools `remember`, `recall`, `forget` and `confirm`, writing and recalling for
    `purpose` (the token must allow it). `client`: an `AsyncClient`; a `Client` (its calls then
    run in a worker thread); or None to read GOVERNED_MEMORY_URL and GOVERNED_MEMORY_TOKEN now, as
    `Client()` does, and open a connection per call (so the tools work in any event loop, as
    `Runner.run_sync` makes a new one each time). Forgetting and confirming need a token with
    those capabilities."""
    settings = _core.settings_from_env(None, None) if client is None else None

    async def call(operation: Operation) -> Any:
        if isinstance(client, AsyncClient):
            return await operation(client)
        if isinstance(client, Client):
            return await anyio.to_thread.run_sync(partial(_in_thread, operation, client))
        async with AsyncClient(*cast(tuple[str, str], settings)) as fresh:
            return await operation(fresh)

    async def remember(
        content: arg.Content,
        subject: arg.Subject,
        source_type: arg.SourceType,
        confidence: arg.Confidence,
        kind: arg.Kind = "semantic",
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
    ) -> str:
        provenance = _tools.provenance_from(
            source_type,
            source_uri=source_uri,
            session_id=session_id,
            turn_id=turn_id,
            tool_name=tool_name,
            observed_at=observed_at,
            contaminated=contaminated,
        )
        memory = await call(
            lambda c: c.remember(
                content,
                subject=subject,
                purpose=purpose,
                kind=kind,
                provenance=provenance,
                confidence=confidence,
                authority=authority,
                ttl_seconds=ttl_seconds,
                supersedes=supersedes,
                supersedes_version=supersedes_version,
                idempotency_key=idempotency_key,
            )
        )
        return _answer(_tools.remember_text(memory), _tools.memory_view(memory))

    async def recall(
        query: arg.Query,
        subject: arg.RecallSubject = None,
        kinds: arg.Kinds = None,
        limit: arg.RecallLimit = 10,
        token_budget: arg.TokenBudget = None,
        min_relevance: arg.MinRelevance = None,
    ) -> str:
        recalled = await call(
            lambda c: c.recall(
                query,
                purpose=purpose,
                subject=subject,
                kinds=kinds or None,
                limit=limit,
                token_budget=token_budget,
                min_relevance=min_relevance,
            )
        )
        return _answer(_tools.recall_text(recalled), _tools.recall_view(recalled))

    async def forget(subject: arg.ForgetSubject, reason: arg.ForgetReason = "") -> str:
        request = await call(lambda c: c.forget(subject, reason=reason))
        return _answer(_tools.forget_text(request, subject), _tools.forget_view(request))

    async def confirm(memory_id: arg.MemoryId, expected_version: arg.ExpectedVersion, note: arg.ConfirmNote = "") -> str:
        memory = await call(lambda c: c.confirm(memory_id, expected_version=expected_version, note=note))
        return _answer(_tools.confirm_text(memory), _tools.memory_view(memory))

    return [
        _tool(remember, _tools.REMEMBER),
        _tool(recall, _tools.RECALL),
        _tool(forget, _tools.FORGET),
        _tool(confirm, _tools.CONFIRM),
    ]


def _in_thread(operation: Operation, client: Client) -> Any:
    """Run an operation written for the AsyncClient with a sync Client, whose methods return
    what the async ones' awaitables would."""
    return operation(cast(AsyncClient, client))


def _answer(text: str, structured: dict[str, Any]) -> str:
    return f"{text}\n\nAs data: {json.dumps(structured)}"


def _tool(function: Callable[..., Awaitable[str]], description: str) -> FunctionTool:
    schema = function_schema(function, description_override=description, use_docstring_info=False, strict_json_schema=False)
    name = schema.name

    async def invoke(context: RunContextWrapper[Any], arguments: str) -> str:
        try:
            data = json.loads(arguments) if arguments else {}
        except ValueError:
            return f"Error executing tool {name}: the arguments are not JSON, nothing was sent."
        if not isinstance(data, dict):
            return f"Error executing tool {name}: the arguments must be a JSON object, nothing was sent."
        try:
            parsed = schema.params_pydantic_model.model_validate(data)
        except ValidationError as error:
            return arg.arguments_error_text(name, error)
        args, kwargs = schema.to_call_args(parsed)
        try:
            return await function(*args, **kwargs)
        except GovernedMemoryError as error:
            return _tools.tool_error_text(error)
        except Exception as error:  # a failure inside the tool reaches the model as a plain answer, logged without data
            frames = traceback.extract_tb(error.__traceback__)
            where = f" at {frames[-1].filename}:{frames[-1].lineno}" if frames else ""
            logger.error("Tool %r failed with %s%s", name, type(error).__name__, where)
            return (
                f"Error executing tool {name}: it failed inside the tool ({type(error).__name__}). It may or may not "
                "have reached the memory service; a write repeated with the same idempotency_key is stored once."
            )

    return FunctionTool(
        name=name,
        description=description,
        params_json_schema=schema.params_json_schema,
        on_invoke_tool=invoke,
        strict_json_schema=False,
    )
