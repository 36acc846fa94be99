"""PostgreSQL search storage, version 1: the tables, functions and triggers of a lexical and a
semantic index as migrations 0006 to 0017 left them (their successive upgrades fold into this one
version: an index built by 0006 and upgraded by each of them, or built afterwards, ends here).

Pinned: migrations call this module, so it never changes. It holds its own copies of the names it
splices into DDL (the records table, the columns an index copies and watches, the text search
configurations), so a later change elsewhere cannot change what an old migration does. A new
design is a new module (`ddl_v2`, ...) with an upgrade from this one.

Lexical index `<name>`: the content's lexemes (the recipe's text search configuration) as a
position-free tsvector plus three scope lexemes ('scope <tenant> <agent> <purpose>',
'subject <subject>', 'kind <id>'; they contain spaces, which the parser never emits, so no word
collides with them) under a GIN index, each lexeme's occurrences as a jsonb map (BM25's tf), the
copied record fields and a word count (`doclen`). `<name>_stats` holds the collection statistics
per (tenant, agent, purpose, subject, kind): records, words, the authorities present and the
highest confidence; `<name>_terms` per (tenant, agent, purpose, term): the records containing the
term and its highest tf; both kept by statement triggers on `<name>`. A statement-level function
`<name>_sync()` on the records (triggers `<name>_ins|_upd|_del`) feeds `<name>`; a record the
expire job expires because its time is up keeps its entry until the sweep deletes it.

Semantic index `<name>`: a row per active record with the copied fields, its `content_hash` and
its embedding (`vector`, NULL while pending), kept by the row-level function `<name>_sync()`.
"""

from __future__ import annotations

from typing import Any

from django.db import connection, transaction

VERSION = 1
RECORDS = "memory_memoryrecord"
# Record columns a lexical index copies; a change to any watched one re-indexes the record.
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
COLUMNS = ("record_id", *COPIED, "doclen", "tf", "vector")
SEMANTIC_COLUMNS = ("record_id", *COPIED, "content_hash")
# The only recipe values spliced into DDL: the text search configurations a recipe may name.
CONFIGURATIONS = frozenset({"english", "simple"})
# Authorities present in a bucket, as bits (a bound for the priors; a bit is never cleared).
AUTHORITY_BITS = {"operator": 1, "user": 2, "third_party": 4, "agent": 8}
BUCKET = ("tenant_id", "agent_id", "purpose", "subject", "kind_id")
# Per scope (tenant, agent, purpose) and term: the records containing it (BM25's df for recall
# across a purpose) and the highest tf seen (a bound for the ranking; never lowered). No subject:
# a scope's terms are its records' words, and a term goes with the last record containing it.
TERM_SCOPE = ("tenant_id", "agent_id", "purpose")
# The statistics tables are counters every write and delete of entries updates: half of each page
# is left free, so that a counter's new version goes beside the old one (a heap-only update: no
# index entry, and the page pruned as it is read) rather than spreading both tables over dead rows.
COUNTERS_FILLFACTOR = "fillfactor = 50"
COUNTERS_STORAGE = f"WITH ({COUNTERS_FILLFACTOR})"
TERM_KEYS = ", ".join((*TERM_SCOPE, "lexeme"))
TERMS_COLUMNS = (
    "tenant_id bigint NOT NULL, agent_id bigint NOT NULL, purpose varchar(100) NOT NULL, lexeme text NOT NULL, "
    "docs bigint NOT NULL, max_tf integer NOT NULL, PRIMARY KEY (tenant_id, agent_id, purpose, lexeme)"
)


def _execute(sql: str, params: Any = None) -> int:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount


def _configuration(recipe: dict) -> str:
    config = recipe["analyser"]["postgresql"]
    if config not in CONFIGURATIONS:  # never splice anything else into DDL
        raise ValueError("Unknown analyser.")
    return config


def doclen_sql(expr: str) -> str:
    """Words in `expr`: whitespace-separated runs (newlines and tabs count as spaces; runs of up to
    16 spaces collapse), the same expression SQLite's storage evaluates."""
    text = f"replace(replace(replace({expr}, chr(10), ' '), chr(13), ' '), chr(9), ' ')"
    for _ in range(4):
        text = f"replace({text}, '  ', ' ')"
    text = f"trim({text})"
    return f"(CASE WHEN {text} = '' THEN 0 ELSE length({text}) - length(replace({text}, ' ', '')) + 1 END)"


# --------------------------------------------------------------------------------------------
# lexical


def _select(r: str, config: str, *, source: str = "") -> str:
    """`SELECT <index row> FROM ...` for the record `r` (a table alias): the content is parsed once
    (`v.tv`); `tf` maps each lexeme to its occurrences, `vector` holds the lexemes without
    positions plus the scope lexemes. `source` names the table `r` aliases (a trigger's transition
    table); the records table by default."""
    copied = ", ".join(f"{r}.{column}" for column in COPIED)
    scope = (
        f"array_to_tsvector(ARRAY['scope ' || {r}.tenant_id || ' ' || {r}.agent_id || ' ' || {r}.purpose, "
        f"'subject ' || {r}.subject, 'kind ' || {r}.kind_id])"
    )
    tf = "(SELECT coalesce(jsonb_object_agg(u.lexeme, cardinality(u.positions)), '{}'::jsonb) FROM unnest(v.tv) u)"
    parsed = f"(SELECT to_tsvector('{config}'::regconfig, {r}.content) AS tv) v"
    source = f"{source or RECORDS} {r} CROSS JOIN LATERAL {parsed}"
    return f"SELECT {r}.id, {copied}, {doclen_sql(f'{r}.content')}, {tf}, strip(v.tv) || {scope} FROM {source}"


def _create(name: str, recipe: dict) -> None:
    for sql in (
        f"""CREATE TABLE {name} (
            record_id uuid PRIMARY KEY, tenant_id bigint NOT NULL, agent_id bigint NOT NULL,
            purpose varchar(100) NOT NULL, subject varchar(200) NOT NULL, kind_id bigint NOT NULL,
            authority varchar(16) NOT NULL, confidence double precision NOT NULL, confirmed_at timestamptz NOT NULL,
            expires_at timestamptz NOT NULL, valid_from timestamptz, valid_to timestamptz,
            doclen integer NOT NULL, tf jsonb NOT NULL, vector tsvector NOT NULL)""",
        f"CREATE TABLE {name}_terms ({TERMS_COLUMNS}) {COUNTERS_STORAGE}",
        f"""CREATE TABLE {name}_stats (
            tenant_id bigint NOT NULL, agent_id bigint NOT NULL, purpose varchar(100) NOT NULL,
            subject varchar(200) NOT NULL, kind_id bigint NOT NULL, docs bigint NOT NULL, words bigint NOT NULL,
            authorities smallint NOT NULL, max_confidence double precision NOT NULL,
            PRIMARY KEY (tenant_id, agent_id, purpose, subject, kind_id)) {COUNTERS_STORAGE}""",
        *_stats_triggers(name),
        *_record_triggers(name, recipe),
    ):
        _execute(sql)


def _record_triggers(name: str, recipe: dict) -> list[str]:
    """The sync function and its three triggers on the records: statement-level, over the
    statement's transition tables, so a statement that changes many records (the expire job, a
    forget, a batch write, prune) changes the index, and its statistics, in one set-based pass
    each."""
    config = _configuration(recipe)
    columns = ", ".join(COLUMNS)
    upsert = ", ".join(f"{column} = EXCLUDED.{column}" for column in COLUMNS[1:])
    # The rows whose watched fields an UPDATE changed, found with EXCEPT (hashed) rather than by
    # joining the transition tables, which have no statistics and would be joined by a nested loop.
    watched = ", ".join(("id", *WATCHED))
    # A record that expires because its time is up keeps its entry, which no recall can return any
    # more (recall reads only entries with expires_at after its moment), until the sweep deletes it
    # with others: the expire job then touches no index page. Any other change of such a record
    # (forget, prune) removes the entry at once.
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
                INSERT INTO {name} ({columns}) {_select("n", config, source="new_rows")}
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
                INSERT INTO {name} ({columns}) {_select("n", config, source=entered)}
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


def _per_term(rows: str) -> str:
    """Per (scope, term) of the index rows `rows` (a table or transition table): records, highest tf."""
    return (
        f"SELECT {', '.join(TERM_SCOPE)}, t.key AS lexeme, count(*) AS docs, max(t.value::integer) AS max_tf "
        f"FROM {rows} CROSS JOIN LATERAL jsonb_each_text(tf) t GROUP BY {TERM_KEYS}"
    )


def _stats_triggers(name: str) -> list[str]:
    """Statement-level triggers on the index table that keep `<name>_stats` and `<name>_terms` in
    step, one aggregated statement per change and table, so a bulk load costs one upsert per
    bucket and term."""
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
    # record of its scope contains any more. The rows the change touches are locked first, in key
    # order (as the upsert above locks them, so two writers of a purpose queue rather than
    # deadlock); then, seeing the latest counts, decremented (a join of the aggregated transition
    # table with the rows), and those the decrement left empty, as it returns them, deleted by
    # their place (ctid), not by filtering the rows against the aggregate again, which the planner
    # runs as a nested loop over both.
    declare, removed = [], []
    for table, columns, aggregate in (
        ("stats", BUCKET, f"SELECT {keys}, count(*) AS docs, sum(doclen) AS words FROM old_rows GROUP BY {keys}"),
        ("terms", (*TERM_SCOPE, "lexeme"), _per_term("old_rows")),
    ):
        match = " AND ".join(f"s.{k} = o.{k}" for k in columns)
        words = ", words = s.words - o.words" if table == "stats" else ""
        order = ", ".join(f"s.{k}" for k in columns)
        emptied = f"{table}_emptied"  # the rows left empty, by their place (this transaction holds their locks)
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


def _fill(name: str, recipe: dict) -> int:
    """Load every active record, then reconcile what changed while loading. The triggers exist
    before the load starts, so a write after it is indexed by its trigger; a write already in
    flight during the load is caught by the reconciliation, which first waits for every writer of
    the records that started before it (a SHARE lock, released at once)."""
    config = _configuration(recipe)
    columns = ", ".join(COLUMNS)
    with transaction.atomic():
        # In scope order, so that a scope's rows share pages: recall across a purpose reads them together.
        _execute(
            f"INSERT INTO {name} ({columns}) {_select('r', config)} "
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
            f"INSERT INTO {name} ({columns}) {_select('r', config)} "
            f"WHERE r.status = 'active' AND NOT EXISTS (SELECT 1 FROM {name} d WHERE d.record_id = r.id) "
            f"ON CONFLICT (record_id) DO NOTHING"
        )
    # Secondary indexes are built after the load (much faster than row by row); concurrently when
    # we may, so the triggers' inserts (every write of a record) do not wait for them.
    concurrently = "" if connection.in_atomic_block else "CONCURRENTLY "
    # No pending list (fastupdate): with one, every search also reads every entry inserted since
    # the last vacuum, which costs recall more than the inserts gain.
    _execute(f"CREATE INDEX {concurrently}{name}_vector ON {name} USING gin (vector) WITH (fastupdate = off)")
    # The ranking by the priors alone walks these newest-confirmed first.
    _execute(
        f"CREATE INDEX {concurrently}{name}_recent ON {name} (tenant_id, agent_id, purpose, confirmed_at DESC, "
        f"record_id DESC) INCLUDE (kind_id, authority, confidence, expires_at, valid_from, valid_to)"
    )
    _execute(
        f"CREATE INDEX {concurrently}{name}_subject_recent ON {name} (tenant_id, agent_id, purpose, subject, "
        f"confirmed_at DESC, record_id DESC) INCLUDE (kind_id, authority, confidence, expires_at, valid_from, valid_to)"
    )
    _execute(f"CREATE INDEX {concurrently}{name}_expiry ON {name} (expires_at, record_id)")  # the sweep's walk
    # VACUUM sets the visibility map, so counts read the GIN index without visiting the rows; it
    # cannot run inside a transaction (a migration, a test), where ANALYZE alone has to do.
    analyse = "ANALYZE" if connection.in_atomic_block else "VACUUM (ANALYZE)"
    _execute(f"{analyse} {name}")
    _execute(f"{analyse} {name}_stats")
    _execute(f"{analyse} {name}_terms")
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {name}")
        return cursor.fetchone()[0]


def lexical_create(name: str, recipe: dict) -> int:
    """Create a lexical index's tables and triggers and fill them from the active records; returns
    how many records it holds. The name must be free."""
    with transaction.atomic():
        _create(name, recipe)
    return _fill(name, recipe)


def _exists(table: str) -> bool:
    return table in connection.introspection.table_names()


def _index_is(name: str, columns: str) -> bool:
    """Whether the index `name` exists on exactly `columns` (as pg_indexes spells them)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexdef FROM pg_indexes WHERE schemaname = current_schema() AND indexname = %s", [name])
        row = cursor.fetchone()
    return row is not None and row[0].endswith(f"USING btree {columns}")


def lexical_upgrade(name: str, recipe: dict) -> None:
    """Bring a lexical index built by an earlier design up to this version (what migrations 0008,
    0012, 0014, 0015 and 0017 each asked for): its terms table, filled from its rows (once), and
    the sweep's expiry index; the statistics triggers that keep the terms and delete what a change
    empties; statement-level triggers on the records that leave the entries of records expired in
    time to the sweep; room on the statistics tables' pages for in-place updates; a GIN index
    without a pending list. Running it again changes nothing."""
    if not _exists(f"{name}_terms"):
        _execute(f"CREATE TABLE {name}_terms ({TERMS_COLUMNS}) {COUNTERS_STORAGE}")
        _execute(f"LOCK TABLE {name} IN SHARE MODE")  # no write between the fill and the new triggers
        _execute(f"INSERT INTO {name}_terms ({TERM_KEYS}, docs, max_tf) {_per_term(name)}")
    for sql in _stats_triggers(name):
        if sql.startswith("CREATE OR REPLACE FUNCTION"):
            _execute(sql)
    _execute(f"DROP FUNCTION IF EXISTS {name}_sync() CASCADE")
    for sql in _record_triggers(name, recipe):
        _execute(sql)
    # Buckets and terms an older trigger left at zero (it could, under concurrent writes) still
    # name what forget removed.
    _execute(f"DELETE FROM {name}_stats WHERE docs <= 0")
    _execute(f"DELETE FROM {name}_terms WHERE docs <= 0")
    if not _index_is(f"{name}_expiry", "(expires_at, record_id)"):
        _execute(f"DROP INDEX IF EXISTS {name}_expiry")
        _execute(f"CREATE INDEX {name}_expiry ON {name} (expires_at, record_id)")
    for table in ("stats", "terms"):  # pages written from now on
        _execute(f"ALTER TABLE {name}_{table} SET ({COUNTERS_FILLFACTOR})")
    _execute(f"ALTER INDEX IF EXISTS {name}_vector SET (fastupdate = off)")
    _execute(f"SELECT gin_clean_pending_list('{name}_vector'::regclass) WHERE to_regclass('{name}_vector') IS NOT NULL")


def upgrade_indexes(search_indexes: Any) -> list[int]:
    """For a migration: `lexical_upgrade` on every lexical index of `search_indexes` (the
    migration's SearchIndex model) whose storage exists; returns their primary keys."""
    upgraded = []
    for index in search_indexes.objects.filter(kind="lexical").order_by("pk"):
        name = f"memory_search_lex_{int(index.pk)}"
        if _exists(name):
            lexical_upgrade(name, index.recipe)
            upgraded.append(index.pk)
    return upgraded


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
            record_id uuid PRIMARY KEY, tenant_id bigint NOT NULL, agent_id bigint NOT NULL,
            purpose varchar(100) NOT NULL, subject varchar(200) NOT NULL, kind_id bigint NOT NULL,
            authority varchar(16) NOT NULL, confidence double precision NOT NULL, confirmed_at timestamptz NOT NULL,
            expires_at timestamptz NOT NULL, valid_from timestamptz, valid_to timestamptz,
            content_hash varchar(71) NOT NULL, vector bytea)""",
        f"CREATE INDEX {name}_scope ON {name} (tenant_id, agent_id, purpose, subject)",
        f"CREATE INDEX {name}_pending ON {name} (record_id) WHERE vector IS NULL",
    ]


def semantic_triggers(name: str) -> list[str]:
    """A semantic index's sync function and triggers on the records, replacing any there: row-level,
    each firing only for a record that is or was active and whose copied fields or content changed."""
    columns = ", ".join(SEMANTIC_COLUMNS)
    changed = " OR ".join(f"OLD.{column} IS DISTINCT FROM NEW.{column}" for column in (*WATCHED, "content_hash"))
    return [
        f"DROP FUNCTION IF EXISTS {name}_sync() CASCADE",  # and its triggers
        f"""CREATE FUNCTION {name}_sync() RETURNS trigger LANGUAGE plpgsql AS $fn$
            BEGIN
              IF TG_OP <> 'DELETE' AND NEW.status = 'active' THEN
                INSERT INTO {name} ({columns}) VALUES ({_values("NEW")}) {_upsert(name)};
              ELSIF TG_OP <> 'INSERT' THEN
                DELETE FROM {name} WHERE record_id = OLD.id;
              END IF;
              RETURN NULL;
            END $fn$""",
        f"""CREATE TRIGGER {name}_ins AFTER INSERT ON {RECORDS} FOR EACH ROW
            WHEN (NEW.status = 'active') EXECUTE FUNCTION {name}_sync()""",
        f"""CREATE TRIGGER {name}_upd AFTER UPDATE ON {RECORDS} FOR EACH ROW
            WHEN ((OLD.status = 'active' OR NEW.status = 'active') AND ({changed})) EXECUTE FUNCTION {name}_sync()""",
        f"""CREATE TRIGGER {name}_del AFTER DELETE ON {RECORDS} FOR EACH ROW
            WHEN (OLD.status = 'active') EXECUTE FUNCTION {name}_sync()""",
    ]


# --------------------------------------------------------------------------------------------


def drop(name: str) -> None:
    """Drop an index's storage, lexical or semantic, and everything on the records that feeds it."""
    _execute(f"DROP FUNCTION IF EXISTS {name}_sync() CASCADE")  # its three triggers on the records go with it
    _execute(f"DROP TABLE IF EXISTS {name}")  # and its statistics triggers with the table
    _execute(f"DROP TABLE IF EXISTS {name}_stats")
    _execute(f"DROP TABLE IF EXISTS {name}_terms")
    for event in ("add", "remove", "change"):
        _execute(f"DROP FUNCTION IF EXISTS {name}_stats_{event}()")
