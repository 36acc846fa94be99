"""The LangGraph store end to end: real StateGraphs whose nodes call GovernedMemoryStore (no
language model) against a live server. A user's turn is stored active and found by search and
get; a web page's claim is quarantined, put says so, and neither get nor search returns it until a
reviewer promotes it; corrections, repeated puts, delete (forget), filters; the async path; and
a clear error for everything the store does not support."""

import asyncio
import operator
import uuid
from typing import Annotated, Any, TypedDict

import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.store.base import InvalidNamespaceError, ListNamespacesOp, PutOp

from governed_memory import AsyncClient, Client, Conflict, InvalidArgument, Provenance
from governed_memory.integrations.langgraph import GovernedMemoryStore, Quarantined, UnsupportedOperation
from memory.models import MemoryRecord, Status, Trust
from memory.services import memory_promote

pytestmark = pytest.mark.django_db(transaction=True)

PREFERENCES = ("customer/acme", "preference")
SAID = "Acme prefers email over phone."
READ = "Acme's support line moved to +1 555 0100."
PAGE = "https://acme.example/contact"


class Turn(TypedDict, total=False):
    session: str
    turn: int
    query: str
    held: Annotated[list[str], operator.add]  # ids of quarantined writes
    found: list[dict[str, Any]]
    got: dict[str, Any] | None


def remember_user(state: Turn, runtime: Runtime) -> dict:
    """What the user said in this turn, with the provenance the graph knows: session and turn."""
    session, turn = state["session"], state["turn"]
    runtime.store.put(
        PREFERENCES,
        f"{session}-turn-{turn}",
        {"content": SAID, "confidence": 0.9, "provenance": Provenance.user_turn(session, turn)},
    )
    return {}


def remember_page(state: Turn, runtime: Runtime) -> dict:
    """What a tool read on a web page: stored, but held for review."""
    try:
        runtime.store.put(
            PREFERENCES,
            "contact-page",
            {"content": READ, "confidence": 0.6, "provenance": Provenance.web_page(PAGE, session=state["session"])},
        )
    except Quarantined as held:
        return {"held": [memory.id for memory in held.memories]}
    return {}


def search(state: Turn, runtime: Runtime) -> dict:
    items = runtime.store.search(("customer/acme",), query=state["query"])
    return {"found": [{"key": item.key, "namespace": item.namespace, "score": item.score, **item.value} for item in items]}


def get_first(state: Turn, runtime: Runtime) -> dict:
    item = runtime.store.get(PREFERENCES, state["found"][0]["key"]) if state["found"] else None
    return {"got": None if item is None else {"key": item.key, "namespace": item.namespace, **item.value}}


def writing_graph(store: GovernedMemoryStore):
    builder = StateGraph(Turn)
    for node in (remember_user, remember_page, search, get_first):
        builder.add_node(node.__name__, node)
    builder.add_edge(START, "remember_user")
    builder.add_edge("remember_user", "remember_page")
    builder.add_edge("remember_page", "search")
    builder.add_edge("search", "get_first")
    builder.add_edge("get_first", END)
    return builder.compile(store=store)


def reading_graph(store: GovernedMemoryStore):
    builder = StateGraph(Turn)
    builder.add_node("search", search)
    builder.add_edge(START, "search")
    builder.add_edge("search", END)
    return builder.compile(store=store)


def promote(memory_id: str, reviewer_actor) -> None:
    record = MemoryRecord.objects.get(pk=memory_id)
    memory_promote(record_id=record.pk, expected_version=record.version, actor=reviewer_actor, note="checked the page")


@pytest.fixture
def store(api_server, token):
    with Client(api_server.base, token) as client:
        yield GovernedMemoryStore(client, purpose="support")


def test_a_graph_writes_searches_and_gets_and_a_quarantined_write_appears_only_once_promoted(store, reviewer_actor):
    state = writing_graph(store).invoke({"session": "s-1", "turn": 12, "query": "how does acme want to be contacted"})

    said = MemoryRecord.objects.get(content=SAID)
    read = MemoryRecord.objects.get(content=READ)
    assert (said.status, said.authority, said.session_id, said.turn_id) == (Status.ACTIVE, "user", "s-1", "12")
    assert (read.status, read.source_type, read.source_uri) == (Status.QUARANTINED, "web_page", PAGE)
    assert state["held"] == [str(read.pk)]  # put said so, with the record's id
    assert [found["key"] for found in state["found"]] == [str(said.pk)]  # search: the active memory only
    found = state["found"][0]
    assert found["namespace"] == PREFERENCES and found["content"] == SAID and 0 < found["score"] <= 1
    assert found["provenance"]["session_id"] == "s-1" and found["authority"] == "user" and found["trust"] == "trusted"
    assert found["context"].endswith(f"] {SAID}")
    assert state["got"] == {
        key: value for key, value in found.items() if key not in {"score", "context"}
    }  # get: the same memory, the same value
    assert store.get(PREFERENCES, str(read.pk)) is None  # awaiting review: not there

    promote(str(read.pk), reviewer_actor)
    item = store.get(PREFERENCES, str(read.pk))
    assert item is not None and item.value["content"] == READ and item.value["trust"] == Trust.VERIFIED
    assert item.value["provenance"]["uri"] == PAGE and item.namespace == PREFERENCES
    after = reading_graph(store).invoke({"query": "acme support line phone number"})
    assert str(read.pk) in {found["key"] for found in after["found"]}


def test_a_repeated_put_stores_once_and_a_put_to_an_items_key_corrects_it(store):
    value = {"content": SAID, "confidence": 0.9, "provenance": Provenance.user_turn("s-2", 3)}
    store.put(PREFERENCES, "s-2-turn-3", value)
    store.put(PREFERENCES, "s-2-turn-3", value)  # a retried node
    assert MemoryRecord.objects.filter(content=SAID).count() == 1
    with pytest.raises(Conflict) as reused:
        store.put(PREFERENCES, "s-2-turn-3", {**value, "content": "Acme prefers phone calls."})
    assert reused.value.code == "idempotency_mismatch"

    [item] = store.search(PREFERENCES, query="how to contact acme")
    store.put(
        PREFERENCES, item.key, {**value, "content": "Acme now prefers phone calls.", "provenance": Provenance.user_turn("s-2", 9)}
    )
    old, new = MemoryRecord.objects.get(pk=item.key), MemoryRecord.objects.get(content="Acme now prefers phone calls.")
    assert (old.status, new.supersedes_id) == (Status.SUPERSEDED, old.pk)
    assert store.get(PREFERENCES, item.key) is None
    assert [found.key for found in store.search(PREFERENCES, query="how to contact acme")] == [str(new.pk)]


def test_put_takes_a_ttl_in_minutes_and_refuses_values_it_cannot_store(store):
    provenance = Provenance.user_turn("s-3", 1)
    store.put(
        ("customer/acme", "working_note"),
        "note-1",
        {"content": "Call back at 3pm.", "confidence": 1.0, "provenance": provenance},
        ttl=90,
    )
    record = MemoryRecord.objects.get(content="Call back at 3pm.")
    assert (record.expires_at - record.created_at).total_seconds() == pytest.approx(90 * 60, abs=2)

    with pytest.raises(ValueError, match="missing \\['confidence', 'provenance'\\], not taken \\['data'\\]"):
        store.put(PREFERENCES, "k", {"content": "x", "data": 1})
    with pytest.raises(ValueError, match="must be a Provenance"):
        store.put(PREFERENCES, "k", {"content": "x", "confidence": 1, "provenance": "user"})
    assert MemoryRecord.objects.count() == 1


def test_search_filters_pages_and_scopes_by_namespace(store):
    for n, (content, provenance) in enumerate(
        [
            ("Acme prefers email for invoices.", Provenance.user_turn("s-4", 1)),
            ("Acme prefers email for outages.", Provenance.user_turn("s-4", 2)),
        ]
    ):
        store.put(PREFERENCES, f"k-{n}", {"content": content, "confidence": 0.5 + n * 0.4, "provenance": provenance})
    store.put(
        ("customer/acme", "semantic"),
        "fact",
        {"content": "Acme email is handled by Dana.", "confidence": 0.9, "provenance": Provenance.user_turn("s-4", 3)},
    )
    store.put(
        ("customer/globex", "preference"),
        "g",
        {"content": "Globex prefers email.", "confidence": 0.9, "provenance": Provenance.user_turn("s-4", 4)},
    )

    def contents(*prefix, **options):
        return sorted(item.value["content"] for item in store.search(prefix, query="email", **options))

    assert contents() == sorted(MemoryRecord.objects.values_list("content", flat=True))
    assert contents("customer/acme") == sorted(
        ["Acme prefers email for invoices.", "Acme prefers email for outages.", "Acme email is handled by Dana."]
    )
    assert contents(*PREFERENCES) == ["Acme prefers email for invoices.", "Acme prefers email for outages."]
    assert sorted(item.value["content"] for item in store.search(PREFERENCES)) == contents(*PREFERENCES)  # no query
    assert contents(*PREFERENCES, filter={"confidence": {"$gte": 0.8}}) == ["Acme prefers email for outages."]
    assert contents(filter={"provenance.turn_id": "4"}) == ["Globex prefers email."]
    assert contents(filter={"authority": {"$ne": "user"}}) == []
    both = [item.key for item in store.search(PREFERENCES, query="email", limit=2)]
    assert [item.key for item in store.search(PREFERENCES, query="email", limit=1, offset=1)] == both[1:]


def test_delete_forgets_the_namespaces_subject(store):
    value = {"content": SAID, "confidence": 0.9, "provenance": Provenance.user_turn("s-5", 1)}
    store.put(PREFERENCES, "a", value)
    store.put(("customer/acme", "semantic"), "b", {**value, "content": "Acme's office is in Berlin."})
    store.put(("customer/globex", "preference"), "c", {**value, "content": "Globex prefers chat."})
    [item] = store.search(PREFERENCES, query="email or phone")

    with pytest.raises(InvalidNamespaceError, match="is in namespace"):
        store.delete(("customer/globex", "preference"), item.key)
    store.delete(PREFERENCES, item.key)
    statuses = {record.content or record.pk: record.status for record in MemoryRecord.objects.all()}
    assert sorted(statuses.values()) == [Status.ACTIVE, Status.FORGOTTEN, Status.FORGOTTEN]
    assert statuses["Globex prefers chat."] == Status.ACTIVE
    assert store.get(PREFERENCES, item.key) is None and store.search(("customer/acme",), query="office") == []
    store.delete(PREFERENCES, str(uuid.uuid4()))  # no such memory: nothing happens


def test_the_async_path_runs_a_graph_through_abatch_and_quarantine_is_held_until_promoted(api_server, token, reviewer_actor):
    async def remember(state: Turn, runtime: Runtime) -> dict:
        await runtime.store.aput(
            PREFERENCES, "said", {"content": SAID, "confidence": 0.9, "provenance": Provenance.user_turn("s-6", 1)}
        )
        try:
            await runtime.store.aput(
                PREFERENCES, "read", {"content": READ, "confidence": 0.6, "provenance": Provenance.web_page(PAGE)}
            )
        except Quarantined as held:
            return {"held": [memory.id for memory in held.memories]}
        return {}

    async def look(state: Turn, runtime: Runtime) -> dict:
        items = await runtime.store.asearch(("customer/acme",), query=state["query"])
        got = [await runtime.store.aget(PREFERENCES, key) for key in state.get("held", [])]
        return {"found": [{"key": i.key, **i.value} for i in items], "got": {"held": [g and g.key for g in got]}}

    builder = StateGraph(Turn)
    builder.add_node("remember", remember)
    builder.add_node("look", look)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", "look")
    builder.add_edge("look", END)

    async def run(state: Turn) -> Turn:
        async with AsyncClient(api_server.base, token) as client:
            store = GovernedMemoryStore(client, purpose="support")
            graph = builder.compile(store=store)
            result = await graph.ainvoke(state)
            with pytest.raises(UnsupportedOperation, match="built from an AsyncClient"):
                store.get(PREFERENCES, str(uuid.uuid4()))
            return result

    first = asyncio.run(run({"query": "acme support line phone", "held": []}))
    read = MemoryRecord.objects.get(content=READ)
    assert first["held"] == [str(read.pk)] and first["got"] == {"held": [None]}
    assert READ not in [found["content"] for found in first["found"]]

    promote(str(read.pk), reviewer_actor)
    second = asyncio.run(run({"query": "acme support line phone", "held": [str(read.pk)]}))
    assert second["got"] == {"held": [str(read.pk)]}  # the replayed write is not held again: it was promoted
    assert READ in [found["content"] for found in second["found"]]
    assert MemoryRecord.objects.filter(content=READ).count() == 1


def test_a_store_from_a_sync_client_or_the_environment_serves_both_sync_and_async(store, api_server, token, monkeypatch):
    async def use(store: GovernedMemoryStore, n: int) -> list[str]:
        said = {"content": f"Acme prefers email ({n}).", "confidence": 0.9, "provenance": Provenance.user_turn("s-7", n)}
        await store.aput(PREFERENCES, f"t-{n}", said)
        return sorted(item.value["content"] for item in await store.asearch(PREFERENCES, query="acme email"))

    assert asyncio.run(use(store, 1)) == ["Acme prefers email (1)."]  # a Client: in a worker thread
    monkeypatch.setenv("GOVERNED_MEMORY_URL", api_server.base)
    monkeypatch.setenv("GOVERNED_MEMORY_TOKEN", token)
    from_env = GovernedMemoryStore(purpose="support")
    # Two event loops, one store: each async batch has its own connection.
    assert asyncio.run(use(from_env, 2)) == ["Acme prefers email (1).", "Acme prefers email (2)."]
    assert len(asyncio.run(use(from_env, 3))) == 3
    assert len(from_env.search(PREFERENCES, query="acme email")) == 3
    from_env.close()
    monkeypatch.delenv("GOVERNED_MEMORY_URL")
    with pytest.raises(ValueError, match="GOVERNED_MEMORY_URL"):
        GovernedMemoryStore(purpose="support")


UNSUPPORTED = [
    ("list_namespaces", lambda s: s.list_namespaces(prefix=("customer/acme",)), "list_namespaces is not supported"),
    ("alist_namespaces", lambda s: asyncio.run(s.alist_namespaces()), "list_namespaces is not supported"),
    ("batch(ListNamespacesOp)", lambda s: s.batch([ListNamespacesOp()]), "list_namespaces is not supported"),
    ("put(index=...)", lambda s: s.put(PREFERENCES, "k", {"content": "x"}, index=["content"]), "indexes every memory"),
    ("put(index=False)", lambda s: s.put(PREFERENCES, "k", {"content": "x"}, index=False), "indexes every memory"),
    ("filter $in", lambda s: s.search(PREFERENCES, filter={"kind": {"$in": ["a"]}}), "Filter operator '\\$in'"),
]


@pytest.mark.parametrize(("name", "call", "message"), UNSUPPORTED, ids=[u[0] for u in UNSUPPORTED])
def test_what_the_store_does_not_support_is_a_clear_error_that_sends_nothing(store, name, call, message):
    with pytest.raises(UnsupportedOperation, match=message):
        call(store)
    assert MemoryRecord.objects.count() == 0


def test_namespaces_keys_and_windows_the_service_cannot_take_are_refused_before_sending(store):
    value = {"content": SAID, "confidence": 0.9, "provenance": Provenance.user_turn("s-8", 1)}
    with pytest.raises(InvalidNamespaceError, match="\\(subject, kind\\)"):
        store.put(("acme",), "k", value)
    with pytest.raises(InvalidNamespaceError, match="\\(subject, kind\\)"):
        store.get(("customer", "acme", "preference"), str(uuid.uuid4()))
    with pytest.raises(InvalidNamespaceError, match="searches \\(\\), \\(subject,\\) or \\(subject, kind\\)"):
        store.search(("customer", "acme", "preference"))
    with pytest.raises(InvalidArgument, match="keys of this store are memory ids"):
        store.get(PREFERENCES, "s-1-turn-12")
    with pytest.raises(ValueError, match="limit \\+ offset must be at most"):
        store.search(PREFERENCES, limit=40, offset=20)
    with pytest.raises(InvalidNamespaceError, match="periods"):
        store.put(("user/jane.doe", "preference"), "k", value)
    assert MemoryRecord.objects.count() == 0
    assert store.batch([PutOp(PREFERENCES, "k", value)]) == [None]
