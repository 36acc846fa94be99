"""SQLite search storage, version 1: the tables and triggers of a lexical and a semantic index as
migrations 0006 to 0017 left them.

Pinned: migrations call this module, so it never changes. It holds its own copies of the names it
splices into DDL (the records table, the columns an index copies and watches, the tokenizers), so
a later change elsewhere cannot change what an old migration does. A new design is a new module
(`ddl_v2`, ...) with an upgrade from this one.

Row-level triggers: SQLite has no statement-level triggers (nor transition tables), so each
record's change is applied on its own, in the statement that makes it.

Lexical index: a plain table `<name>_doc` (the rows: the copied record fields, the content as
`body`, a word count `doclen` and the scope tokens) and an external-content FTS5 table `<name>`
over its scope, subject, kind and body columns, with the recipe's tokenizer. Scope, subject and
kind are single tokens made of letters and digits (hex of the text, ending in a digit, which the
porter stemmer leaves alone). Triggers `<name>_ai|_au|_ad` on the records keep `<name>_doc` to
the active records (an entry goes as soon as its record stops being active), and triggers on
`<name>_doc` keep the FTS5 table in step.

Semantic index `<name>`: a row per active record with the copied fields, its `content_hash` and
its embedding (`vector`, NULL while pending), kept by triggers `<name>_ai|_au|_ad`.
"""

from __future__ import annotations

from typing import Any

from django.db import connection, transaction

VERSION = 1
RECORDS = "memory_memoryrecord"
# Record columns an index copies; a change to any watched one re-indexes the record.
COPIED = (
    "tenant_id",
    "agent_id",
    "purpose",
    "subject",
    "kind_id",
    "authority",
    "confidence",
    "confirmed_at",
    "expires_at",
    "valid_from",
    "valid_to",
)
WATCHED = ("status", "content", *COPIED)
COLUMNS = ("record_id", "scope", "subj", "kind", "body", *COPIED, "doclen")
FTS_COLUMNS = ("scope", "subj", "kind", "body")
SEMANTIC_COLUMNS = ("record_id", *COPIED, "content_hash")
# The only recipe values spliced into DDL: the tokenizers a recipe may name.
TOKENIZERS = frozenset({"porter unicode61 remove_diacritics 2", "unicode61 remove_diacritics 2"})
RECORD_TRIGGERS = ("ai", "au", "ad")


def _execute(sql: str, params: Any = None) -> int:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount


def _tokenizer(recipe: dict) -> str:
    tokenizer = recipe["analyser"]["sqlite"]
    if tokenizer not in TOKENIZERS:  # never splice anything else into DDL
        raise ValueError("Unknown analyser.")
    return tokenizer


def doclen_sql(expr: str) -> str:
    """Words in `expr`: whitespace-separated runs (newlines and tabs count as spaces; runs of up to
    16 spaces collapse), the same expression PostgreSQL's storage evaluates."""
    text = f"replace(replace(replace({expr}, char(10), ' '), char(13), ' '), char(9), ' ')"
    for _ in range(4):
        text = f"replace({text}, '  ', ' ')"
    text = f"trim({text})"
    return f"(CASE WHEN {text} = '' THEN 0 ELSE length({text}) - length(replace({text}, ' ', '')) + 1 END)"


# --------------------------------------------------------------------------------------------
# lexical


def _row(r: str) -> str:
    """The `<name>_doc` row of record `r` (a table alias, or NEW in a trigger); its tokens are the
    ones the engine's `scope_token`, `subject_token` and `kind_token` compute."""
    copied = ", ".join(f"{r}.{column}" for column in COPIED)
    return (
        f"{r}.id, 't' || {r}.tenant_id || 'a' || {r}.agent_id || 'p' || lower(hex({r}.purpose)) || '0', "
        f"'s' || lower(hex({r}.subject)) || '0', 'k' || {r}.kind_id, {r}.content, {copied}, "
        f"{doclen_sql(f'{r}.content')}"
    )


def _tables(name: str, recipe: dict) -> list[str]:
    """The rows table, filled from the active records, the FTS5 table over it, rebuilt, and the
    triggers that keep the FTS5 table in step with the rows."""
    tokenizer = _tokenizer(recipe)
    doc_columns = ", ".join(COLUMNS)
    fts_columns = ", ".join(FTS_COLUMNS)
    new_values = ", ".join(f"new.{c}" for c in FTS_COLUMNS)
    old_values = ", ".join(f"old.{c}" for c in FTS_COLUMNS)
    return [
        f"""CREATE TABLE {name}_doc (
            id INTEGER PRIMARY KEY, record_id TEXT NOT NULL UNIQUE, scope TEXT NOT NULL, subj TEXT NOT NULL,
            kind TEXT NOT NULL, body TEXT NOT NULL, tenant_id INTEGER NOT NULL, agent_id INTEGER NOT NULL,
            purpose TEXT NOT NULL, subject TEXT NOT NULL, kind_id INTEGER NOT NULL, authority TEXT NOT NULL,
            confidence REAL NOT NULL, confirmed_at TEXT NOT NULL, expires_at TEXT NOT NULL, valid_from TEXT,
            valid_to TEXT, doclen INTEGER NOT NULL)""",
        f"INSERT INTO {name}_doc ({doc_columns}) SELECT {_row('r')} FROM {RECORDS} r WHERE r.status = 'active'",
        f"""CREATE VIRTUAL TABLE {name} USING fts5({fts_columns}, content='{name}_doc', content_rowid='id',
            tokenize='{tokenizer}')""",
        f"INSERT INTO {name}({name}) VALUES ('rebuild')",
        f"""CREATE TRIGGER {name}_doc_ai AFTER INSERT ON {name}_doc BEGIN
            INSERT INTO {name}(rowid, {fts_columns}) VALUES (new.id, {new_values}); END""",
        f"""CREATE TRIGGER {name}_doc_ad AFTER DELETE ON {name}_doc BEGIN
            INSERT INTO {name}({name}, rowid, {fts_columns}) VALUES ('delete', old.id, {old_values}); END""",
    ]


def _record_triggers(name: str) -> list[str]:
    """The triggers on the records: an entry for each active record, gone as soon as it is not."""
    doc_columns = ", ".join(COLUMNS)
    return [
        f"""CREATE TRIGGER {name}_ai AFTER INSERT ON {RECORDS} WHEN NEW.status = 'active' BEGIN
            INSERT INTO {name}_doc ({doc_columns}) SELECT {_row("NEW")}; END""",
        f"""CREATE TRIGGER {name}_au AFTER UPDATE OF {", ".join(WATCHED)} ON {RECORDS}
            WHEN OLD.status = 'active' OR NEW.status = 'active' BEGIN
            DELETE FROM {name}_doc WHERE record_id = OLD.id;
            INSERT INTO {name}_doc ({doc_columns}) SELECT {_row("NEW")} WHERE NEW.status = 'active'; END""",
        f"""CREATE TRIGGER {name}_ad AFTER DELETE ON {RECORDS} WHEN OLD.status = 'active' BEGIN
            DELETE FROM {name}_doc WHERE record_id = OLD.id; END""",
    ]


def lexical_create(name: str, recipe: dict) -> int:
    """Create a lexical index's tables and triggers and fill them from the active records, in one
    transaction (SQLite has one writer at a time, so no write can slip between the load and the
    triggers); returns how many records it holds. The name must be free."""
    with transaction.atomic():
        for sql in (*_tables(name, recipe), *_record_triggers(name)):
            _execute(sql)
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT count(*) FROM {name}_doc")
            return cursor.fetchone()[0]


def lexical_upgrade(name: str, recipe: dict) -> None:
    """Nothing: no earlier SQLite design needs upgrading to this one (what migrations 0008 to 0017
    did on PostgreSQL)."""


def upgrade_indexes(search_indexes: Any) -> list[int]:
    """For a migration: nothing to upgrade on SQLite (see `lexical_upgrade`); returns no index."""
    return []


# --------------------------------------------------------------------------------------------
# semantic


def _values(r: str) -> str:
    return ", ".join(f"{r}.{column}" for column in ("id", *COPIED, "content_hash"))


def _upsert(name: str) -> str:
    """Keeps the vector when the content is unchanged (a confirmation, a new expiry), drops it
    (pending again) when the content changed."""
    copied = ", ".join(f"{column} = excluded.{column}" for column in COPIED)
    return (
        f"ON CONFLICT (record_id) DO UPDATE SET {copied}, "
        f"vector = CASE WHEN {name}.content_hash = excluded.content_hash THEN {name}.vector ELSE NULL END, "
        f"content_hash = excluded.content_hash"
    )


def semantic_table(name: str) -> list[str]:
    """A semantic index's table and its indexes."""
    return [
        f"""CREATE TABLE {name} (
            record_id TEXT PRIMARY KEY, tenant_id INTEGER NOT NULL, agent_id INTEGER NOT NULL, purpose TEXT NOT NULL,
            subject TEXT NOT NULL, kind_id INTEGER NOT NULL, authority TEXT NOT NULL, confidence REAL NOT NULL,
            confirmed_at TEXT NOT NULL, expires_at TEXT NOT NULL, valid_from TEXT, valid_to TEXT,
            content_hash TEXT NOT NULL, vector BLOB)""",
        f"CREATE INDEX {name}_scope ON {name} (tenant_id, agent_id, purpose, subject)",
        f"CREATE INDEX {name}_pending ON {name} (record_id) WHERE vector IS NULL",
    ]


def semantic_triggers(name: str) -> list[str]:
    """A semantic index's triggers on the records, replacing any there."""
    columns = ", ".join(SEMANTIC_COLUMNS)
    return [
        *(f"DROP TRIGGER IF EXISTS {name}_{suffix}" for suffix in RECORD_TRIGGERS),
        # `WHERE true`: SQLite's parser needs a WHERE before ON CONFLICT in INSERT ... SELECT.
        f"""CREATE TRIGGER {name}_ai AFTER INSERT ON {RECORDS} WHEN NEW.status = 'active' BEGIN
            INSERT INTO {name} ({columns}) SELECT {_values("NEW")} WHERE true {_upsert(name)}; END""",
        f"""CREATE TRIGGER {name}_au AFTER UPDATE OF {", ".join((*WATCHED, "content_hash"))} ON {RECORDS}
            WHEN OLD.status = 'active' OR NEW.status = 'active' BEGIN
            DELETE FROM {name} WHERE record_id = OLD.id AND NEW.status <> 'active';
            INSERT INTO {name} ({columns}) SELECT {_values("NEW")} WHERE NEW.status = 'active' {_upsert(name)}; END""",
        f"""CREATE TRIGGER {name}_ad AFTER DELETE ON {RECORDS} WHEN OLD.status = 'active' BEGIN
            DELETE FROM {name} WHERE record_id = OLD.id; END""",
    ]


# --------------------------------------------------------------------------------------------


def drop(name: str) -> None:
    """Drop an index's storage, lexical or semantic, and its triggers on the records."""
    # Triggers on the records first: one left behind would fail every write once its table is gone.
    for suffix in RECORD_TRIGGERS:
        _execute(f"DROP TRIGGER IF EXISTS {name}_{suffix}")
    _execute(f"DROP TABLE IF EXISTS {name}")
    _execute(f"DROP TABLE IF EXISTS {name}_doc")
