"""Where a lexical index lives: its own tables, filled from the active memory records and kept in
step with them by database triggers, so every path that changes a record (the lifecycle services,
bulk jobs, forget, prune, the admin) updates every index in the same transaction, and an index can
be dropped and rebuilt without touching the records.

An index holds `active` records (and, on PostgreSQL, records expired in time until the sweep
deletes them: `sweep_expired`), with a copy of the fields recall's hard filters and ranking
read (scope, kind, time, authority, confidence, confirmation time) and a word count (`doclen`, the
same SQL on both databases), so collection statistics come from the index alone.

PostgreSQL: a table `<name>` with the content's lexemes (the recipe's text search configuration)
as a position-free tsvector plus three scope lexemes ('scope <tenant> <agent> <purpose>',
'subject <subject>', 'kind <id>'; they contain spaces, which the parser never emits, so no word
collides with them) under a GIN index, each lexeme's occurrences as a jsonb map (BM25's tf), and
B-trees by scope and confirmation time; `<name>_stats` holds the collection statistics per
(tenant, agent, purpose, subject, kind): records, words, the authorities present and the highest
confidence, and `<name>_terms` per (tenant, agent, purpose, term): the records containing the
term and its highest tf, both kept by statement triggers. A rebuild lays the rows out by scope.
A PL/pgSQL trigger function on the records feeds it all.

SQLite: a plain table `<name>_doc` (the rows) and an external-content FTS5 table `<name>` over
its scope, subject, kind and body columns, with the recipe's tokenizer. Scope, subject and kind
are single tokens made of letters and digits (hex of the text, ending in a digit, which the porter
stemmer leaves alone).

Table and trigger names derive from the index's primary key, never from user input; the only
recipe values spliced into DDL come from `memory.search.recipes.ANALYSERS`.
"""

import json
import re
import uuid
from collections.abc import Iterable, Sequence

from django.db import connection, transaction

from memory.search.models import storage_name
from memory.search.recipes import ANALYSERS

RECORDS = "memory_memoryrecord"
STORAGE_NAME = re.compile(r"^(memory_search_(?:lex|sem)_(\d+))(?:_.*)?$")
# Record columns an index copies; a change to any of them re-indexes the record.
WATCHED = (
    "status",
    "content",
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


def _analyser(recipe: dict, vendor: str) -> str:
    analyser = recipe["analyser"][vendor]
    if analyser not in {a[vendor] for a in ANALYSERS.values()}:  # never splice anything else into DDL
        raise ValueError("Unknown analyser.")
    return analyser


def doclen_sql(expr: str, *, vendor: str) -> str:
    """Words in `expr`: whitespace-separated runs, as one SQL expression both databases evaluate
    alike (newlines and tabs count as spaces; runs of up to 16 spaces collapse)."""
    char = "chr" if vendor == "postgresql" else "char"
    text = f"replace(replace(replace({expr}, {char}(10), ' '), {char}(13), ' '), {char}(9), ' ')"
    for _ in range(4):
        text = f"replace({text}, '  ', ' ')"
    text = f"trim({text})"
    return f"(CASE WHEN {text} = '' THEN 0 ELSE length({text}) - length(replace({text}, ' ', '')) + 1 END)"


def _execute(sql: str, params=None) -> int:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount


# --------------------------------------------------------------------------------------------
# PostgreSQL


PG_COLUMNS = ("record_id", *COPIED, "doclen", "tf", "vector")


def _pg_select(r: str, config: str, *, source: str = "") -> str:
    """`SELECT <index row> FROM ...` for the record `r` (a table alias, or NEW in a trigger): the
    content is parsed once (`v.tv`); `tf` maps each lexeme to its occurrences (for BM25), `vector`
    holds the lexemes without positions plus the scope lexemes (for the GIN index). `source` names
    the table `r` aliases (a trigger's transition table); the records table by default."""
    copied = ", ".join(f"{r}.{column}" for column in COPIED)
    scope = (
        f"array_to_tsvector(ARRAY['scope ' || {r}.tenant_id || ' ' || {r}.agent_id || ' ' || {r}.purpose, "
        f"'subject ' || {r}.subject, 'kind ' || {r}.kind_id])"
    )
    tf = "(SELECT coalesce(jsonb_object_agg(u.lexeme, cardinality(u.positions)), '{}'::jsonb) FROM unnest(v.tv) u)"
    parsed = f"(SELECT to_tsvector('{config}'::regconfig, {r}.content) AS tv) v"
    source = f"{source or RECORDS} {r} CROSS JOIN LATERAL {parsed}"
    return (
        f"SELECT {r}.id, {copied}, {doclen_sql(f'{r}.content', vendor='postgresql')}, {tf}, strip(v.tv) || {scope} FROM {source}"
    )


def _pg_create(name: str, recipe: dict) -> None:
    for sql in (
        f"""CREATE TABLE {name} (
            record_id uuid PRIMARY KEY, tenant_id bigint NOT NULL, agent_id bigint NOT NULL,
            purpose varchar(100) NOT NULL, subject varchar(200) NOT NULL, kind_id bigint NOT NULL,
            authority varchar(16) NOT NULL, confidence double precision NOT NULL, confirmed_at timestamptz NOT NULL,
            expires_at timestamptz NOT NULL, valid_from timestamptz, valid_to timestamptz,
            doclen integer NOT NULL, tf jsonb NOT NULL, vector tsvector NOT NULL)""",
        # Collection statistics per scope bucket, and per (scope, term) document frequencies with
        # the highest term frequency seen, kept by statement triggers on the index table.
        f"CREATE TABLE {name}_terms ({TERMS_COLUMNS}) {COUNTERS_STORAGE}",
        f"""CREATE TABLE {name}_stats (
            tenant_id bigint NOT NULL, agent_id bigint NOT NULL, purpose varchar(100) NOT NULL,
            subject varchar(200) NOT NULL, kind_id bigint NOT NULL, docs bigint NOT NULL, words bigint NOT NULL,
            authorities smallint NOT NULL, max_confidence double precision NOT NULL,
            PRIMARY KEY (tenant_id, agent_id, purpose, subject, kind_id)) {COUNTERS_STORAGE}""",
        *_pg_stats_triggers(name),
        *_pg_record_triggers(name, recipe),
    ):
        _execute(sql)


def _pg_record_triggers(name: str, recipe: dict) -> list[str]:
    """The sync function and its three triggers on the records: statement-level, over the
    statement's transition tables, so a statement that changes many records (the expire job, a
    forget, a batch write, prune) changes the index, and its statistics, in one set-based pass
    each, not one DELETE/INSERT (and statistics update) per record."""
    config = _analyser(recipe, "postgresql")
    columns = ", ".join(PG_COLUMNS)
    upsert = ", ".join(f"{column} = EXCLUDED.{column}" for column in PG_COLUMNS[1:])
    # The rows whose watched fields an UPDATE changed, found with EXCEPT (hashed) rather than by
    # joining the transition tables, which have no statistics and would be joined by a nested loop.
    watched = ", ".join(("id", *WATCHED))
    # A record that expires because its time is up keeps its entry, which no recall can return any
    # more (recall reads only entries with expires_at after its moment, and the entry's is past),
    # until `sweep_expired` deletes it with others: the expire job then touches no index page. Any
    # other change of such a record (forget, prune) removes the entry at once.
    left = (
        f"SELECT id FROM (SELECT {watched} FROM old_rows WHERE status IN ('active', 'expired') "
        f"EXCEPT SELECT {watched} FROM new_rows) o "
        f"EXCEPT (SELECT id FROM new_rows WHERE status = 'expired' AND expires_at <= statement_timestamp() "
        f"INTERSECT SELECT id FROM old_rows WHERE status = 'active' AND expires_at <= statement_timestamp())"
    )
    entered = f"(SELECT {watched} FROM new_rows WHERE status = 'active' EXCEPT SELECT {watched} FROM old_rows)"
    return [
        f"""CREATE FUNCTION {name}_sync() RETURNS trigger LANGUAGE plpgsql AS $fn$
            BEGIN
              IF TG_OP = 'INSERT' THEN
                INSERT INTO {name} ({columns}) {_pg_select("n", config, source="new_rows")}
                WHERE n.status = 'active' ON CONFLICT (record_id) DO UPDATE SET {upsert};
              ELSIF TG_OP = 'DELETE' THEN
                DELETE FROM {name} WHERE record_id IN (SELECT id FROM old_rows WHERE status IN ('active', 'expired'));
              ELSIF NOT EXISTS (SELECT 1 FROM new_rows WHERE status <> 'expired' OR expires_at > statement_timestamp())
                    AND NOT EXISTS (SELECT 1 FROM old_rows WHERE status NOT IN ('active', 'quarantined')
                                                              OR expires_at > statement_timestamp()) THEN
                -- Every row an active or quarantined record expired in time (the expire job's
                -- statements): entries stay for the sweep and nothing enters, which the general
                -- case below would find too, comparing every watched column of every row.
                NULL;
              ELSIF NOT EXISTS (SELECT 1 FROM old_rows WHERE status IN ('active', 'expired'))
                    AND NOT EXISTS (SELECT 1 FROM new_rows WHERE status = 'active') THEN
                -- No row had an entry or gets one (forget propagation blanking forgotten records,
                -- a quarantined record's edits): the general case would find nothing to delete
                -- or insert, after comparing every row and running the statistics triggers.
                NULL;
              ELSE
                DELETE FROM {name} WHERE record_id IN ({left});
                INSERT INTO {name} ({columns}) {_pg_select("n", config, source=entered)}
                ON CONFLICT (record_id) DO UPDATE SET {upsert};
              END IF;
              RETURN NULL;
            END $fn$""",
        f"""CREATE TRIGGER {name}_ins AFTER INSERT ON {RECORDS} REFERENCING NEW TABLE AS new_rows
            FOR EACH STATEMENT EXECUTE FUNCTION {name}_sync()""",
        f"""CREATE TRIGGER {name}_upd AFTER UPDATE ON {RECORDS} REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
            FOR EACH STATEMENT EXECUTE FUNCTION {name}_sync()""",
        f"""CREATE TRIGGER {name}_del AFTER DELETE ON {RECORDS} REFERENCING OLD TABLE AS old_rows
            FOR EACH STATEMENT EXECUTE FUNCTION {name}_sync()""",
    ]


def pg_upgrade_indexes(search_indexes) -> None:
    """For a migration: `pg_upgrade_triggers` on every lexical index of `search_indexes` (the
    migration's SearchIndex model) whose storage exists. Nothing to do on SQLite."""
    if connection.vendor != "postgresql":
        return
    for index in search_indexes.objects.filter(kind="lexical"):
        name = storage_name("lexical", index.pk)
        if storage_exists(name):
            pg_upgrade_triggers(name, index.recipe)


def pg_upgrade_triggers(name: str, recipe: dict) -> None:
    """Bring an index built by an earlier version up to the current storage (migrations 0008, 0012
    and 0017): its terms table, filled from its rows (once), and the sweep's expiry index; the
    statistics triggers that keep the terms and delete what a change empties; statement-level
    triggers on the records that leave the entries of records expired in time to the sweep; room
    on the statistics tables' pages for in-place updates; a GIN index without a pending list.
    Running it again changes nothing."""
    if not storage_exists(f"{name}_terms"):
        _execute(f"CREATE TABLE {name}_terms ({TERMS_COLUMNS}) {COUNTERS_STORAGE}")
        _execute(f"LOCK TABLE {name} IN SHARE MODE")  # no write between the fill and the new triggers
        _execute(f"INSERT INTO {name}_terms ({TERM_KEYS}, docs, max_tf) {_per_term(name)}")
    for sql in _pg_stats_triggers(name):
        if sql.startswith("CREATE OR REPLACE FUNCTION"):
            _execute(sql)
    _execute(f"DROP FUNCTION IF EXISTS {name}_sync() CASCADE")
    for sql in _pg_record_triggers(name, recipe):
        _execute(sql)
    # Buckets and terms an older trigger left at zero (it could, under concurrent writes) still name
    # what forget removed.
    _execute(f"DELETE FROM {name}_stats WHERE docs <= 0")
    _execute(f"DELETE FROM {name}_terms WHERE docs <= 0")
    if not _index_is(f"{name}_expiry", "(expires_at, record_id)"):  # (migration 0013's change)
        _execute(f"DROP INDEX IF EXISTS {name}_expiry")
        _execute(f"CREATE INDEX {name}_expiry ON {name} (expires_at, record_id)")
    for table in ("stats", "terms"):  # (migration 0017's change; pages written from now on)
        _execute(f"ALTER TABLE {name}_{table} SET ({COUNTERS_FILLFACTOR})")
    _execute(f"ALTER INDEX IF EXISTS {name}_vector SET (fastupdate = off)")
    _execute(f"SELECT gin_clean_pending_list('{name}_vector'::regclass) WHERE to_regclass('{name}_vector') IS NOT NULL")


def _index_is(name: str, columns: str) -> bool:
    """Whether the index `name` exists on exactly `columns` (as pg_indexes spells them)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexdef FROM pg_indexes WHERE schemaname = current_schema() AND indexname = %s", [name])
        row = cursor.fetchone()
    return row is not None and row[0].endswith(f"USING btree {columns}")


# Authorities present in a bucket, as bits (a bound for the priors; a bit is never cleared).
AUTHORITY_BITS = {"operator": 1, "user": 2, "third_party": 4, "agent": 8}
BUCKET = ("tenant_id", "agent_id", "purpose", "subject", "kind_id")
# Per scope (tenant, agent, purpose) and term: the records containing it (BM25's df for recall
# across a purpose, a lookup instead of a count) and the highest tf seen (a bound for the
# ranking; like the authority bits, it is never lowered). No subject: a scope's terms are its
# records' words, and a term goes with the last record containing it.
TERM_SCOPE = ("tenant_id", "agent_id", "purpose")
# The statistics tables are counters every write and delete of entries updates: half of each page
# is left free, so that a counter's new version goes beside the old one (a heap-only update: no
# index entry, and the page pruned as it is read) rather than spreading both tables over dead rows
# (a sweep of 850,000 entries left the terms table at 114 MB for 43,000 rows; 7 MB with this).
COUNTERS_FILLFACTOR = "fillfactor = 50"
COUNTERS_STORAGE = f"WITH ({COUNTERS_FILLFACTOR})"
TERM_KEYS = ", ".join((*TERM_SCOPE, "lexeme"))
TERMS_COLUMNS = (
    "tenant_id bigint NOT NULL, agent_id bigint NOT NULL, purpose varchar(100) NOT NULL, lexeme text NOT NULL, "
    "docs bigint NOT NULL, max_tf integer NOT NULL, PRIMARY KEY (tenant_id, agent_id, purpose, lexeme)"
)


def _per_term(rows: str) -> str:
    """Per (scope, term) of the index rows `rows` (a table or transition table): records, highest tf."""
    return (
        f"SELECT {', '.join(TERM_SCOPE)}, t.key AS lexeme, count(*) AS docs, max(t.value::integer) AS max_tf "
        f"FROM {rows} CROSS JOIN LATERAL jsonb_each_text(tf) t GROUP BY {TERM_KEYS}"
    )


def _pg_stats_triggers(name: str) -> list[str]:
    """Statement-level triggers on the index table that keep `<name>_stats` (records, words, the
    authorities present and the highest confidence per bucket) and `<name>_terms` in step, one
    aggregated statement per change and table, so a bulk load costs one upsert per bucket and term."""
    keys = ", ".join(BUCKET)
    bits = " ".join(f"WHEN '{a}' THEN {bit}" for a, bit in AUTHORITY_BITS.items())
    added = (
        f"INSERT INTO {name}_stats AS s ({keys}, docs, words, authorities, max_confidence) "
        f"SELECT {keys}, count(*), sum(doclen), bit_or(CASE authority {bits} ELSE 0 END)::smallint, max(confidence) "
        f"FROM new_rows GROUP BY {keys} ORDER BY {keys} "
        f"ON CONFLICT ({keys}) DO UPDATE SET docs = s.docs + EXCLUDED.docs, words = s.words + EXCLUDED.words, "
        f"authorities = s.authorities | EXCLUDED.authorities, "
        f"max_confidence = greatest(s.max_confidence, EXCLUDED.max_confidence);"
    )
    added += (
        f"\nINSERT INTO {name}_terms AS s ({TERM_KEYS}, docs, max_tf) {_per_term('new_rows')} "
        f"ORDER BY {TERM_KEYS} ON CONFLICT ({TERM_KEYS}) DO UPDATE SET docs = s.docs + EXCLUDED.docs, "
        f"max_tf = greatest(s.max_tf, EXCLUDED.max_tf);"
    )
    # A bucket left empty is deleted, since its key names a subject (personal data, which forget
    # must not leave behind); the next record of that scope recreates it. Likewise a term no
    # record of its scope contains any more.
    # The rows the change touches are locked first, in key order (as the upsert above locks them,
    # so two writers of a purpose queue rather than deadlock); then, seeing the latest counts,
    # decremented (a join of the aggregated transition table with the rows), and those the
    # decrement left empty, as it returns them, deleted by their place (ctid). (Filtering the rows
    # by `docs <= 0` against the aggregate again was planned as a nested loop over both, since the
    # planner expects one empty row: a sweep whose batches emptied thousands of buckets took minutes.)
    declare, removed = [], []
    for table, columns, aggregate in (
        ("stats", BUCKET, f"SELECT {keys}, count(*) AS docs, sum(doclen) AS words FROM old_rows GROUP BY {keys}"),
        ("terms", (*TERM_SCOPE, "lexeme"), _per_term("old_rows")),
    ):
        match = " AND ".join(f"s.{k} = o.{k}" for k in columns)
        words = ", words = s.words - o.words" if table == "stats" else ""
        order = ", ".join(f"s.{k}" for k in columns)
        # The rows left empty, by their place (this transaction holds their locks: they stay there).
        emptied = f"{table}_emptied"
        declare.append(f"{emptied} tid[];")
        removed.append(
            f"PERFORM 1 FROM {name}_{table} s JOIN ({aggregate}) o ON {match} ORDER BY {order} FOR UPDATE OF s;\n"
            f"WITH u AS (UPDATE {name}_{table} s SET docs = s.docs - o.docs{words} FROM ({aggregate}) o "
            f"WHERE {match} RETURNING s.ctid, s.docs) "
            f"SELECT array_agg(u.ctid) INTO {emptied} FROM u WHERE u.docs <= 0;\n"
            f"IF {emptied} IS NOT NULL THEN DELETE FROM {name}_{table} WHERE ctid = ANY({emptied}); END IF;"
        )
    declared = f"DECLARE {' '.join(declare)} "
    # A statement that changed no entry (the sync trigger's delete of records that had none, say)
    # returns at once: each aggregate above is planned and run even over an empty table.
    body = {
        "add": f"IF NOT EXISTS (SELECT 1 FROM new_rows) THEN RETURN NULL; END IF;\n{added}",
        "remove": "IF NOT EXISTS (SELECT 1 FROM old_rows) THEN RETURN NULL; END IF;\n" + "\n".join(removed),
        "change": "IF NOT EXISTS (SELECT 1 FROM old_rows) THEN RETURN NULL; END IF;\n" + "\n".join(removed) + "\n" + added,
    }
    sql = []
    for event, (op, referencing) in {
        "add": ("INSERT", "NEW TABLE AS new_rows"),
        "remove": ("DELETE", "OLD TABLE AS old_rows"),
        "change": ("UPDATE", "OLD TABLE AS old_rows NEW TABLE AS new_rows"),
    }.items():
        sql.append(
            f"CREATE OR REPLACE FUNCTION {name}_stats_{event}() RETURNS trigger LANGUAGE plpgsql AS $fn$ "
            f"{declared if event != 'add' else ''}BEGIN {body[event]} RETURN NULL; END $fn$"
        )
        sql.append(
            f"CREATE TRIGGER {name}_stats_{event} AFTER {op} ON {name} REFERENCING {referencing} "
            f"FOR EACH STATEMENT EXECUTE FUNCTION {name}_stats_{event}()"
        )
    return sql


def _pg_fill(name: str, recipe: dict) -> int:
    """Load every active record, then reconcile what changed while loading. The triggers exist
    before the load starts, so a write after it is indexed by its trigger; a write already in
    flight during the load is caught by the reconciliation, which first waits for every writer of
    the records that started before it (a SHARE lock, released at once)."""
    config = _analyser(recipe, "postgresql")
    columns = ", ".join(PG_COLUMNS)
    with transaction.atomic():
        # In scope order, so that a scope's rows share pages: recall across a purpose reads them together.
        _execute(
            f"INSERT INTO {name} ({columns}) {_pg_select('r', config)} "
            f"WHERE r.status = 'active' ORDER BY r.tenant_id, r.agent_id, r.purpose, r.subject "
            f"ON CONFLICT (record_id) DO NOTHING"
        )
    with transaction.atomic():
        _execute(f"LOCK TABLE {RECORDS} IN SHARE MODE")
    with transaction.atomic():
        _execute(
            f"DELETE FROM {name} d WHERE NOT EXISTS (SELECT 1 FROM {RECORDS} r WHERE r.id = d.record_id AND r.status = 'active')"
        )
        _execute(
            f"INSERT INTO {name} ({columns}) {_pg_select('r', config)} "
            f"WHERE r.status = 'active' AND NOT EXISTS (SELECT 1 FROM {name} d WHERE d.record_id = r.id) "
            f"ON CONFLICT (record_id) DO NOTHING"
        )
    # Secondary indexes are built after the load (much faster than row by row); concurrently when
    # we may, so the triggers' inserts (every write of a record) do not wait for them.
    concurrently = "" if connection.in_atomic_block else "CONCURRENTLY "
    # No pending list (fastupdate): with one, every search also reads every entry inserted since the
    # last vacuum, a few megabytes, which cost recall more than the inserts gain.
    _execute(f"CREATE INDEX {concurrently}{name}_vector ON {name} USING gin (vector) WITH (fastupdate = off)")
    # The ranking by the priors alone walks these newest-confirmed first (memory.search.ranking).
    _execute(
        f"CREATE INDEX {concurrently}{name}_recent ON {name} (tenant_id, agent_id, purpose, confirmed_at DESC, "
        f"record_id DESC) INCLUDE (kind_id, authority, confidence, expires_at, valid_from, valid_to)"
    )
    _execute(
        f"CREATE INDEX {concurrently}{name}_subject_recent ON {name} (tenant_id, agent_id, purpose, subject, "
        f"confirmed_at DESC, record_id DESC) INCLUDE (kind_id, authority, confidence, expires_at, valid_from, valid_to)"
    )
    _execute(f"CREATE INDEX {concurrently}{name}_expiry ON {name} (expires_at, record_id)")  # sweep_expired
    # VACUUM sets the visibility map, so counts read the GIN index without visiting the rows; it
    # cannot run inside a transaction (a migration, a test), where ANALYZE alone has to do.
    analyse = "ANALYZE" if connection.in_atomic_block else "VACUUM (ANALYZE)"
    _execute(f"{analyse} {name}")
    _execute(f"{analyse} {name}_stats")
    _execute(f"{analyse} {name}_terms")
    return count_rows(name)


def _pg_drop(name: str) -> None:
    _execute(f"DROP FUNCTION IF EXISTS {name}_sync() CASCADE")  # its three triggers on the records go with it
    _execute(f"DROP TABLE IF EXISTS {name}")  # and its statistics triggers with the table
    _execute(f"DROP TABLE IF EXISTS {name}_stats")
    _execute(f"DROP TABLE IF EXISTS {name}_terms")
    for event in ("add", "remove", "change"):
        _execute(f"DROP FUNCTION IF EXISTS {name}_stats_{event}()")


# --------------------------------------------------------------------------------------------
# SQLite

SQLITE_DOC_COLUMNS = ("record_id", "scope", "subj", "kind", "body", *COPIED, "doclen")
FTS_COLUMNS = ("scope", "subj", "kind", "body")
BODY_COLUMN = FTS_COLUMNS.index("body")  # for highlight()


def scope_token(tenant_id: int, agent_id: int, purpose: str) -> str:
    return f"t{tenant_id}a{agent_id}p{purpose.encode().hex()}0"


def subject_token(subject: str) -> str:
    return f"s{subject.encode().hex()}0"


def kind_token(kind_id: int) -> str:
    return f"k{kind_id}"


def _sqlite_row(r: str) -> str:
    # The same tokens as scope_token(), subject_token() and kind_token(), computed by SQLite.
    copied = ", ".join(f"{r}.{column}" for column in COPIED)
    return (
        f"{r}.id, 't' || {r}.tenant_id || 'a' || {r}.agent_id || 'p' || lower(hex({r}.purpose)) || '0', "
        f"'s' || lower(hex({r}.subject)) || '0', 'k' || {r}.kind_id, {r}.content, {copied}, "
        f"{doclen_sql(f'{r}.content', vendor='sqlite')}"
    )


def _sqlite_create_and_fill(name: str, recipe: dict) -> int:
    """In one transaction (SQLite has one writer at a time, so no write can slip between the load
    and the triggers)."""
    tokenizer = _analyser(recipe, "sqlite")
    doc_columns = ", ".join(SQLITE_DOC_COLUMNS)
    fts_columns = ", ".join(FTS_COLUMNS)
    new_values = ", ".join(f"new.{c}" for c in FTS_COLUMNS)
    old_values = ", ".join(f"old.{c}" for c in FTS_COLUMNS)
    with transaction.atomic():
        for sql in (
            f"""CREATE TABLE {name}_doc (
                id INTEGER PRIMARY KEY, record_id TEXT NOT NULL UNIQUE, scope TEXT NOT NULL, subj TEXT NOT NULL,
                kind TEXT NOT NULL, body TEXT NOT NULL, tenant_id INTEGER NOT NULL, agent_id INTEGER NOT NULL,
                purpose TEXT NOT NULL, subject TEXT NOT NULL, kind_id INTEGER NOT NULL, authority TEXT NOT NULL,
                confidence REAL NOT NULL, confirmed_at TEXT NOT NULL, expires_at TEXT NOT NULL, valid_from TEXT,
                valid_to TEXT, doclen INTEGER NOT NULL)""",
            f"INSERT INTO {name}_doc ({doc_columns}) SELECT {_sqlite_row('r')} FROM {RECORDS} r WHERE r.status = 'active'",
            f"""CREATE VIRTUAL TABLE {name} USING fts5({fts_columns}, content='{name}_doc', content_rowid='id',
                tokenize='{tokenizer}')""",
            f"INSERT INTO {name}({name}) VALUES ('rebuild')",
            f"""CREATE TRIGGER {name}_doc_ai AFTER INSERT ON {name}_doc BEGIN
                INSERT INTO {name}(rowid, {fts_columns}) VALUES (new.id, {new_values}); END""",
            f"""CREATE TRIGGER {name}_doc_ad AFTER DELETE ON {name}_doc BEGIN
                INSERT INTO {name}({name}, rowid, {fts_columns}) VALUES ('delete', old.id, {old_values}); END""",
            f"""CREATE TRIGGER {name}_ai AFTER INSERT ON {RECORDS} WHEN NEW.status = 'active' BEGIN
                INSERT INTO {name}_doc ({doc_columns}) SELECT {_sqlite_row("NEW")}; END""",
            f"""CREATE TRIGGER {name}_au AFTER UPDATE OF {", ".join(WATCHED)} ON {RECORDS}
                WHEN OLD.status = 'active' OR NEW.status = 'active' BEGIN
                DELETE FROM {name}_doc WHERE record_id = OLD.id;
                INSERT INTO {name}_doc ({doc_columns}) SELECT {_sqlite_row("NEW")} WHERE NEW.status = 'active'; END""",
            f"""CREATE TRIGGER {name}_ad AFTER DELETE ON {RECORDS} WHEN OLD.status = 'active' BEGIN
                DELETE FROM {name}_doc WHERE record_id = OLD.id; END""",
        ):
            _execute(sql)
    return count_rows(name)


def _sqlite_drop(name: str) -> None:
    # Triggers on the records first: one left behind would fail every write once its table is gone.
    for suffix in ("ai", "au", "ad"):
        _execute(f"DROP TRIGGER IF EXISTS {name}_{suffix}")
    _execute(f"DROP TABLE IF EXISTS {name}")
    _execute(f"DROP TABLE IF EXISTS {name}_doc")


# --------------------------------------------------------------------------------------------
# the interface used by memory.search.build and the forget artifact


def build_storage(name: str, recipe: dict) -> int:
    """Create the index's tables and triggers and fill them from the active records; returns how
    many records it holds. Any previous storage under the name is dropped first (a cache)."""
    drop_storage(name)
    if connection.vendor == "postgresql":
        with transaction.atomic():
            _pg_create(name, recipe)
        return _pg_fill(name, recipe)
    return _sqlite_create_and_fill(name, recipe)


def drop_storage(name: str) -> None:
    if connection.vendor == "postgresql":
        _pg_drop(name)
    else:
        _sqlite_drop(name)


RECORD_TRIGGERS = {"postgresql": ("ins", "upd", "del"), "sqlite": ("ai", "au", "ad")}


def triggers_present(name: str) -> bool:
    """Whether all of the index's triggers on the records exist. SQLite drops them when a
    migration rebuilds the records table (how it alters most columns)."""
    expected = {f"{name}_{suffix}" for suffix in RECORD_TRIGGERS[connection.vendor]}
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT tgname FROM pg_trigger WHERE tgname = ANY(%s) AND NOT tgisinternal", [list(expected)])
        else:
            cursor.execute(
                "SELECT name FROM sqlite_master WHERE type = 'trigger' AND name IN (SELECT value FROM json_each(%s))",
                [json.dumps(sorted(expected))],
            )
        return {row[0] for row in cursor.fetchall()} == expected


def storage_exists(name: str) -> bool:
    return name in connection.introspection.table_names()


def count_rows(name: str) -> int:
    table = name if connection.vendor == "postgresql" else f"{name}_doc"
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {table}")
        return cursor.fetchone()[0]


def purge_records(name: str, record_ids: Sequence[uuid.UUID]) -> int:
    """Delete the given records' entries; returns how many were still there. On SQLite the FTS5
    index is then merged into one segment, which drops the deleted entries' tokens from disk
    (a plain delete only records a tombstone beside them)."""
    if not record_ids:
        return 0
    if connection.vendor == "postgresql":
        # The statistics triggers delete a bucket (it names its subject) or term the delete empties.
        return _execute(f"DELETE FROM {name} WHERE record_id = ANY(%s)", [list(record_ids)])
    hex_ids = json.dumps([uuid.UUID(str(pk)).hex for pk in record_ids])
    removed = _execute(f"DELETE FROM {name}_doc WHERE record_id IN (SELECT value FROM json_each(%s))", [hex_ids])
    _execute(f"INSERT INTO {name}({name}) VALUES ('optimize')")
    return removed


def sweep_expired(name: str, *, now, batch_size: int) -> int:
    """Delete the entries whose time was up at `now` (those of records the expire job expired, and
    of records past their time it has not reached yet; no recall can return either),
    `batch_size` per transaction, walking (expires_at, record_id) past the last batch so that no
    batch re-reads the entries the previous ones deleted; returns how many went. SQLite's triggers
    delete them at once: nothing to do there."""
    if connection.vendor != "postgresql":
        return 0
    removed, after = 0, None
    while True:
        keyset = "AND (expires_at, record_id) > (%s, %s) " if after else ""
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(
                f"WITH gone AS (DELETE FROM {name} WHERE record_id = ANY(ARRAY(SELECT record_id FROM {name} WHERE expires_at <= %s "
                f"{keyset}ORDER BY expires_at, record_id LIMIT %s)) RETURNING expires_at, record_id) "
                f"SELECT count(*) OVER (), expires_at, record_id FROM gone ORDER BY expires_at DESC, record_id DESC LIMIT 1",
                [now, *(after or ()), batch_size],
            )
            last = cursor.fetchone()
        done = last[0] if last else 0
        removed += done
        if done < batch_size:
            return removed
        after = (last[1], last[2])


def storage_names_present() -> set[str]:
    """Base names of every index storage in the database (tables or, on PostgreSQL, trigger
    functions), whether or not an index row still describes it."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() "
                "AND tablename LIKE 'memory\\_search\\_%%' UNION "
                "SELECT proname FROM pg_proc WHERE proname LIKE 'memory\\_search\\_%%'"
            )
        else:
            cursor.execute(
                "SELECT name FROM sqlite_master WHERE type IN ('table', 'trigger') "
                "AND name LIKE 'memory\\_search\\_%%' ESCAPE '\\'"
            )
        names = [row[0] for row in cursor.fetchall()]
    return {match.group(1) for match in map(STORAGE_NAME.match, names) if match}


def storage_tables() -> list[str]:
    """Every table of every index storage in the database, lexical or semantic (`memory.search.
    vectors` follows these names), served or not: PostgreSQL `<name>`, `<name>_terms`,
    `<name>_stats`; SQLite `<name>_doc` and the FTS5 table with its shadow tables. A forget's
    deletes leave old row versions in their files until the tables are rewritten."""
    return sorted(table for table in connection.introspection.table_names() if STORAGE_NAME.match(table))


def drop_storage_except(keep: Iterable[str]) -> list[str]:
    """Drop every index storage not named in `keep` (left behind by a retired index, a failed
    build, or a test database flush); returns the names dropped."""
    dropped = sorted(storage_names_present() - set(keep))
    for name in dropped:
        drop_storage(name)
    return dropped
