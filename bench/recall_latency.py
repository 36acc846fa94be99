"""Recall latency with BM25 at scale: p50/p95 through the HTTP API (gunicorn) for a scope of 100,000
active records (one tenant, agent and purpose) in a database of about a million, plus the time to
rebuild the lexical index over all of them.

    .venv/bin/python -m bench.recall_latency --fresh            # create gm_recall_bench, seed, rebuild, measure
    .venv/bin/python -m bench.recall_latency                    # measure again on the existing data
    .venv/bin/python -m bench.recall_latency --fresh --scope 20000 --others 80000 --recalls 100   # quick
    .venv/bin/python -m bench.recall_latency --hybrid          # + the semantic index (the `semantic` extra)
    .venv/bin/python -m bench.recall_latency --hybrid --keep-semantic   # measure again, the index as built

Content is drawn from a synthetic vocabulary of 8,000 words with a Zipf-like (log-uniform rank)
distribution, 8 to 40 words a record, so some query words are rare and some occur in a large share
of the scope, as in real notes. Query classes:
- rare: three words from the vocabulary's tail (each in well under 1% of the scope);
- mixed: one common word and two rarer ones;
- common: three words from the 20 most frequent (each in several percent of the scope);
- stop words only: no usable term (ranked by the priors alone).
Each class is measured purpose-wide (all 100,000 records) and subject-scoped (about 100).
The records are seeded with triggers off and the index is then rebuilt with `rebuild_index
--wait`, which is also the figure for a full rebuild.

--hybrid measures lexical recall first, then builds a semantic index over every active record and
makes it active (through the promotion gates), and measures hybrid recall twice: with the
approximate search (`memory.search.ann`: a graph per tenant of at least `min_partition` records)
and, as its floor, with every vector of the scope scanned (SEMANTIC_ANN_SEARCH=false); then the
approximate search's recall@10 against the exact scan and the semantic arm's own time in process
(the query's embedding, the approximate and the exact search), per query class. Hybrid recall
embeds the query with the real model. The records' vectors are synthetic (`synthetic_vectors`: a fixed random
vector per word, summed, plus noise), since the model would need hours for a million records on
this machine; the build time reported is therefore the storage's and the graphs', not the model's.
"""

import argparse
import functools
import json
import os
import random
import subprocess
import time

import psycopg

from bench.run import PY, ROOT, Server, app_env, manage, percentile, post_json

DEFAULT_DSN = "postgresql://postgres@127.0.0.1:5432/gm_recall_bench"
SYLLABLES = "ka lo mi ne ru ta vo zi be do fu ga hi ju ke li mo nu pa ri".split()
VOCABULARY = [a + b + c for a in SYLLABLES for b in SYLLABLES for c in SYLLABLES]  # 8,000 words
SUBJECTS = 1000
OTHER_TENANTS = 9


def _seed_scope(cur, *, tenant_id: int, agent_id: int, kind_id: int, count: int, purpose: str, seed: int) -> None:
    cur.execute("SELECT setseed(%s)", (seed / 1000.0,))
    cur.execute(
        """
        INSERT INTO memory_memoryrecord (id, tenant_id, agent_id, subject, purpose, kind_id, content, content_hash,
          source_type, source_uri, session_id, turn_id, tool, source_version, observed_at, contaminated, authority,
          trust, quarantine_reason, reviewed_by_id, reviewed_at, confidence, created_at, valid_from, valid_to,
          confirmed_at, expires_at, last_used_at, status, status_changed_at, version, supersedes_id)
        SELECT gen_random_uuid(), %(tenant)s, %(agent)s, 'subject/' || (g %% %(subjects)s), %(purpose)s, %(kind)s,
               c.content, 'sha256:' || encode(sha256(convert_to(c.content, 'UTF8')), 'hex'),
               'user_turn', 'chat://bench/' || g, 's-' || (g / 20), (g %% 20)::text, '', '', now() - interval '1 day',
               false, CASE WHEN (g * 7919) %% 10 = 0 THEN 'third_party' ELSE 'user' END, 'trusted', '', NULL, NULL,
               0.5 + ((g * 40503::bigint) %% 50) / 100.0, x.at, NULL, NULL, x.at, x.at + interval '400 days', NULL,
               'active', x.at, 1, NULL
        FROM generate_series(1, %(count)s) AS g
        -- ages, confidences and authorities spread independently of each other (multiplicative hashes)
        CROSS JOIN LATERAL (SELECT now() - ((g * 2654435761::bigint) %% 1000003) / 1000003.0 * interval '300 days' AS at) AS x
        CROSS JOIN LATERAL (
            SELECT string_agg((%(words)s::text[])[floor(exp(random() * ln(cardinality(%(words)s::text[]))))::int], ' ')
                   AS content
            FROM generate_series(1, 8 + (g %% 33)) AS i
        ) AS c
        """,
        {
            "tenant": tenant_id,
            "agent": agent_id,
            "kind": kind_id,
            "count": count,
            "subjects": SUBJECTS,
            "purpose": purpose,
            "words": VOCABULARY,
        },
    )


def seed(dsn: str, scope: int, others: int) -> dict:
    started = time.perf_counter()
    with psycopg.connect(dsn, autocommit=False) as conn, conn.cursor() as cur:
        cur.execute("SET session_replication_role = replica")  # no triggers: the index is rebuilt after
        cur.execute("SELECT id FROM memory_memorykind WHERE name = 'episodic'")
        kind_id = cur.fetchone()[0]
        cur.execute(
            "SELECT t.id, a.id FROM memory_tenant t JOIN memory_agent a ON a.tenant_id = t.id "
            "WHERE t.slug = 'bench-recall' AND a.slug = 'agent-0'"
        )
        tenant_id, agent_id = cur.fetchone()
        _seed_scope(cur, tenant_id=tenant_id, agent_id=agent_id, kind_id=kind_id, count=scope, purpose="support", seed=1)
        for n in range(OTHER_TENANTS):
            cur.execute(
                "INSERT INTO memory_tenant (slug, name, created_at) VALUES (%s, '', now()) RETURNING id", (f"bench-other-{n}",)
            )
            other_tenant = cur.fetchone()[0]
            cur.execute(
                "INSERT INTO memory_agent (tenant_id, slug, name, created_at) VALUES (%s, 'agent-0', '', now()) RETURNING id",
                (other_tenant,),
            )
            other_agent = cur.fetchone()[0]
            _seed_scope(
                cur,
                tenant_id=other_tenant,
                agent_id=other_agent,
                kind_id=kind_id,
                count=others // OTHER_TENANTS,
                purpose="support",
                seed=n + 2,
            )
        conn.commit()
        cur.execute("SELECT count(*) FROM memory_memoryrecord")
        total = cur.fetchone()[0]
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE memory_memoryrecord")
    return {"records": total, "seconds": round(time.perf_counter() - started, 1)}


def prepare(dsn: str, scope: int, others: int) -> dict:
    admin_dsn = dsn.rsplit("/", 1)[0] + "/postgres"
    dbname = dsn.rsplit("/", 1)[1]
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{dbname}"')
    manage(dsn, "migrate", "--noinput", "-v0")
    manage(dsn, "issue_agent_token", "--tenant", "bench-recall", "--agent", "agent-0", "--purposes", "support")
    seeded = seed(dsn, scope, others)
    started = time.perf_counter()
    out = subprocess.run(
        [PY, "manage.py", "rebuild_index", "lexical-default", "--wait"],
        cwd=ROOT,
        env=app_env(dsn),
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    summary = json.loads(out.strip().splitlines()[-1])
    return {"seed": seeded, "rebuild_seconds": round(time.perf_counter() - started, 1), "index": summary}


def queries(dsn: str, n: int) -> dict[str, list[str]]:
    """Query words by how many records of the scope hold them (document frequency)."""
    rng = random.Random(7)
    ranks = [1, 20, 100, 2000, 8000]
    with psycopg.connect(dsn) as conn:  # words are six letters, so LIKE finds whole words only
        rows = conn.execute(
            "SELECT word, (SELECT count(*) FROM memory_memoryrecord r JOIN memory_tenant t ON t.id = r.tenant_id "
            "WHERE t.slug = 'bench-recall' AND r.content LIKE '%%' || word || '%%') FROM unnest(%s::text[]) AS word",
            ([VOCABULARY[rank - 1] for rank in ranks],),
        ).fetchall()
    frequency = {f"word of rank {rank}": count for rank, (_, count) in zip(ranks, rows, strict=True)}
    common = VOCABULARY[:20]
    rare = VOCABULARY[2000:]
    middle = VOCABULARY[100:2000]
    return {
        "rare": [" ".join(rng.sample(rare, 3)) for _ in range(n)],
        "mixed": [" ".join([rng.choice(common), *rng.sample(middle, 2)]) for _ in range(n)],
        "common": [" ".join(rng.sample(common, 3)) for _ in range(n)],
        "stop words only": ["what is it about the" for _ in range(n)],
        "_df": frequency,
    }


@functools.cache
def _word_vector(word: str):
    import zlib

    import numpy as np

    return np.random.default_rng(zlib.crc32(word.encode())).standard_normal(384).astype(np.float32)


def synthetic_vectors(texts: list[str]):
    """Unit vectors for the semantic index's build (see the module docstring): each text's is the
    sum of a fixed random vector per word, plus noise of the same size, normalised; so texts that
    share words are near each other, as with a real model, and a graph's recall is measured on
    data with neighbourhoods rather than on uniform noise, where every point is about as far as
    any other."""
    import zlib

    import numpy as np

    rng = np.random.default_rng(zlib.crc32("\n".join(texts[:3]).encode()))
    found = np.stack([sum((_word_vector(w) for w in text.split()), np.zeros(384, np.float32)) for text in texts])
    found = found / np.maximum(np.linalg.norm(found, axis=1, keepdims=True), 1e-9)
    found += rng.standard_normal(found.shape).astype(np.float32) / np.sqrt(384)
    return (found / np.linalg.norm(found, axis=1, keepdims=True)).astype(np.float32)


def approximate_recall(dsn: str, plan: dict[str, list[str]], k: int = 10) -> dict:
    """Per query class: recall@k of the approximate search against the exact scan of the same
    scope, purpose-wide, at the depth hybrid recall asks for (`fusion.DEPTH`) and at k, with each
    query's vector made as the records' were (`synthetic_vectors`); and the semantic arm's own time
    in process (p50/p95 ms): the query's embedding by the real model, `semantic.similar`
    purpose-wide (approximate and exact) and subject-scoped."""
    from django.utils import timezone

    from memory.models import Agent
    from memory.scope import Scope
    from memory.search import active_indexes, fusion, semantic
    from memory.search.models import IndexKind

    index = active_indexes()[IndexKind.SEMANTIC]
    agent = Agent.objects.select_related("tenant").get(tenant__slug="bench-recall", slug="agent-0")

    def scope_for(subject: str | None = None) -> Scope:
        return Scope(tenant_id=agent.tenant_id, agent_id=agent.pk, purpose="support", now=timezone.now(), subject=subject)

    partition = semantic.ann.partition(index.storage_name, index.recipe, agent.tenant_id)
    if partition is None:
        raise SystemExit("no approximate partition for the scope's tenant")
    semantic.warm_up()

    def ms(timings: list[float]) -> list[float]:
        return [round(percentile(timings, 0.5) * 1000, 1), round(percentile(timings, 0.95) * 1000, 1)]

    report = {}
    for label, texts in plan.items():
        embedding = []
        for n, text in enumerate(texts):  # each text once (the embedding is cached per process)
            started = time.perf_counter()
            semantic.embed([f"{text} {n}"])
            embedding.append(time.perf_counter() - started)
        original = semantic.query_vector
        semantic.query_vector = lambda text: synthetic_vectors([text])[0]
        try:
            hits = {10: 0.0, fusion.DEPTH: 0.0}
            approximate_ms, exact_ms, subject_ms = [], [], []
            for n, text in enumerate(texts):
                scope = scope_for()
                semantic.query_vector(text)  # (not timed: the synthetic vector stands for the model's)
                started = time.perf_counter()
                approximate = semantic._approximate(index, scope, text, depth=fusion.DEPTH, partition=partition)
                approximate_ms.append(time.perf_counter() - started)
                started = time.perf_counter()
                exact = semantic._exact(index, scope, text, depth=fusion.DEPTH)
                exact_ms.append(time.perf_counter() - started)
                assert approximate is not None
                hits[fusion.DEPTH] += len({h.record_id for h in approximate.top[:k]} & {h.record_id for h in exact.top[:k]}) / k
                shallow = semantic._approximate(index, scope, text, depth=k, partition=partition)
                assert shallow is not None
                hits[10] += len({h.record_id for h in shallow.top[:k]} & {h.record_id for h in exact.top[:k]}) / k
                started = time.perf_counter()
                semantic.similar(index, scope_for(f"subject/{n % SUBJECTS}"), text, depth=fusion.DEPTH)
                subject_ms.append(time.perf_counter() - started)
        finally:
            semantic.query_vector = original
        report[label] = {
            "recall_at_10": round(hits[fusion.DEPTH] / len(texts), 4),
            f"recall_at_10_depth_{k}": round(hits[10] / len(texts), 4),
            "embedding_ms": ms(embedding),
            "approximate_ms": ms(approximate_ms),
            "exact_ms": ms(exact_ms),
            "subject_ms": ms(subject_ms),
        }
        print(json.dumps({label: report[label]}), flush=True)
    return report


def setup_django(dsn: str) -> None:
    os.environ.update({k: v for k, v in app_env(dsn).items() if k in ("DATABASE_URL", "APP_VAR_DIR", "DEBUG", "LOG_LEVEL")})
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()


def semantic_active(dsn: str) -> bool:
    """Whether the database has an active semantic index (recall through HTTP is then hybrid)."""
    setup_django(dsn)
    from memory.search import active_indexes
    from memory.search.models import IndexKind

    return IndexKind.SEMANTIC in active_indexes()


def prepare_semantic(dsn: str, *, keep: bool = False) -> dict:
    """Build the semantic index over every active record (synthetic vectors) and promote it; with
    `keep`, use the active one if there is one."""
    setup_django(dsn)
    from memory.search import active_indexes
    from memory.search.build import build_index, index_summary, promote_index, request_rebuild
    from memory.search.models import IndexKind

    active = active_indexes().get(IndexKind.SEMANTIC)
    if keep and active is not None:
        return {"kept": True, "index": index_summary(active)}

    started = time.perf_counter()
    index = request_rebuild(name="semantic-bench", kind="semantic", actor="bench")
    build_index(index.pk, actor="bench", encode=synthetic_vectors)
    index, promoted = promote_index(index.pk, actor="bench")
    if not promoted:
        raise SystemExit(f"the semantic index was not promoted: {index.report.get('promotion')}")
    return {"build_seconds": round(time.perf_counter() - started, 1), "index": index_summary(index)}


def request_body(text: str, scope: str, i: int) -> dict:
    """The recall request for the `i`th query of a class, purpose-wide or subject-scoped. No floor
    (`min_relevance` 0): the synthetic vectors are near no real query's embedding, and at the default
    hybrid floor recall would return nothing and skip loading and rendering the items it measures."""
    body = {"query": text, "purpose": "support", "limit": 10, "token_budget": 800, "min_relevance": 0}
    if scope == "subject":
        body["subject"] = f"subject/{i % SUBJECTS}"
    return body


def measure(dsn: str, n: int, *, hybrid: bool = False) -> dict:
    token = (
        manage(dsn, "issue_agent_token", "--tenant", "bench-recall", "--agent", "agent-0", "--purposes", "support")
        .strip()
        .splitlines()[-1]
    )
    plan = queries(dsn, n)
    document_frequency = plan.pop("_df")
    if hybrid:  # each worker loads the model at its first recall, longer than gunicorn's default 30 s allows here
        os.environ["GUNICORN_CMD_ARGS"] = "--timeout 300"
    server = Server(dsn)
    results = {}
    try:
        warm = 0
        for _ in range(60):  # warm the workers (and their models) and the caches
            _, payload, seconds = post_json(
                server.base + "/api/v1/recall/",
                token,
                {"query": "kaloma", "purpose": "support", "min_relevance": 0},  # no floor: an item to look at
                timeout=300,
            )
            assert not hybrid or "semantic" in payload["items"][0]["score_parts"], payload  # hybrid serves
            warm = warm + 1 if seconds < 2 else 0
            if warm >= 10:
                break
        for label, texts in plan.items():
            for scope in ("purpose", "subject"):
                timings, matched = [], []
                for i, text in enumerate(texts):
                    status, payload, seconds = post_json(server.base + "/api/v1/recall/", token, request_body(text, scope, i))
                    assert status == 200, (status, payload)
                    timings.append(seconds)
                    matched.append(len(payload["items"]))
                results[f"{label}, {scope}-wide" if scope == "purpose" else f"{label}, subject-scoped"] = {
                    "p50_ms": round(percentile(timings, 0.5) * 1000, 1),
                    "p95_ms": round(percentile(timings, 0.95) * 1000, 1),
                    "items": round(sum(matched) / len(matched), 1),
                }
    finally:
        server.stop()
    return {"recall": results, "document_frequency": document_frequency}


def print_table(title: str, recall: dict) -> None:
    print(f"\n{title}\n| query class | p50 | p95 | items |\n|---|---|---|---|")
    for label, figures in recall.items():
        print(f"| {label} | {figures['p50_ms']} ms | {figures['p95_ms']} ms | {figures['items']} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dsn", default=os.environ.get("BENCH_RECALL_DATABASE_URL", DEFAULT_DSN))
    parser.add_argument("--fresh", action="store_true", help="drop, migrate, seed and rebuild the index")
    parser.add_argument("--scope", type=int, default=100_000, help="records in the measured scope")
    parser.add_argument("--others", type=int, default=900_000, help="records in other tenants")
    parser.add_argument("--recalls", type=int, default=200, help="recalls per query class and scope")
    parser.add_argument("--hybrid", action="store_true", help="then build the semantic index and measure hybrid recall")
    parser.add_argument("--keep-semantic", action="store_true", help="with --hybrid: use the active semantic index, if any")
    args = parser.parse_args()
    report = {}
    if args.fresh:
        report["setup"] = prepare(args.dsn, args.scope, args.others)
        print(json.dumps(report["setup"]), flush=True)
    if semantic_active(args.dsn):  # a run with --hybrid, without --fresh
        print("\nlexical: not measured (a semantic index is active, so recall is hybrid; --fresh starts without one)", flush=True)
    else:
        report.update(measure(args.dsn, args.recalls))
        print_table("lexical", report["recall"])
    if args.hybrid:
        report["semantic_setup"] = prepare_semantic(args.dsn, keep=args.keep_semantic)
        print(json.dumps(report["semantic_setup"]), flush=True)
        report["hybrid"] = measure(args.dsn, args.recalls, hybrid=True)["recall"]
        print_table("hybrid (lexical + semantic, fused), approximate search", report["hybrid"])
        os.environ["SEMANTIC_ANN_SEARCH"] = "false"  # the floor: every vector of the scope scanned
        try:
            report["hybrid_exact"] = measure(args.dsn, args.recalls, hybrid=True)["recall"]
        finally:
            os.environ.pop("SEMANTIC_ANN_SEARCH")
        print_table("hybrid, exact scan (the floor)", report["hybrid_exact"])
        plan = queries(args.dsn, min(args.recalls, 100))
        plan.pop("_df")
        report["approximate_recall"] = approximate_recall(args.dsn, plan)
        print(json.dumps({"approximate_recall": report["approximate_recall"]}), flush=True)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
