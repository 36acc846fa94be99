"""Python client (sync and async) for the governed memory service, and its MCP server
(`governed-memory-mcp`, with the `mcp` extra).

    from governed_memory import Client, Provenance

    with Client("http://127.0.0.1:8000", token="gma_...") as memory:
        memory.remember("Prefers email over phone.", subject="customer/acme", purpose="support",
                        kind="preference", confidence=0.9, provenance=Provenance.user_turn("s-1", 12))
        print(memory.recall("how to contact acme", purpose="support").to_prompt())
"""

from governed_memory._core import NO_RETRY, EventPage, RetryPolicy
from governed_memory._version import __version__
from governed_memory.client import AsyncClient, Client
from governed_memory.errors import (
    APIError,
    AuthenticationError,
    Conflict,
    Gone,
    GovernedMemoryError,
    InvalidArgument,
    NotFound,
    RateLimited,
    ScopeDenied,
    ServerError,
    TransportError,
    UnexpectedResponse,
    ValidationError,
)
from governed_memory.models import (
    DEFAULT_AUTHORITY,
    BatchItemResult,
    BatchResult,
    ForgetRequest,
    Memory,
    MemoryDraft,
    Provenance,
    RecallItem,
    RecallResult,
    Receipt,
)

__all__ = [
    "DEFAULT_AUTHORITY",
    "NO_RETRY",
    "APIError",
    "AsyncClient",
    "AuthenticationError",
    "BatchItemResult",
    "BatchResult",
    "Client",
    "Conflict",
    "EventPage",
    "ForgetRequest",
    "Gone",
    "GovernedMemoryError",
    "InvalidArgument",
    "Memory",
    "MemoryDraft",
    "NotFound",
    "Provenance",
    "RateLimited",
    "RecallItem",
    "RecallResult",
    "Receipt",
    "RetryPolicy",
    "ScopeDenied",
    "ServerError",
    "TransportError",
    "UnexpectedResponse",
    "ValidationError",
    "__version__",
]
