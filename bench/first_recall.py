"""The first recall after a web process starts, and what each web process holds in memory, with the
semantic index serving: gunicorn started as `bin/run` starts it (the Procfile's `web` line, so
config/gunicorn.py and its worker count), on the demo's data with the semantic index built the way
`bin/run` builds it (`ensure_semantic_index`, then build, gates, promotion).

    .venv/bin/python -m bench.first_recall                  # SQLite in a temporary folder, 3 starts
    .venv/bin/python -m bench.first_recall --lazy           # SEMANTIC_LOAD_AT_START=false, to compare
    .venv/bin/python -m bench.first_recall --database postgres://postgres@127.0.0.1:5432/gm_first_recall

Each start waits until every worker has said it is ready (config/gunicorn.py's `post_worker_init`
line, after the model's first run), then times the first hybrid recall through HTTP (the floor:
under 1 s) and the next few, each with a query not asked before (the query's embedding is
cached per process). Then it reads each process's memory from /proc (RSS; PSS, which splits
shared pages between the processes sharing them; USS, its private pages). With --lazy nothing is
loaded at start and the first recall in each worker loads the model. Prints one JSON object.
"""

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from bench.run import PY, ROOT, free_port, post_json

QUESTIONS = [
    "how does acme want to be contacted",
    "what does the customer like to receive",
    "who should hear about outages first",
    "which channel for routine updates",
    "anything about invoices or billing",
]
FIRST_RECALL_FLOOR_SECONDS = 1.0
SETUP = """
from memory.search.build import build_and_promote, ensure_semantic_index
from memory.search.semantic import serving_report
index = ensure_semantic_index(actor="bench")
if index is not None:
    build_and_promote(index.pk, actor="bench")
print(serving_report()["serving"])
"""


def environment(var_dir: Path, database: str | None, port: int, lazy: bool) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL", "PROMETHEUS_MULTIPROC_DIR"}}
    env.update(APP_VAR_DIR=str(var_dir), APP_PORT=str(port), DEBUG="false", LOG_LEVEL="WARNING")
    env.update(API_THROTTLE_RATE="1000000/min", SEMANTIC_LOAD_AT_START="false" if lazy else "true")
    if database:
        env["DATABASE_URL"] = database
    return env


def manage(env: dict[str, str], *args: str) -> str:
    return subprocess.run([PY, "manage.py", *args], cwd=ROOT, env=env, check=True, capture_output=True, text=True).stdout


def prepare(env: dict[str, str], port: int) -> str:
    """Migrate, seed the demo, build the semantic index as bin/run does; returns the agent token."""
    manage(env, "migrate", "--noinput", "-v0")
    seeded = manage(env, "seed_demo", "--base-url", f"http://127.0.0.1:{port}")
    token = re.search(r"TOKEN=(\S+)", seeded)
    if token is None:
        raise SystemExit("seed_demo printed no agent token")
    serving = manage(env, "shell", "-v0", "-c", SETUP).strip().splitlines()[-1]
    if serving != "hybrid":
        raise SystemExit(f"recall is {serving} after the build: is the semantic extra installed?")
    return token.group(1)


def web_command() -> tuple[str, int]:
    """The Procfile's `web` command and its worker count."""
    line = next(line for line in (ROOT / "Procfile").read_text().splitlines() if line.startswith("web:"))
    command = line.split(":", 1)[1].strip()
    workers = re.search(r"--workers\s+(\d+)", command)
    return command, int(workers.group(1)) if workers else 1


def memory_of(pid: int) -> dict[str, int]:
    """MB of RSS, PSS and USS (private pages) of one process."""
    fields: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:]:
        name, value = line.split(":", 1)
        fields[name] = int(value.split()[0])
    return {
        "rss_mb": fields["Rss"] // 1024,
        "pss_mb": fields["Pss"] // 1024,
        "uss_mb": (fields["Private_Clean"] + fields["Private_Dirty"]) // 1024,
    }


def children_of(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(child) for child in (task / "children").read_text().split()]
    return found


def one_start(env: dict[str, str], token: str, log: Path) -> dict:
    command, workers = web_command()
    started = time.monotonic()
    with log.open("w") as out:
        server = subprocess.Popen(
            ["/bin/sh", "-c", f"exec {command}"], cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        ready_line = re.compile(r"Worker \d+ ready; semantic model (.+)")
        deadline = time.monotonic() + 180
        while len(ready_line.findall(log.read_text())) < workers:
            if server.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"gunicorn did not get ready:\n{log.read_text()[-3000:]}")
            time.sleep(0.05)
        ready = time.monotonic() - started
        url = f"http://127.0.0.1:{env['APP_PORT']}/api/v1/recall/"
        recalls = []
        for question in QUESTIONS:
            # min_relevance 0: every item comes back, so each response shows whether it was fused
            asked = {"query": question, "purpose": "support", "subject": "customer/acme", "min_relevance": 0}
            status, body, seconds = post_json(url, token, asked)
            hybrid = status == 200 and bool(body.get("items")) and "semantic" in body["items"][0]["score_parts"]
            recalls.append({"seconds": round(seconds, 3), "status": status, "hybrid": hybrid})
        processes = {"master": memory_of(server.pid)}
        for n, child in enumerate(sorted(children_of(server.pid))):
            processes[f"worker {n + 1}"] = memory_of(child)
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
    return {
        "ready_seconds": round(ready, 1),
        "worker_lines": ready_line.findall(log.read_text()),
        "first_recall_seconds": recalls[0]["seconds"],
        "recalls": recalls,
        "memory": processes,
        "web_pss_total_mb": sum(p["pss_mb"] for p in processes.values()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--starts", type=int, default=3, help="server starts to time (default 3)")
    parser.add_argument("--lazy", action="store_true", help="SEMANTIC_LOAD_AT_START=false: the model loads with a recall")
    parser.add_argument("--database", help="a DATABASE_URL to use (default: SQLite in a temporary folder)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = parser.parse_args()
    var_dir = Path(tempfile.mkdtemp(prefix="gm-first-recall-"))
    try:
        port = free_port()
        env = environment(var_dir, args.database, port, args.lazy)
        token = prepare(env, port)
        starts = [one_start(env, token, var_dir / f"gunicorn-{n}.log") for n in range(args.starts)]
        firsts = [start["first_recall_seconds"] for start in starts]
        report = {
            "command": web_command()[0],
            "load_at_start": not args.lazy,
            "database": "postgresql" if args.database else "sqlite",
            "first_recall_seconds_max": max(firsts),
            "floor_seconds": FIRST_RECALL_FLOOR_SECONDS,
            "under_floor": max(firsts) < FIRST_RECALL_FLOOR_SECONDS,
            "all_hybrid": all(r["hybrid"] for start in starts for r in start["recalls"]),
            "starts": starts,
        }
        print(json.dumps(report, indent=2))
    finally:
        if args.keep:
            print(f"kept {var_dir}")
        else:
            shutil.rmtree(var_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
