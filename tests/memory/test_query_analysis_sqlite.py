"""On SQLite a recall's query is analysed in process by FTS5's own tokenizer
(`memory.engine.sqlite._fts5.fts5_tokens`): its terms must be the very tokens the index stores, and
recall's connection runs nothing for them."""

import threading

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from memory.engine.sqlite._fts5 import fts5_tokens
from memory.search import active_index
from memory.search.ranking import analyse_query
from memory.search.recipes import ANALYSERS

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.sqlite(reason="FTS5's tokenizer is SQLite's (PostgreSQL analyses with to_tsvector)"),
]

PORTER = ANALYSERS["english"]["sqlite"]
# Words where FTS5's porter stemmer departs from Snowball's (possibly, technologies, grokking,
# eed), plus diacritics, case and digits: no stop word, so every stored token is a query term.
TEXT = "Possibly technologies agreed grokking eed: cafés, naïve ÉCOLE Ünïcödé 2026 invoices invoice"


def _stored_tokens(index, record) -> list[str]:
    """The record's content as the index stored it: its FTS5 tokens in order."""
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE VIRTUAL TABLE temp.gm_test_vocab USING fts5vocab(main, {index.storage_name}, 'instance')")
        try:
            cursor.execute(
                f"SELECT v.term FROM temp.gm_test_vocab v JOIN {index.storage_name}_doc d ON d.id = v.doc "
                f"WHERE d.record_id = %s AND v.col = 'body' ORDER BY v.\"offset\"",
                [record.pk.hex],
            )
            return [term for (term,) in cursor.fetchall()]
        finally:
            cursor.execute("DROP TABLE temp.gm_test_vocab")


def test_the_query_terms_are_the_tokens_the_index_stores_and_no_statement_runs(write):
    record = write(content=TEXT)
    index = active_index()
    with CaptureQueriesContext(connection) as queries:
        analysed = analyse_query(index, TEXT)
    assert queries.captured_queries == []
    stored = _stored_tokens(index, record)
    assert "possibl" in stored and "technolog" in stored and "cafe" in stored  # the porter and diacritics ran
    assert [term for term, _ in analysed] == list(dict.fromkeys(stored))  # "invoices invoice": one term
    assert analysed[-1] == ("invoic", "invoices")  # matched with the first word of the stem


def test_each_call_sees_only_its_own_words_in_any_thread():
    words = [f"meeting{n} notes" for n in range(20)]
    assert fts5_tokens(PORTER, ["alpha", "reading"]) == [["alpha"], ["read"]]
    assert fts5_tokens(PORTER, ["beta"]) == [["beta"]]  # the previous call's rows were rolled back
    results, errors = {}, []

    def analyse(n: int) -> None:
        try:
            results[n] = [fts5_tokens(PORTER, words) for _ in range(20)]
        except Exception as exc:  # reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=analyse, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == [] and len(results) == 4
    assert all(run == [[f"meeting{n}", "note"] for n in range(20)] for runs in results.values() for run in runs)


def test_an_analyser_not_in_the_recipes_is_refused_before_any_sql():
    with pytest.raises(ValueError, match="Unknown analyser"):
        fts5_tokens("porter'); DROP TABLE x; --", ["word"])
