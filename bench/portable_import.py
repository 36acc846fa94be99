"""Import of 1,000 Markdown notes plus 10 malformed ones, through `manage.py import_memories` as a
person would run it, in a fresh database; then the same files again. Checks that the first run
writes 1,000 records and reports the 10 malformed files one by one, that the second writes nothing,
and prints both durations.

    .venv/bin/python -m bench.portable_import                  # a fresh SQLite file under a temp dir
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/gm_import_bench .venv/bin/python -m bench.portable_import
        # PostgreSQL: the database is dropped and created again first
"""

import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from urllib.parse import urlparse

import yaml

ROOT = Path(__file__).resolve().parent.parent
NOTES = 1000


def note(i: int, **meta) -> bytes:
    fields = {
        "id": str(uuid.uuid4()),
        "kind": "preference",
        "subject": f"customer/c{i % 50}",
        "purpose": "support",
        "authority": "user",
        "confidence": 0.8,
        "provenance": {"source_type": "user_turn", "session_id": f"s-{i}", "turn_id": str(i)},
        **meta,
    }
    return ("---\n" + yaml.safe_dump(fields, sort_keys=False) + "---\n" + f"Note number {i} of the bulk import.\n").encode()


MALFORMED = {
    "no-front-matter.md": b"Just a note.\n",
    "unclosed.md": b"---\nid: 1b0b6a1e-0000-4000-8000-000000000001\nkind: preference\n",
    "bad-yaml.md": b"---\nid: [unclosed\n---\nBody.\n",
    "list.md": b"---\n- a\n---\nBody.\n",
    "no-id.md": b"---\nkind: preference\n---\nBody.\n",
    "latin1.md": "---\nid: 1b0b6a1e-0000-4000-8000-000000000002\n---\ncaf\u00e9\n".encode("latin-1"),
    "unknown-kind.md": note(9001, kind="gossip"),
    "confidence.md": note(9002, confidence=7),
    "edited.md": note(9003, content_hash="sha256:" + "0" * 64),
    "orphan-summary.md": note(
        9004, authority="agent", derived_from=[str(uuid.uuid4())], provenance={"source_type": "agent_inference"}
    ),
}


def manage(env: dict, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, check=check)


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="gm-import-bench-"))
    env = {**os.environ, "APP_VAR_DIR": str(work / "var")}
    url = os.environ.get("DATABASE_URL")
    if url:
        name = urlparse(url).path.lstrip("/")
        admin = {**env, "PGPASSWORD": urlparse(url).password or ""}
        host, port, user = (
            urlparse(url).hostname or "127.0.0.1",
            str(urlparse(url).port or 5432),
            urlparse(url).username or "postgres",
        )
        subprocess.run(["dropdb", "--if-exists", "-h", host, "-p", port, "-U", user, name], env=admin, check=True)
        subprocess.run(["createdb", "-h", host, "-p", port, "-U", user, name], env=admin, check=True)
    manage(env, "migrate", "-v0")
    notes = work / "notes"
    (notes / "customers").mkdir(parents=True)
    (notes / "bad").mkdir()
    for i in range(NOTES):
        (notes / "customers" / f"note-{i:04d}.md").write_bytes(note(i))
    for name, data in MALFORMED.items():
        (notes / "bad" / name).write_bytes(data)

    runs = []
    for attempt in ("first", "second"):
        started = time.monotonic()
        done = manage(env, "import_memories", str(notes), "--tenant", "bench", "--agent", "importer", "--trusted", check=False)
        seconds = time.monotonic() - started
        lines = done.stdout.strip().splitlines()
        counts = json.loads(lines[-1])
        errors = sorted(line.split()[1].rstrip(":") for line in lines if line.startswith("error"))
        runs.append((attempt, seconds, counts))
        assert done.returncode == 1 and errors == sorted(f"bad/{name}" for name in MALFORMED), errors
        expected = (NOTES, 0) if attempt == "first" else (0, NOTES)
        assert (counts["imported"], counts["already_imported"], counts["error"]) == (*expected, len(MALFORMED)), counts
    vendor = "postgresql" if url else "sqlite"
    for attempt, seconds, counts in runs:
        print(
            f"{vendor}: {attempt} import of {NOTES} notes + {len(MALFORMED)} malformed: {seconds:.2f} s "
            f"(imported {counts['imported']}, already imported {counts['already_imported']}, errors {counts['error']})"
        )


if __name__ == "__main__":
    main()
