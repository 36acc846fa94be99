"""The memory tools' arguments as pydantic types, one per field, each with the description that
teaches a model what to put there and the checks made before anything is sent. The MCP server and
the OpenAI Agents SDK tools declare their tools' parameters with these, so both frameworks build
the same JSON schemas from one definition. (Imported only with the `mcp` or `openai-agents` extra:
pydantic comes with either.)

- Every string is `Annotated[str, Text(max_length=...)]`: its length first (pydantic's message
  names characters), then Unicode text without NUL.
- Ids (`MemoryIdArg`) and idempotency keys (`IdempotencyKeyArg`) are checked by the client's rules.
- `arguments_error_text` reports a refusal field by field, without the rejected values.
"""

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Annotated, Any

from annotated_types import GroupedMetadata
from pydantic import AfterValidator, Field, StringConstraints, ValidationError, WithJsonSchema
from pydantic_core import PydanticCustomError

from governed_memory import _core
from governed_memory._tools import (
    DATETIME_MAX_CHARS,
    KIND_MAX_CHARS,
    LIST_LIMIT_MAX,
    NOTE_MAX_CHARS,
    PROVENANCE_TEXT_MAX_CHARS,
    PURPOSE_MAX_CHARS,
    RECALL_KINDS_MAX_ITEMS,
    RECALL_LIMIT_MAX,
    RECALL_QUERY_MAX_CHARS,
    SOURCES,
    SUBJECT_MAX_CHARS,
    TOKEN_BUDGET_MAX,
    TTL_MAX_SECONDS,
    URI_MAX_CHARS,
    VERSION_MAX,
    AuthorityArg,
    SourceTypeArg,
    StatusArg,
)


def is_unicode(value: Any) -> bool:
    """False when a string in `value` holds a lone surrogate (which UTF-8 cannot carry)."""
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _refuse(message: str) -> PydanticCustomError:
    return PydanticCustomError("invalid_argument", message)


def _text(value: str) -> str:
    if "\x00" in value:
        raise _refuse("must not contain NUL characters")
    if not is_unicode(value):
        raise _refuse("must be Unicode text (it holds a lone surrogate)")
    return value


def _memory_id(value: str) -> str:
    try:
        return _core.uuid_id(value, "")
    except ValueError:
        raise _refuse(_core.UUID_RULE) from None


def _idempotency_key(value: str) -> str:
    try:
        return _core.checked_idempotency_key(value)
    except ValueError:
        raise _refuse(_core.IDEMPOTENCY_KEY_RULE) from None


@dataclass(frozen=True)
class Text(GroupedMetadata):
    """The rule for every string a tool takes, written `Annotated[str, Text(max_length=...)]` (metadata
    rather than a type built by a call, so that type checkers read the argument as a `str`): its
    length first (pydantic's message names characters), then Unicode text without NUL. Ids and
    keys are checked by the client's rules."""

    min_length: int | None = None
    max_length: int | None = None

    def __iter__(self) -> Iterator[object]:
        yield from StringConstraints(min_length=self.min_length, max_length=self.max_length)
        yield AfterValidator(_text)


MemoryIdArg = Annotated[str, AfterValidator(_memory_id), WithJsonSchema({"type": "string", "format": "uuid"})]
IdempotencyKeyArg = Annotated[
    str, AfterValidator(_idempotency_key), WithJsonSchema({"type": "string", "pattern": f"^{_core.IDEMPOTENCY_KEY_PATTERN}$"})
]


def arguments_error_text(tool: str, error: ValidationError) -> str:
    """Field by field, without the rejected values (they are the caller's data) or pydantic's links."""
    lines = [
        f"  {'.'.join(str(part) for part in problem['loc']) or 'arguments'}: {problem['msg']}"
        for problem in error.errors(include_url=False, include_input=False, include_context=False)
    ]
    return "\n".join([f"Error executing tool {tool}: invalid arguments, nothing was sent.", *lines])


def purpose_help(default_purpose: str | None) -> str:
    if default_purpose:
        return f"One of the purposes your token allows (default: {default_purpose!r})."
    return "One of the purposes your token allows, e.g. 'support'. Required."


PurposeText = Annotated[str, Text(max_length=PURPOSE_MAX_CHARS)]

# --------------------------------------------------------------------------------------------
# remember

Content = Annotated[
    str,
    Text(min_length=1),
    Field(description="One distilled claim as a sentence, e.g. 'Prefers email over phone.'. Not a transcript."),
]
Subject = Annotated[
    str, Text(min_length=1, max_length=SUBJECT_MAX_CHARS), Field(description="Who or what it is about, e.g. 'customer/acme'.")
]
SourceType = Annotated[
    SourceTypeArg,
    Field(
        description=(
            "Where the claim came from: user_turn (the user said it), tool_output (a tool returned it), web_page, "
            "document, agent_inference (your own conclusion), operator_config, import."
        )
    ),
]
Confidence = Annotated[
    float,
    Field(ge=0, le=1, description="How sure you are the claim is right, in [0, 1]. A claim, never treated as verification."),
]
Kind = Annotated[
    str,
    Text(min_length=1, max_length=KIND_MAX_CHARS),
    Field(
        description=(
            "The memory kind, which sets its time to live: preference, semantic (a fact), procedural (how to do "
            "something), episodic (an event), working_note (short-lived)."
        )
    ),
]
Authority = Annotated[
    AuthorityArg | None,
    Field(description=f"Whose authority the claim carries. Leave empty to use the one that fits the source ({SOURCES})."),
]
SessionId = Annotated[
    Annotated[str, Text(max_length=PROVENANCE_TEXT_MAX_CHARS)] | None,
    Field(description="This conversation's id (user_turn and tool_output need it, or a source_uri)."),
]
TurnId = Annotated[
    Annotated[str, Text(max_length=PROVENANCE_TEXT_MAX_CHARS)] | None,
    Field(description="The turn of the conversation the claim came from."),
]
SourceUri = Annotated[
    Annotated[str, Text(max_length=URI_MAX_CHARS)] | None,
    Field(
        description="The source's address: the page URL, document path or tool call reference (web_page and document need it)."
    ),
]
ToolName = Annotated[
    Annotated[str, Text(max_length=PROVENANCE_TEXT_MAX_CHARS)] | None,
    Field(description="The tool's name (tool_output needs it)."),
]
ObservedAt = Annotated[
    Annotated[str, Text(max_length=DATETIME_MAX_CHARS)] | None,
    Field(description="When the source said it, ISO 8601 with a zone, e.g. 2026-11-29T10:00:00Z."),
]
Contaminated = Annotated[
    bool,
    Field(
        description=(
            "True if this conversation has read web pages, tool output or documents before this claim; the memory "
            "then awaits human review."
        )
    ),
]
TtlSeconds = Annotated[
    int | None, Field(ge=1, le=TTL_MAX_SECONDS, description="Time to live in seconds; empty for the kind's default.")
]
Supersedes = Annotated[MemoryIdArg | None, Field(description="The id (a UUID) of the memory this one corrects.")]
SupersedesVersion = Annotated[
    int | None, Field(ge=1, le=VERSION_MAX, description="That memory's current version (required with supersedes).")
]
IdempotencyKey = Annotated[
    IdempotencyKeyArg | None,
    Field(
        description=(
            "Optional: the same key on a repeated attempt of the same write stores it once. 1 to "
            f"{_core.IDEMPOTENCY_KEY_MAX_CHARS} visible ASCII characters, no spaces."
        )
    ),
]

# --------------------------------------------------------------------------------------------
# recall

Query = Annotated[str, Text(max_length=RECALL_QUERY_MAX_CHARS), Field(description="What you need to know, in words.")]
RecallSubject = Annotated[
    Annotated[str, Text(max_length=SUBJECT_MAX_CHARS)] | None,
    Field(description="Only memories about this subject, e.g. 'customer/acme'."),
]
Kinds = Annotated[
    list[Annotated[str, Text(min_length=1, max_length=KIND_MAX_CHARS)]] | None,
    Field(max_length=RECALL_KINDS_MAX_ITEMS, description="Only these kinds, e.g. ['preference']."),
]
RecallLimit = Annotated[int, Field(ge=1, le=RECALL_LIMIT_MAX, description="At most this many memories.")]
TokenBudget = Annotated[int | None, Field(ge=1, le=TOKEN_BUDGET_MAX, description="Fill at most about this many tokens.")]
MinRelevance = Annotated[
    float | None,
    Field(
        ge=0, le=1, description="Leave out memories less relevant than this (0 to 1; 0 keeps all). Default: the service's floor."
    ),
]

# --------------------------------------------------------------------------------------------
# forget, confirm, list

ForgetSubject = Annotated[
    str,
    Text(min_length=1, max_length=SUBJECT_MAX_CHARS),
    Field(description="Every memory about this subject is forgotten, e.g. 'customer/acme'."),
]
ForgetReason = Annotated[
    str, Text(max_length=NOTE_MAX_CHARS), Field(description="Why, e.g. 'erasure request from the user'. No personal data.")
]
MemoryId = Annotated[MemoryIdArg, Field(description="The memory's id (a UUID).")]
ExpectedVersion = Annotated[int, Field(ge=1, le=VERSION_MAX, description="The version you re-checked.")]
ConfirmNote = Annotated[
    str, Text(max_length=NOTE_MAX_CHARS), Field(description="How you re-checked it; kept in the memory's history.")
]
ListStatus = Annotated[StatusArg | None, Field(description="Only this status, e.g. quarantined.")]
ListSubject = Annotated[Annotated[str, Text(max_length=SUBJECT_MAX_CHARS)] | None, Field(description="Only this subject.")]
ListPurpose = Annotated[PurposeText | None, Field(description="Only this purpose.")]
ListKind = Annotated[Annotated[str, Text(max_length=KIND_MAX_CHARS)] | None, Field(description="Only this kind.")]
ListLimit = Annotated[int, Field(ge=1, le=LIST_LIMIT_MAX, description="At most this many.")]
