"""Runs the recall evaluation set through the HTTP API and reports hit@5, hit@10 and MRR per
category, for the dev and the blind part, and for each part's no-answer questions the share that
recall answered with nothing (docs/recall-eval.md).

    .venv/bin/python -m bench.recall_eval.run                          # SQLite in a temp dir, both parts
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/gm \\
        .venv/bin/python -m bench.recall_eval.run --database postgres  # a fresh database gm_recall_eval
    .venv/bin/python -m bench.recall_eval.run --part dev --config NAME --server-env KEY=VALUE --recall-field KEY=JSON

Each run starts from an empty database: migrate, issue an agent token (`manage.py
issue_agent_token`), start gunicorn (2 workers) on a free port, write every turn as an episodic
`user` memory with `user_turn` provenance (session id, turn id, observed_at = the session's date),
through the batch endpoint when the server has one, else single writes (conversations in parallel,
each conversation's turns in order). Then one POST /api/v1/recall/ per question with every hard
filter on: purpose, subject (the conversation), kinds, limit 10. The no-answer questions come
last, so the answerable ones run exactly as they did before that part existed (`--skip-no-answer`
leaves them out). Prints Markdown tables and writes a JSON report with every question's ranking.

--config names an index configuration: a label in the report, and if it is registered in CONFIGS
below, the server environment and recall body fields that select it.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from bench.recall_eval import dataset, metrics
from bench.run import percentile

ROOT = Path(__file__).resolve().parents[2]
PURPOSE = "recall-eval"
TENANT, AGENT = "recall-eval", "evaluator"
LIMIT = 10
BATCH_SIZE = 100  # the batch endpoint's maximum
DEFAULT_POSTGRES = "postgres://postgres@127.0.0.1:5432/gm"

# Index configurations by name: server environment, extra recall body fields, and manage.py
# commands run once every turn is written (before the questions). An unregistered name is only a
# label.
CONFIGS: dict[str, dict] = {
    "default": {"env": {}, "recall": {}},
    # The lexical index alone (what the default is while no semantic index is built).
    "lexical": {"env": {}, "recall": {}},
    # Lexical + the semantic index (needs the `semantic` extra): built over every written turn and
    # made active, so recall fuses both. Each gunicorn worker loads the model at its first recall,
    # which on a loaded 2-core machine can take longer than gunicorn's default 30 s worker timeout.
    "hybrid": {
        "env": {"GUNICORN_CMD_ARGS": "--timeout 300"},
        "recall": {},
        "after_writes": [["rebuild_index", "semantic", "--kind", "semantic", "--wait"]],
    },
}


# --------------------------------------------------------------------------------------------
# the database and the server


def postgres_url(base: str) -> tuple[str, str, str]:
    """(url of the fresh database, url of the maintenance database, fresh database name) on the
    server DATABASE_URL names; the fresh database is that name + `_recall_eval`."""
    parts = urlsplit(base)
    name = parts.path.lstrip("/") + "_recall_eval"
    return (urlunsplit(parts._replace(path="/" + name)), urlunsplit(parts._replace(path="/postgres")), name)


def recreate_postgres(maintenance_url: str, name: str, *, drop_only: bool = False) -> None:
    import psycopg

    with psycopg.connect(maintenance_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        if not drop_only:
            conn.execute(f'CREATE DATABASE "{name}"')


def server_environment(database_url: str, var_dir: Path, extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PROMETHEUS_MULTIPROC_DIR"}
    env.update(
        DATABASE_URL=database_url,
        APP_VAR_DIR=str(var_dir),
        DJANGO_SETTINGS_MODULE="config.settings",
        API_THROTTLE_RATE="1000000/min",
        DEBUG="false",
        LOG_LEVEL="WARNING",
        **extra,
    )
    return env


def manage(env: dict[str, str], *args: str) -> str:
    done = subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"manage.py {args[0]} failed:\n{done.stderr[-3000:]}")
    return done.stdout


def start_server(env: dict[str, str], log: Path, workers: int):
    """The project's test server helper (gunicorn on a free port), pointed at our database: it
    reads the database from Django's settings in this process, so configure Django from `env`."""
    os.environ.update({k: env[k] for k in ("DATABASE_URL", "APP_VAR_DIR", "DJANGO_SETTINGS_MODULE")})
    os.environ.pop("PROMETHEUS_MULTIPROC_DIR", None)
    import django

    django.setup()
    from tests.processes import GunicornServer

    server = GunicornServer(log, workers=workers, **env)
    server.start()
    return server


# --------------------------------------------------------------------------------------------
# writing the turns


def write_body(conv: dict, session: dict, turn: dict) -> dict:
    return {
        "kind": "episodic",
        "subject": conv["subject"],
        "purpose": PURPOSE,
        "content": dataset.turn_content(turn),
        "authority": "user",
        "confidence": 0.9,
        "provenance": {
            "source_type": "user_turn",
            "uri": f"chat://{conv['id']}/{session['id']}#{turn['id']}",
            "session_id": session["id"],
            "turn_id": turn["id"],
            "tool": None,
            "source_version": None,
            "observed_at": session["date"],
            "contaminated": False,
        },
    }


CALL_TIMEOUT = 120.0  # seconds per HTTP call, unless --call-timeout (a loaded machine, a model loading)


def call(server, method: str, path: str, token: str, body: dict):
    return server.call(method, path, token, body, timeout=getattr(server, "call_timeout", CALL_TIMEOUT))


def has_batch_endpoint(server, token: str) -> bool:
    status, _ = call(server, "POST", "/api/v1/memories/batch/", token, {"items": []})
    return status not in (404, 405)


def check_written(status: int, payload, turn_id: str) -> str:
    if status != 201 or not isinstance(payload, dict) or payload.get("status") != "active":
        raise SystemExit(f"writing {turn_id} failed: {status} {str(payload)[:500]}")
    return payload["id"]


def write_conversation(server, token: str, conv: dict, batch: bool) -> dict[str, str]:
    """Writes one conversation's turns in order; returns record id -> turn id."""
    bodies = [(turn["id"], write_body(conv, session, turn)) for session in conv["sessions"] for turn in session["turns"]]
    ids = {}
    if batch:
        for start in range(0, len(bodies), BATCH_SIZE):
            chunk = bodies[start : start + BATCH_SIZE]
            status, payload = call(server, "POST", "/api/v1/memories/batch/", token, {"items": [b for _, b in chunk]})
            if status != 200:
                raise SystemExit(f"batch write failed: {status} {str(payload)[:500]}")
            for (turn_id, _), result in zip(chunk, payload["results"], strict=True):
                ids[check_written(result["status"], result.get("record"), turn_id)] = turn_id
    else:
        for turn_id, body in bodies:
            status, payload = call(server, "POST", "/api/v1/memories/", token, body)
            ids[check_written(status, payload, turn_id)] = turn_id
    return ids


# --------------------------------------------------------------------------------------------
# asking the questions


def recall_call(server, token: str, conv: dict, question: dict, recall_fields: dict) -> tuple[dict, float]:
    """Recall's response to the question, asked with the conversation's subject, and the seconds taken."""
    body = {
        "query": question["question"],
        "purpose": PURPOSE,
        "subject": conv["subject"],
        "kinds": ["episodic"],
        "limit": LIMIT,
        **recall_fields,
    }
    started = time.perf_counter()
    status, payload = call(server, "POST", "/api/v1/recall/", token, body)
    seconds = time.perf_counter() - started
    if status != 200:
        raise SystemExit(f"recall for {question['id']} failed: {status} {str(payload)[:500]}")
    return payload, seconds


def turn_ranking(payload: dict, record_turns: dict[str, str]) -> list[str]:
    return [(item.get("provenance") or {}).get("turn_id") or record_turns.get(item["id"], "?") for item in payload["items"]]


def ask(
    server, token: str, conv: dict, question: dict, record_turns: dict[str, str], recall_fields: dict
) -> tuple[list[str], list[float], float]:
    """The turn ids recall returned for the question, best first, their scores, and the seconds taken."""
    payload, seconds = recall_call(server, token, conv, question, recall_fields)
    return turn_ranking(payload, record_turns), [item.get("score") for item in payload["items"]], seconds


def evaluate_part(server, token: str, data: dict, record_turns: dict[str, str], recall_fields: dict) -> dict:
    scored, latencies = [], []
    for conv in data["conversations"]:
        for question in conv["questions"]:
            ranking, scores, seconds = ask(server, token, conv, question, record_turns, recall_fields)
            latencies.append(seconds)
            scored.append(
                {
                    "id": question["id"],
                    "category": question["category"],
                    "ranking": ranking,
                    "scores": scores,
                    "evidence_ids": question["evidence"],
                    **metrics.score_question(ranking, question["evidence"]),
                }
            )
    return {
        "sha256": data["sha256"],
        "frozen": data["frozen"],
        "summary": metrics.summarise(scored, (*dataset.CATEGORIES, *dataset.EXTRA_CATEGORIES)),
        "recall_latency_ms": {"p50": percentile(latencies, 0.5) * 1000, "p95": percentile(latencies, 0.95) * 1000},
        "questions": scored,
    }


def evaluate_noanswer(server, token: str, noanswer: dict, record_turns: dict[str, str], recall_fields: dict) -> dict:
    """Asks the no-answer questions: what recall returned for each (ideally nothing), the items'
    `relevance` where recall reports one, and the response's other numbers (e.g. how many
    candidates fell under a relevance floor)."""
    rows, latencies = [], []
    for conv in noanswer["conversations"]:
        for question in conv["questions"]:
            payload, seconds = recall_call(server, token, conv, question, recall_fields)
            latencies.append(seconds)
            items = payload["items"]
            ranking = turn_ranking(payload, record_turns)
            rows.append(
                {
                    "id": question["id"],
                    "trap": question["trap"],
                    "topic": question["topic"],
                    "returned": len(items),
                    "relevance": [item["relevance"] for item in items if isinstance(item.get("relevance"), (int, float))],
                    "ranking": ranking,
                    "scores": [item.get("score") for item in items],
                    "near_returned": [turn for turn in ranking if turn in question["check"]["near"]],
                    "response": {k: v for k, v in payload.items() if k != "items" and isinstance(v, (int, float, bool))},
                }
            )
    return {
        "sha256": noanswer["sha256"],
        "frozen": noanswer["frozen"],
        "summary": metrics.summarise_noanswer(rows, dataset.TRAPS),
        "recall_latency_ms": {"p50": percentile(latencies, 0.5) * 1000, "p95": percentile(latencies, 0.95) * 1000},
        "questions": rows,
    }


# --------------------------------------------------------------------------------------------
# report


def pct(value) -> str:
    return "—" if value is None else f"{100 * value:.1f}"


def markdown_table(report: dict) -> str:
    lines = [
        "| part | category | questions | hit@5 % | hit@10 % | MRR | all evidence in top 10 % |",
        "|---|---|---|---|---|---|---|",
    ]
    for part, result in report["parts"].items():
        for name in (*dataset.CATEGORIES, *dataset.EXTRA_CATEGORIES, "all"):
            row = result["summary"].get(name)
            if row is None or not row["n"]:
                continue
            mrr = "—" if row["mrr"] is None else f"{row['mrr']:.3f}"
            multi = f"{pct(row['all_evidence@10'])} (of {row['multi_n']})" if row["multi_n"] else "—"
            label = f"**{name}**" if name == "all" else name
            lines.append(f"| {part} | {label} | {row['n']} | {pct(row['hit@5'])} | {pct(row['hit@10'])} | {mrr} | {multi} |")
    return "\n".join(lines)


def noanswer_table(report: dict) -> str:
    lines = [
        "| part | trap | questions | answered with nothing % | mean items returned | questions with relevance | top relevance |",
        "|---|---|---|---|---|---|---|",
    ]
    for part, result in report["noanswer"].items():
        for name in (*dataset.TRAPS, "all"):
            row = result["summary"][name]
            top = "—" if row["top_relevance"] is None else f"{row['top_relevance']:.3f}"
            mean = "—" if row["mean_returned"] is None else f"{row['mean_returned']:.1f}"
            label = f"**{name}**" if name == "all" else name
            lines.append(f"| {part} | {label} | {row['n']} | {pct(row['empty'])} | {mean} | {row['relevance_n']} | {top} |")
    return "\n".join(lines)


def git_revision() -> str:
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout.strip()

    head = git("rev-parse", "--short", "HEAD")
    if not head:
        return "unknown (not a git checkout)"
    return head + ("+uncommitted" if git("status", "--porcelain", "--", "memory", "config", "governance") else "")


def parse_pairs(pairs: list[str], *, as_json: bool) -> dict:
    result = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise SystemExit(f"expected KEY=VALUE, got {pair!r}")
        try:
            result[key] = json.loads(value) if as_json else value
        except json.JSONDecodeError as exc:
            raise SystemExit(f"{key}: the value must be JSON ({exc})") from None
    return result


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--part", choices=("dev", "blind", "both"), default="both")
    parser.add_argument("--config", default="default", help="index configuration name (see CONFIGS)")
    parser.add_argument(
        "--server-env",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra server environment for this run (repeatable)",
    )
    parser.add_argument(
        "--recall-field", action="append", default=[], metavar="KEY=JSON", help="extra field in every recall body (repeatable)"
    )
    parser.add_argument("--workers", type=int, default=2, help="gunicorn workers")
    parser.add_argument("--clients", type=int, default=5, help="conversations written in parallel")
    parser.add_argument("--call-timeout", type=float, default=CALL_TIMEOUT, help="seconds per HTTP call")
    parser.add_argument("--out", help="JSON report path (default var/recall-eval/<database>-<config>.json)")
    parser.add_argument("--keep", action="store_true", help="keep the temp dir and the PostgreSQL database")
    parser.add_argument("--skip-no-answer", action="store_true", help="ask only the answerable questions")
    parser.add_argument("--skip-extra", action="store_true", help="leave out the reply and dated parts")
    args = parser.parse_args(argv)

    parts = ("dev", "blind") if args.part == "both" else (args.part,)
    try:  # refuse a changed blind set before doing anything
        data = {part: dataset.load(part) for part in parts}
        noanswer = {} if args.skip_no_answer else {part: dataset.load_noanswer(part) for part in parts}
        extra = {} if args.skip_extra else {name: found for part in parts for name, found in dataset.load_extra(part).items()}
    except dataset.BlindSetChanged as exc:
        raise SystemExit(f"refusing to report blind figures: {exc}") from None
    for part, part_data in {**data, **extra}.items():
        problems = dataset.integrity_problems(part_data)
        if problems:
            raise SystemExit(f"{part} data is unsound: {problems[:5]}")
        if not part_data["frozen"]:
            print(f"note: {part}.json differs from its frozen version ({part_data['sha256'][:12]})", flush=True)
    for part, part_noanswer in noanswer.items():
        problems = dataset.noanswer_problems(part_noanswer, data[part])
        if problems:
            raise SystemExit(f"{part} no-answer data is unsound: {problems[:5]}")
        if not part_noanswer["frozen"]:
            print(f"note: {part}-noanswer.json differs from its frozen version ({part_noanswer['sha256'][:12]})", flush=True)

    config = CONFIGS.get(args.config)
    if config is None:
        print(f"note: configuration {args.config!r} is not registered in CONFIGS; it is only a label", flush=True)
        config = {"env": {}, "recall": {}}
    after_writes = config.get("after_writes", [])
    server_env = {**config["env"], **parse_pairs(args.server_env, as_json=False)}
    recall_fields = {**config["recall"], **parse_pairs(args.recall_field, as_json=True)}

    workdir = Path(tempfile.mkdtemp(prefix="recall-eval-"))
    if args.database == "postgres":
        database_url, maintenance_url, db_name = postgres_url(os.environ.get("DATABASE_URL") or DEFAULT_POSTGRES)
        recreate_postgres(maintenance_url, db_name)
    else:
        database_url = f"sqlite:///{workdir / 'eval.sqlite3'}"
    env = server_environment(database_url, workdir / "var", server_env)
    server = None
    try:
        manage(env, "migrate", "--noinput", "-v0")
        token = (
            manage(env, "issue_agent_token", "--tenant", TENANT, "--agent", AGENT, "--purposes", PURPOSE).strip().splitlines()[-1]
        )
        server = start_server(env, workdir / "gunicorn.log", args.workers)
        server.call_timeout = args.call_timeout

        batch = has_batch_endpoint(server, token)
        conversations = [conv for part_data in (*data.values(), *extra.values()) for conv in part_data["conversations"]]
        started = time.perf_counter()
        with ThreadPoolExecutor(args.clients) as pool:
            written = list(pool.map(lambda conv: write_conversation(server, token, conv, batch), conversations))
        write_seconds = time.perf_counter() - started
        record_turns = {record: turn for ids in written for record, turn in ids.items()}
        turns = len(record_turns)
        print(f"wrote {turns} turns in {write_seconds:.1f} s ({'batch' if batch else 'single'} writes)", flush=True)
        setup = []
        for command in after_writes:
            started = time.perf_counter()
            output = manage(env, *command).strip().splitlines()
            setup.append(
                {
                    "command": " ".join(command),
                    "seconds": round(time.perf_counter() - started, 1),
                    "output": output[-1] if output else "",
                }
            )
            print(f"manage.py {' '.join(command)}: {setup[-1]['seconds']} s", flush=True)

        report = {
            "run_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "command": "python -m bench.recall_eval.run " + " ".join(argv if argv is not None else sys.argv[1:]),
            "database": args.database,
            "config": args.config,
            "server_env": server_env,
            "recall_fields": recall_fields,
            "revision": git_revision(),
            "workers": args.workers,
            "writes": {"turns": turns, "seconds": round(write_seconds, 2), "mode": "batch" if batch else "single"},
            "setup": setup,
            "parts": {part: evaluate_part(server, token, data[part], record_turns, recall_fields) for part in parts},
        }
        # the extra parts after the others, so those run exactly as they did before these existed
        for name, part_data in extra.items():
            report["parts"][name] = evaluate_part(server, token, part_data, record_turns, recall_fields)
        # after every answerable question, so those run exactly as they did before this part existed
        report["noanswer"] = {
            part: evaluate_noanswer(server, token, noanswer[part], record_turns, recall_fields) for part in noanswer
        }
    finally:
        if server is not None:
            server.stop()
        if args.database == "postgres" and not args.keep:
            from django.db import connections

            connections.close_all()
            recreate_postgres(maintenance_url, db_name, drop_only=True)

    table = markdown_table(report)
    print(f"\nrecall evaluation — database {args.database}, configuration {args.config}, revision {report['revision']}\n")
    print(table)
    extra_tables = {}
    if report["noanswer"]:
        extra_tables["noanswer_table"] = noanswer_table(report)
        print("\nno-answer questions (the right answer is nothing):\n")
        print(extra_tables["noanswer_table"])
    for part, result in report["parts"].items():
        latency = result["recall_latency_ms"]
        print(f"\n{part}: recall latency p50 {latency['p50']:.1f} ms, p95 {latency['p95']:.1f} ms")
    out = Path(args.out) if args.out else ROOT / "var" / "recall-eval" / f"{args.database}-{args.config}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({**report, "table": table, **extra_tables}, indent=1) + "\n")
    print(f"\nreport: {out}")
    if args.keep:
        print(f"kept {workdir}" + (f" and database {db_name}" if args.database == "postgres" else ""))
    else:
        import shutil

        shutil.rmtree(workdir, ignore_errors=True)
    return report


if __name__ == "__main__":
    main()
