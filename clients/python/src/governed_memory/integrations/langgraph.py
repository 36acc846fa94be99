"""A LangGraph long-term memory store on the governed memory service: `GovernedMemoryStore`, a
`BaseStore` (sync and async) over `Client` / `AsyncClient`. Install with
`pip install 'governed-memory-client[langgraph]'`.

    from governed_memory import Provenance
    from governed_memory.integrations.langgraph import GovernedMemoryStore

    store = GovernedMemoryStore(purpose="support")  # GOVERNED_MEMORY_URL, GOVERNED_MEMORY_TOKEN
    graph = builder.compile(store=store)
    # in a node:
    store.put(("customer/acme", "preference"), "s-1-turn-12",
              {"content": "Prefers email over phone.", "confidence": 0.9,
               "provenance": Provenance.user_turn("s-1", 12)})
    store.search(("customer/acme",), query="how to contact acme")

How the store's terms map onto the service's:

- **namespace = (subject, kind)**: `("customer/acme", "preference")` holds the preferences about
  the subject `customer/acme`. `get`, `put` and `delete` take exactly these two labels; `search`
  takes a prefix of them: `()` searches every subject and kind, `(subject,)` every kind about one
  subject. (LangGraph refuses a label holding a period, so such a subject cannot be a namespace.)
- **key = the memory's id**, a UUID the service assigns, as `get` and `search` return it in
  `Item.key`. The key given to `put` for a new memory is not stored: it makes that write safe to
  repeat (the same key and value store one memory; the same key with another value is a
  `Conflict`). A `put` to an existing item's key writes a correction that supersedes it.
- **value**: `put` takes `{"content": str, "provenance": Provenance | dict, "confidence": float}`
  and optionally `"authority"` (by default the one the provenance's source carries); any other
  field is refused. The graph supplies the provenance: where the claim came from (a user's turn,
  a web page, a tool's output...), which decides whether it is admitted or reviewed. `get` and
  `search` return `content`, `authority`, `trust`, `confidence`, `provenance` (a dict),
  `created_at`, `confirmed_at` and `expires_at`; a search item also has `context`, the memory as
  one dated, sourced line for a prompt.

Governance stays visible: a write the service quarantines (anything not said by the user or the
operator in a clean session) is stored but awaits human review, and is neither returned by `get`
nor found by `search` until a reviewer promotes it. `put` then raises `Quarantined`, carrying the
records (their ids and the reason), instead of returning as if an active item had been stored.
Catch it where quarantine is expected and carry on without the memory.

Not supported, each a clear error: `list_namespaces` (`UnsupportedOperation`), and `put` with an
`index` (the service indexes every memory's content itself). `ttl` (minutes) on `put` becomes the
memory's time to live; `refresh_ttl` is ignored: a memory's time to live counts from its write,
and reading it does not extend it.
"""

from __future__ import annotations

import hashlib
import json
import math
import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timezone
from typing import Any

import anyio.to_thread
from langgraph.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    validate_op_namespace,
)

from governed_memory import _core
from governed_memory._tools import RECALL_LIMIT_MAX, provenance_view
from governed_memory.client import AsyncClient, Client
from governed_memory.errors import GovernedMemoryError, InvalidArgument, NotFound
from governed_memory.models import Memory, Provenance, RecallItem

__all__ = ["GovernedMemoryStore", "Quarantined", "UnsupportedOperation"]

PUT_FIELDS = frozenset({"content", "provenance", "confidence", "authority"})
DELETE_REASON = "LangGraph store delete"
_KEY_RULE = "keys of this store are memory ids (UUIDs), as get and search return them in Item.key"


class UnsupportedOperation(NotImplementedError):
    """A BaseStore operation (or option) the governed memory service has no counterpart for."""


class Quarantined(GovernedMemoryError):
    """A `put` was stored but quarantined: it awaits human review, and `get` and `search` do not
    return it until a reviewer promotes it. Raised once every operation of the batch has run.
    `memories` are the quarantined records (`id`, `quarantine_reason`, `provenance`); `results`
    are the batch's results, in the order of its operations."""

    def __init__(self, memories: Sequence[Memory], results: list[Result]):
        self.memories = tuple(memories)
        self.results = results
        ids = ", ".join(memory.id for memory in self.memories)
        super().__init__(
            f"{len(self.memories)} memory write(s) stored but quarantined: awaiting human review, not returned by get "
            f"or search until a reviewer promotes them ({ids})."
        )


class GovernedMemoryStore(BaseStore):
    """A LangGraph `BaseStore` over the governed memory service (see the module's docstring for
    how namespaces, keys and values map onto memories).

    `client`: a `Client` (then `abatch` runs the calls in a worker thread), an `AsyncClient`
    (then only the async methods work), or None to read GOVERNED_MEMORY_URL and
    GOVERNED_MEMORY_TOKEN now, like `Client()`: the sync methods then share one Client, and each
    async batch opens its own connection (so any event loop works). `purpose`: the purpose every
    write and recall is made for; the token must allow it. `close()` closes the Client the store
    made; one passed in stays the caller's."""

    supports_ttl = True  # put's ttl becomes the memory's time to live

    def __init__(self, client: Client | AsyncClient | None = None, *, purpose: str):
        self.purpose = purpose
        self._settings = _core.settings_from_env(None, None) if client is None else None
        self._client = Client(*self._settings) if self._settings else client if isinstance(client, Client) else None
        self._async_client = client if isinstance(client, AsyncClient) else None

    def close(self) -> None:
        if self._settings is not None and self._client is not None:
            self._client.close()

    # ----------------------------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run the operations in order with the sync client. Raises `Quarantined` after the last
        one if any `put` was quarantined."""
        client = self._client
        if client is None:
            raise UnsupportedOperation(
                "This store was built from an AsyncClient: use its async methods (aget, asearch, aput, adelete), "
                "or build it from a Client."
            )
        held: list[Memory] = []
        results = [self._run(client, op, held) for op in ops]
        return _finish(results, held)

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Run the operations in order with the async client (built from a Client: in a worker
        thread). Raises `Quarantined` after the last one if any `put` was quarantined."""
        if self._async_client is not None:
            return await self._abatch(self._async_client, ops)
        if self._settings is not None:
            async with AsyncClient(*self._settings) as client:
                return await self._abatch(client, ops)
        return await anyio.to_thread.run_sync(self.batch, list(ops))

    async def _abatch(self, client: AsyncClient, ops: Iterable[Op]) -> list[Result]:
        held: list[Memory] = []
        results = [await self._arun(client, op, held) for op in ops]
        return _finish(results, held)

    def list_namespaces(self, **kwargs: Any) -> list[tuple[str, ...]]:
        raise _no_namespaces()

    async def alist_namespaces(self, **kwargs: Any) -> list[tuple[str, ...]]:
        raise _no_namespaces()

    def delete(self, namespace: tuple[str, ...], key: str) -> None:
        """Forget the namespace's subject: every memory about `namespace[0]`, of every kind, not
        only the one `key` names. The service forgets by subject (an erasure, with receipts for
        every derived copy), not item by item, and it needs a token with the forget capability.
        `key` must be the id of a memory in `namespace` (a key no memory has: nothing happens)."""
        super().delete(namespace, key)

    async def adelete(self, namespace: tuple[str, ...], key: str) -> None:
        """See `delete`: forgets every memory about the namespace's subject."""
        await super().adelete(namespace, key)

    # ----------------------------------------------------------------------------------------

    def _run(self, client: Client, op: Op, held: list[Memory]) -> Result:
        validate_op_namespace(op)
        if isinstance(op, GetOp):
            namespace = _exact(op.namespace)
            return _item(namespace, _read(client.get, _memory_id(op.key)))
        if isinstance(op, SearchOp):
            recall, query = _recall(op, self.purpose)
            return _search_items(op, client.recall(query, **recall))
        if isinstance(op, PutOp):
            namespace = _exact(op.namespace)
            if op.value is None:
                existing = _read(client.get, _memory_id(op.key))
                if _deletes(namespace, existing):
                    client.forget(namespace[0], reason=DELETE_REASON)
                return None
            write = _write(op, namespace, self.purpose)
            existing = _read(client.get, op.key) if _core._UUID.fullmatch(op.key) else None
            memory = client.remember(**write, **_target(namespace, op.key, existing))
            if memory.awaiting_review and memory.replayed:  # the first answer again: has it been promoted since?
                memory = client.get(memory.id)
            if memory.awaiting_review:
                held.append(memory)
            return None
        raise _unsupported(op)

    async def _arun(self, client: AsyncClient, op: Op, held: list[Memory]) -> Result:
        validate_op_namespace(op)
        if isinstance(op, GetOp):
            namespace = _exact(op.namespace)
            return _item(namespace, await _aread(client.get, _memory_id(op.key)))
        if isinstance(op, SearchOp):
            recall, query = _recall(op, self.purpose)
            return _search_items(op, await client.recall(query, **recall))
        if isinstance(op, PutOp):
            namespace = _exact(op.namespace)
            if op.value is None:
                existing = await _aread(client.get, _memory_id(op.key))
                if _deletes(namespace, existing):
                    await client.forget(namespace[0], reason=DELETE_REASON)
                return None
            write = _write(op, namespace, self.purpose)
            existing = await _aread(client.get, op.key) if _core._UUID.fullmatch(op.key) else None
            memory = await client.remember(**write, **_target(namespace, op.key, existing))
            if memory.awaiting_review and memory.replayed:
                memory = await client.get(memory.id)
            if memory.awaiting_review:
                held.append(memory)
            return None
        raise _unsupported(op)


# --------------------------------------------------------------------------------------------
# from operations to calls


def _finish(results: list[Result], held: list[Memory]) -> list[Result]:
    if held:
        raise Quarantined(held, results)
    return results


def _no_namespaces() -> UnsupportedOperation:
    return UnsupportedOperation(
        "list_namespaces is not supported: the governed memory service keeps subjects and kinds, not a tree of "
        "namespaces. search((subject,)) finds a subject's memories; Client.list() lists memories."
    )


def _unsupported(op: object) -> UnsupportedOperation:
    if isinstance(op, ListNamespacesOp):
        return _no_namespaces()
    return UnsupportedOperation(f"{type(op).__name__} is not an operation GovernedMemoryStore supports.")


def _exact(namespace: tuple[str, ...]) -> tuple[str, str]:
    if len(namespace) != 2:
        raise InvalidNamespaceError(
            f"A namespace of GovernedMemoryStore is (subject, kind), e.g. ('customer/acme', 'preference'); got {len(namespace)} "
            "label(s)."
        )
    return namespace[0], namespace[1]


def _memory_id(key: str) -> str:
    if not _core._UUID.fullmatch(key):
        raise InvalidArgument(f"{_KEY_RULE}; {key!r} is not one.")
    return key


def _read(get: Callable[[str], Memory], key: str) -> Memory | None:
    try:
        return get(key)
    except NotFound:
        return None


async def _aread(get: Callable[[str], Any], key: str) -> Memory | None:
    try:
        memory: Memory = await get(key)
    except NotFound:
        return None
    return memory


def _in(namespace: tuple[str, str], memory: Memory) -> bool:
    return (memory.subject, memory.kind) == namespace


def _elsewhere(namespace: tuple[str, str], memory: Memory) -> InvalidNamespaceError:
    return InvalidNamespaceError(f"Memory {memory.id} is in namespace ({memory.subject!r}, {memory.kind!r}), not {namespace!r}.")


def _deletes(namespace: tuple[str, str], existing: Memory | None) -> bool:
    if existing is None:
        return False
    if not _in(namespace, existing):
        raise _elsewhere(namespace, existing)
    return True


def _write(op: PutOp, namespace: tuple[str, str], purpose: str) -> dict[str, Any]:
    value = op.value or {}
    if op.index is not None:
        raise UnsupportedOperation(
            "put(index=...) is not supported: the governed memory service indexes every memory's content itself."
        )
    unknown = sorted(set(value) - PUT_FIELDS)
    missing = sorted({"content", "provenance", "confidence"} - set(value))
    if unknown or missing:
        raise ValueError(
            "A GovernedMemoryStore value is {'content': str, 'provenance': Provenance or dict, 'confidence': float} "
            f"with an optional 'authority'; missing {missing}, not taken {unknown}."
        )
    provenance = value["provenance"]
    if isinstance(provenance, Mapping):
        provenance = Provenance.from_json(provenance)
    elif not isinstance(provenance, Provenance):
        raise ValueError("The value's 'provenance' must be a Provenance (e.g. Provenance.user_turn(...)) or a dict of one.")
    return {
        "content": value["content"],
        "subject": namespace[0],
        "kind": namespace[1],
        "purpose": purpose,
        "provenance": provenance,
        "confidence": value["confidence"],
        "authority": value.get("authority"),
        "ttl_seconds": None if op.ttl is None else max(1, math.ceil(op.ttl * 60)),
    }


def _target(namespace: tuple[str, str], key: str, existing: Memory | None) -> dict[str, Any]:
    """A put to an existing memory's id corrects it; any other key makes the write repeatable."""
    if existing is not None:
        if not _in(namespace, existing):
            raise _elsewhere(namespace, existing)
        return {"supersedes": existing}
    digest = hashlib.sha256(json.dumps([*namespace, key]).encode()).hexdigest()
    return {"idempotency_key": f"langgraph-{digest[:48]}"}


def _recall(op: SearchOp, purpose: str) -> tuple[dict[str, Any], str]:
    prefix = op.namespace_prefix
    if len(prefix) > 2:
        raise InvalidNamespaceError(
            f"GovernedMemoryStore searches (), (subject,) or (subject, kind); got a prefix of {len(prefix)} labels."
        )
    if op.limit + op.offset > RECALL_LIMIT_MAX:
        raise ValueError(f"Recall returns at most {RECALL_LIMIT_MAX} memories: limit + offset must be at most that.")
    _check_filter(op.filter or {})
    return {
        "purpose": purpose,
        "subject": prefix[0] if prefix else None,
        "kinds": prefix[1:] or None,
        # A filter is applied to what recall returns, so it is given recall's whole window.
        "limit": RECALL_LIMIT_MAX if op.filter else op.limit + op.offset,
    }, op.query or ""


def _search_items(op: SearchOp, recalled: Iterable[RecallItem]) -> list[SearchItem]:
    items = []
    for recalled_item in recalled:
        value = {**_value(recalled_item), "context": recalled_item.context}
        if _matches(value, op.filter or {}):
            created, updated = _times(recalled_item.created_at, recalled_item.confirmed_at)
            score = recalled_item.relevance if recalled_item.relevance is not None else recalled_item.score
            items.append(
                SearchItem((recalled_item.subject, recalled_item.kind), recalled_item.id, value, created, updated, score)
            )
    return items[op.offset : op.offset + op.limit]


def _item(namespace: tuple[str, str], memory: Memory | None) -> Item | None:
    """The memory as an item while it is active and unexpired in this namespace, else None: a
    quarantined memory is not there until a reviewer promotes it."""
    if memory is None or memory.status != "active" or not _in(namespace, memory):
        return None
    if memory.expires_at is not None and memory.expires_at <= datetime.now(timezone.utc):
        return None
    created, updated = _times(memory.created_at, memory.confirmed_at)
    return Item(value=_value(memory), key=memory.id, namespace=namespace, created_at=created, updated_at=updated)


def _value(memory: Memory | RecallItem) -> dict[str, Any]:
    return {
        "content": memory.content,
        "authority": memory.authority,
        "trust": memory.trust,
        "confidence": memory.confidence,
        "provenance": provenance_view(memory.provenance),
        "created_at": memory.created_at.isoformat() if memory.created_at else None,
        "confirmed_at": memory.confirmed_at.isoformat() if memory.confirmed_at else None,
        "expires_at": memory.expires_at.isoformat() if memory.expires_at else None,
    }


def _times(created: datetime | None, confirmed: datetime | None) -> tuple[datetime, datetime]:
    created = created or datetime.now(timezone.utc)
    return created, confirmed or created


# --------------------------------------------------------------------------------------------
# search filters, as LangGraph writes them: {"field": value} or {"field": {"$op": value}}

_OPERATORS: dict[str, Callable[[Any, Any], bool]] = {
    "$eq": operator.eq,
    "$ne": operator.ne,
    "$gt": operator.gt,
    "$gte": operator.ge,
    "$lt": operator.lt,
    "$lte": operator.le,
}


def _is_condition(wanted: Any) -> bool:
    return isinstance(wanted, Mapping) and bool(wanted) and all(str(name).startswith("$") for name in wanted)


def _check_filter(conditions: Mapping[str, Any]) -> None:
    for wanted in conditions.values():
        if _is_condition(wanted):
            for name in wanted:
                if name not in _OPERATORS:
                    raise UnsupportedOperation(f"Filter operator {name!r} is not supported; use one of {sorted(_OPERATORS)}.")


def _at(value: Mapping[str, Any], path: str) -> Any:
    """The field a filter names; a dotted path reaches into `provenance`, e.g. provenance.source_type."""
    found: Any = value
    for part in path.split("."):
        found = found.get(part) if isinstance(found, Mapping) else None
    return found


def _matches(value: Mapping[str, Any], conditions: Mapping[str, Any]) -> bool:
    for path, wanted in conditions.items():
        actual = _at(value, path)
        checks = wanted.items() if _is_condition(wanted) else [("$eq", wanted)]
        for name, operand in checks:
            try:
                if not _OPERATORS[name](actual, operand):
                    return False
            except TypeError:  # e.g. None > 0.5: no match
                return False
    return True
