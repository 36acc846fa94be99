"""Recall latency of two checkouts, paired: each runs under its own gunicorn (2 workers) against the
same benchmark database, and every request of `bench.run`'s recall workload goes to both, in
alternating order, so that whatever else the machine does weighs on both alike. On a shared
machine, where two runs minutes apart differ by more than a change does, this is how a change is
measured.

    .venv/bin/python -m bench.ab --base /tmp/base --dsn postgresql://postgres@127.0.0.1:5432/gm_bench

`--base` is another checkout with its own `.venv` (`git worktree add /tmp/base <commit>`, then
`ln -s "$PWD/.venv" /tmp/base/.venv` when the dependencies are the same); the other side is this
checkout. The database must hold `bench.run`'s data (`bench.run.prepare`); both sides run its
migrations' code as it is, so compare checkouts whose migrations match.

`--classes` sends `bench.recall_latency`'s query classes instead (rare, mixed, common and stop words
only, each purpose-wide and subject-scoped) to a database holding its data:

    .venv/bin/python -m bench.ab --base /tmp/base --classes --dsn postgresql://postgres@127.0.0.1:5432/gm_recall_bench
"""

import argparse
import os
import statistics
from pathlib import Path

import psycopg

from bench.run import DEFAULT_DSN, RECALL_QUERIES, ROOT, Server, credentials, percentile, post_json, recall_scope


def compare(sides: dict[str, Server], token: str, asked: list[str], n: int) -> dict:
    """{scope: {side: [seconds per request]}}, both sides asked the same requests."""
    times: dict = {}
    names = list(sides)
    for scope in ("subject", "purpose"):
        times[scope] = {name: [] for name in names}
        for i in range(n):
            body = {"query": RECALL_QUERIES[i % len(RECALL_QUERIES)], "purpose": "support", "limit": 10, "token_budget": 800}
            if scope == "subject":
                body["subject"] = asked[i % len(asked)]
            for name in names if i % 2 == 0 else names[::-1]:
                status, payload, seconds = post_json(sides[name].base + "/api/v1/recall/", token, body)
                assert status == 200, (name, status, payload)
                times[scope][name].append(seconds)
    return times


def compare_classes(sides: dict[str, Server], token: str, plan: dict[str, list[str]]) -> dict:
    """{query class and scope: {side: [seconds per request]}}: `bench.recall_latency`'s requests,
    each sent to both sides in alternating order."""
    from bench.recall_latency import request_body

    times: dict = {}
    names = list(sides)
    for label, texts in plan.items():
        for scope in ("purpose", "subject"):
            key = f"{label}, {'purpose-wide' if scope == 'purpose' else 'subject-scoped'}"
            times[key] = {name: [] for name in names}
            for i, text in enumerate(texts):
                body = request_body(text, scope, i)
                for name in names if i % 2 == 0 else names[::-1]:
                    status, payload, seconds = post_json(sides[name].base + "/api/v1/recall/", token, body)
                    assert status == 200, (name, status, payload)
                    times[key][name].append(seconds)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", required=True, help="the other checkout (with its .venv)")
    parser.add_argument("--dsn", default=os.environ.get("BENCH_DATABASE_URL", DEFAULT_DSN))
    parser.add_argument("--recalls", type=int, default=200, help="requests per scope, to each side")
    parser.add_argument("--classes", action="store_true", help="bench.recall_latency's query classes, on its data")
    args = parser.parse_args()
    if args.classes:
        from bench.recall_latency import queries
        from bench.run import manage

        plan = queries(args.dsn, args.recalls)
        plan.pop("_df")
        issued = manage(args.dsn, "issue_agent_token", "--tenant", "bench-recall", "--agent", "agent-0", "--purposes", "support")
        token = issued.strip().splitlines()[-1]
    else:
        token = credentials(args.dsn)[0]
    sides: dict[str, Server] = {}
    try:
        sides["base"] = Server(args.dsn, workers=2, root=Path(args.base).resolve())
        sides["this"] = Server(args.dsn, workers=2, root=ROOT)
        for side in sides.values():
            for _ in range(20):  # every worker warm
                post_json(side.base + "/api/v1/recall/", token, {"query": "warm up", "purpose": "support"})
        if args.classes:
            times = compare_classes(sides, token, plan)
        else:
            with psycopg.connect(args.dsn) as conn:
                asked = recall_scope(conn)[2]
            times = compare(sides, token, asked, args.recalls)
    finally:
        for side in sides.values():
            side.stop()
    for scope, by_side in times.items():
        for name, seconds in by_side.items():
            ms = [s * 1000 for s in seconds]
            print(
                f"{scope:34s} {name:5s} p50 {percentile(ms, 0.5):6.1f} ms  p95 {percentile(ms, 0.95):6.1f} ms  "
                f"mean {statistics.mean(ms):6.1f} ms",
                flush=True,
            )


if __name__ == "__main__":
    main()
