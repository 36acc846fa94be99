"""Recall reads which indexes are active once a second per process, not once a request
(`memory.search.active_indexes`): a change this process makes applies to its next recall, one
another process makes within the memo's time, and an index whose storage was dropped meanwhile is
chosen again rather than failing the recall. Outside a transaction (as a web request runs), hence
transactional tests."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from memory import search
from memory.recall import RecallQuery, recall
from memory.search import gates
from memory.search.build import build_and_promote, request_rebuild
from memory.search.models import IndexKind

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def no_gates(monkeypatch):
    monkeypatch.setattr(gates, "_GATES", {})


@pytest.fixture
def corpus(write):
    return [write(content=text) for text in ("Invoices go out by email on Mondays.", "Acme prefers the ticket portal.")]


def _recall(credential) -> tuple[str, list, int]:
    """(the index that ranked, the records, the statements that read the index table)."""
    with CaptureQueriesContext(connection) as captured:
        result = recall(credential=credential, q=RecallQuery(query="invoices email", purpose="support"))
    reads = sum('FROM "memory_searchindex"' in query["sql"] for query in captured)
    return result.index, [item.record.pk for item in result.items], reads


def test_the_active_indexes_are_read_once_then_held_and_a_promotion_here_applies_at_once(corpus, credential):
    _recall(credential)  # (builds the default index if this database has none yet)
    search._forget_active_indexes()
    first_index, first_items, reads = _recall(credential)
    assert first_items and reads == 1
    assert _recall(credential) == (first_index, first_items, 0)
    promoted = build_and_promote(request_rebuild(name="lexical-next").pk)
    index, items, reads = _recall(credential)
    assert (index, items, reads) == (promoted.name, first_items, 1)


def test_an_index_another_process_replaced_is_chosen_again_when_its_storage_is_gone(corpus, credential):
    _recall(credential)  # (the first recall also builds the default index)
    _, first_items, _ = _recall(credential)
    stale = search._memo
    promoted = build_and_promote(request_rebuild(name="lexical-elsewhere").pk)  # drops the old storage on commit
    assert stale[1][IndexKind.LEXICAL].name != promoted.name
    search._memo = stale  # as a process that did not make the change still holds it
    index, items, reads = _recall(credential)
    assert (index, items, reads) == (promoted.name, first_items, 1)  # the stale choice failed; read again, once


def test_a_change_another_process_made_is_seen_once_the_memo_time_has_passed(corpus, credential, monkeypatch):
    _recall(credential)
    _recall(credential)
    stale = search._memo
    promoted = build_and_promote(request_rebuild(name="lexical-later").pk)
    search._memo = stale
    monkeypatch.setattr(search.time, "monotonic", lambda: stale[0] + search.ACTIVE_MEMO_SECONDS)
    index, _, reads = _recall(credential)
    assert (index, reads) == (promoted.name, 1)
