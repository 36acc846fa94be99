"""`bin/run` starts quietly, its beat runs the jobs from the database schedule, and Ctrl-C stops web,
worker and beat cleanly; a restart keeps the demo and its tokens, `--reset` starts a fresh one; the
launcher's own stop rules on small Procfiles."""

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.demo_run import DemoRun
from tests.processes import ROOT, wait_for

# The lexical demo, for the tests of starting, stopping and restarting: the semantic extra's demo (its
# index built at the first start, its model loaded in every process) is tests/test_readme_examples.py's,
# and loading the model in three processes at each start would make these tests minutes longer.
LEXICAL = {"SEMANTIC_AUTO_INDEX": "false", "SEMANTIC_LOAD_AT_START": "false"}

NOISE = [
    "Traceback",
    "SIGKILL",
    "killing it",
    "No hostname was supplied",
    "InformationOnly",
    "Editable install",
    "exited with 'signal",
    "WorkerLostError",
    "ERROR",
]


@pytest.mark.worker
def test_bin_run_starts_without_noise_runs_beat_from_the_database_and_stops_cleanly_on_ctrl_c(tmp_path):
    demo = DemoRun(tmp_path, JOB_EXPIRE_INTERVAL="1", **LEXICAL)  # JOB_EXPIRE_INTERVAL, in beat's environment, pins expire to 1 s
    try:
        demo.start()
        database = sqlite3.connect(tmp_path / "var" / "db.sqlite3", timeout=10)

        def beat_ran() -> bool:
            return (
                database.execute(
                    "SELECT count(*) FROM governance_jobrun WHERE job = 'expire' AND trigger = 'beat' AND status = 'succeeded'"
                ).fetchone()[0]
                >= 2
            )

        wait_for(beat_ran, timeout=60, interval=0.5, what="beat's database schedule to run expire twice")
        every, enabled = database.execute(
            "SELECT i.every, t.enabled FROM django_celery_beat_periodictask t "
            "JOIN django_celery_beat_intervalschedule i ON i.id = t.interval_id WHERE t.name = 'job-expire'"
        ).fetchone()
        assert (every, enabled) == (1, 1)
        database.close()
        # The demo shows the project's own pages, never Django's debug ones (DEBUG is off in bin/run).
        with pytest.raises(urllib.error.HTTPError) as missing:
            urllib.request.urlopen(f"{demo.base}/review/no-such-page/", timeout=10)
        page = missing.value.read().decode()
        assert missing.value.code == 404 and "There is nothing here" in page and "URLconf" not in page
        with urllib.request.urlopen(f"{demo.base}/static/review/review.css", timeout=10) as css:
            assert css.status == 200
        status = demo.interrupt()
    finally:
        demo.kill()
    assert_stopped_cleanly(status, demo.output())


def assert_stopped_cleanly(status: int, output: str) -> None:
    """`bin/run` exited 0 after Ctrl-C, each of its processes stopped with status 0, and its
    output holds none of the NOISE a broken stop leaves."""
    assert status == 0, output[-6000:]
    for name in ("web", "worker", "beat"):
        assert f"{name} stopped (exit status 0)" in output, output[-6000:]
    found = [noise for noise in NOISE if noise in output]
    assert not found, f"{found} in:\n{output[-8000:]}"


def call(
    demo: DemoRun, method: str, path: str, token: str, body: dict | None = None, headers: dict | None = None
) -> tuple[int, dict, dict]:
    """(status, JSON body, headers) of one API call to the demo."""
    request = urllib.request.Request(
        demo.exports["API"] + path,
        method=method,
        data=json.dumps(body).encode() if body is not None else None,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json", **(headers or {})},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.load(response), dict(response.headers)
    except urllib.error.HTTPError as error:
        return error.code, json.load(error), dict(error.headers)


NOTE = {
    "kind": "preference",
    "subject": "customer/acme",
    "purpose": "support",
    "content": "Wants invoices by post.",
    "authority": "user",
    "confidence": 0.9,
    "provenance": {"source_type": "user_turn", "session_id": "s-restart"},
}


@pytest.mark.worker
def test_a_restart_keeps_the_demo_and_prints_the_same_tokens_and_reset_starts_a_fresh_demo(tmp_path):
    demo = DemoRun(tmp_path, **LEXICAL)
    try:
        demo.start()
        first = dict(demo.exports)
        status, written, _ = call(demo, "POST", "/memories/", first["TOKEN"], NOTE, {"Idempotency-Key": "restart-1"})
        assert status == 201 and written["status"] == "active"
        assert demo.interrupt() == 0, demo.output()[-6000:]

        # A restart prints the same export line, so an example's Idempotency-Key (kept per token)
        # finds its first write instead of writing a duplicate.
        demo.start()
        assert demo.exports == first, demo.output()[-3000:]
        status, again, headers = call(demo, "POST", "/memories/", first["TOKEN"], NOTE, {"Idempotency-Key": "restart-1"})
        assert (status, again["id"], headers.get("Idempotent-Replayed")) == (201, written["id"], "true")
        status, page, _ = call(demo, "GET", "/memories/?status=active&subject=customer/acme&page_size=100", first["REVIEWER"])
        assert status == 200 and [r["content"] for r in page["results"]].count(NOTE["content"]) == 1
        assert demo.interrupt() == 0, demo.output()[-6000:]

        # --reset: a fresh database with new tokens; the old ones are unknown there.
        demo.start("--reset")
        assert "Resetting the demo" in demo.output()
        fresh = demo.exports
        assert fresh["TOKEN"] != first["TOKEN"] and fresh["REVIEWER"] != first["REVIEWER"]
        assert call(demo, "GET", "/memories/", first["TOKEN"])[0] == 401
        assert call(demo, "GET", f"/memories/{written['id']}/", fresh["REVIEWER"])[0] == 404
        status, page, _ = call(demo, "GET", "/memories/?subject=customer/acme&page_size=100", fresh["TOKEN"])
        assert status == 200 and page["count"] > 0 and NOTE["content"] not in {r["content"] for r in page["results"]}
        assert demo.interrupt() == 0, demo.output()[-6000:]
    finally:
        demo.kill()


def test_bin_run_refuses_an_unknown_argument_and_a_reset_of_a_database_it_does_not_own(tmp_path):
    env = {**os.environ, "APP_VAR_DIR": str(tmp_path / "var"), "BIN_RUN_SKIP_INSTALL": "1"}
    (tmp_path / "var").mkdir()
    (tmp_path / "var" / "db.sqlite3").write_text("kept")
    unknown = subprocess.run([str(ROOT / "bin" / "run"), "--rest"], env=env, capture_output=True, text=True, timeout=30)
    assert unknown.returncode == 2 and "usage: bin/run [--reset]" in unknown.stderr
    env["DATABASE_URL"] = "postgres://postgres@127.0.0.1:5432/not_the_demo"
    other = subprocess.run([str(ROOT / "bin" / "run"), "--reset"], env=env, capture_output=True, text=True, timeout=30)
    assert other.returncode == 2 and "drop and recreate that database yourself" in other.stderr
    assert (tmp_path / "var" / "db.sqlite3").read_text() == "kept"


def launch(tmp_path, procfile: str, stop_timeout: str = "10") -> subprocess.Popen:
    (tmp_path / "Procfile").write_text(procfile)
    return subprocess.Popen(
        [sys.executable, str(ROOT / "bin" / "procfile.py"), str(tmp_path / "Procfile")],
        cwd=tmp_path,
        env={**os.environ, "PROCFILE_STOP_TIMEOUT": stop_timeout},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def wait_until_printed(process: subprocess.Popen, text: str, count: int = 1) -> str:
    seen = ""
    while seen.count(text) < count:
        line = process.stdout.readline()
        assert line, f"exited before printing {text!r}:\n{seen}"
        seen += line
    return seen


# A main process with a child in its process group, like Celery's worker and its pool: on SIGTERM the
# main process tells its child to stop (SIGUSR1) and exits with the child's status; a child that
# receives SIGTERM itself (as from a signal to the whole group) says so and exits 9.
PARENT_AND_CHILD = """
import os, signal, sys, time
# The child's handlers are set before the fork: on a loaded machine the parent can print "up" and
# be told to stop before the child first runs, and SIGUSR1's default action would kill it (-10).
signal.signal(signal.SIGTERM, lambda *a: (print("child got SIGTERM", flush=True), os._exit(9)))
signal.signal(signal.SIGUSR1, lambda *a: os._exit(0))
# The child says it runs before the parent says "up": a signal that reaches a child still inside
# fork() is dropped when Python clears the pending signals of the new process.
ready_read, ready_write = os.pipe()
pid = os.fork()
if pid == 0:
    os.write(ready_write, b"x")
    while True:
        time.sleep(1)
os.read(ready_read, 1)
def stop(*args):
    os.kill(pid, signal.SIGUSR1)
    sys.exit(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
signal.signal(signal.SIGTERM, stop)
print("up", flush=True)
while True:
    time.sleep(1)
"""


def test_ctrl_c_reaches_each_main_process_not_its_children(tmp_path):
    (tmp_path / "parent.py").write_text(PARENT_AND_CHILD)
    process = launch(tmp_path, f"main: {sys.executable} {tmp_path / 'parent.py'}\n")
    wait_until_printed(process, "up")
    os.killpg(process.pid, signal.SIGINT)  # Ctrl-C: the terminal signals the launcher's group only
    output = process.communicate(timeout=30)[0]
    assert "SIGINT received" in output and "child got SIGTERM" not in output, output
    assert "main stopped (exit status 0)" in output and process.returncode == 0, output


# A process that ignores SIGTERM and says when it is up.
STUBBORN = (
    f'{sys.executable} -c "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); '
    "print('up', flush=True); time.sleep(60)\""
)


def test_a_process_that_ignores_sigterm_is_killed_after_the_stop_timeout_and_said_so(tmp_path):
    process = launch(tmp_path, f"polite: sleep 60\nstubborn: {STUBBORN}\n", stop_timeout="1")
    wait_until_printed(process, "up")
    started = time.monotonic()
    os.killpg(process.pid, signal.SIGINT)
    output = process.communicate(timeout=30)[0]
    assert time.monotonic() - started < 10
    assert "stubborn did not stop within 1 s: killing it" in output
    assert "polite stopped (exit status -15)" in output  # sleep has no handler: SIGTERM ends it
    assert process.returncode == 1


UP = "print('up', flush=True); time.sleep(60)"


@pytest.mark.parametrize(
    ("procfile", "said", "status"),
    [
        # a Celery worker stopped while it is still importing has no handler yet: SIGTERM ends it
        (f'starting: sleep 60\nready: {sys.executable} -c "import time; {UP}"\n', "starting stopped (exit status -15)", 0),
        (
            f'failing: {sys.executable} -c "import signal, sys, time; signal.signal(signal.SIGTERM, lambda *a: sys.exit(3)); {UP}"\n',
            "failing stopped (exit status 3)",
            1,
        ),
    ],
    ids=["ended-by-its-sigterm-is-clean", "failing-while-stopping-is-unclean"],
)
def test_how_a_process_ends_after_ctrl_c_decides_the_exit_status(tmp_path, procfile, said, status):
    process = launch(tmp_path, procfile)
    wait_until_printed(process, "up")
    os.killpg(process.pid, signal.SIGINT)
    output = process.communicate(timeout=30)[0]
    assert said in output
    assert process.returncode == status, output


def test_a_process_that_exits_by_itself_stops_the_others(tmp_path):
    process = launch(tmp_path, "short: echo done\nlong: sleep 60\n")
    output = process.communicate(timeout=30)[0]
    assert "short stopped (exit status 0)" in output and "long stopped" in output
    assert process.returncode == 1


def test_a_closed_terminal_stops_every_process(tmp_path):
    process = launch(
        tmp_path, f"one: sleep 60\ntwo: {sys.executable} -c \"print('up', flush=True); import time; time.sleep(60)\"\n"
    )
    # "two | up" can come before the launcher's own "two started" line: wait for both starts too
    seen = wait_until_printed(process, "up")
    while len(re.findall(r"started \(pid (\d+)\)", seen)) < 2:
        seen += wait_until_printed(process, "started (pid")
    children = [int(pid) for pid in re.findall(r"started \(pid (\d+)\)", seen)]
    assert len(children) == 2, seen
    os.kill(process.pid, signal.SIGHUP)  # what the terminal sends the launcher when it closes
    output = process.communicate(timeout=30)[0]
    assert "SIGHUP received" in output and "one stopped" in output and "two stopped" in output, output
    for pid in children:
        wait_for(
            lambda pid=pid: not os.path.exists(f"/proc/{pid}") or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2],
            timeout=10,
            interval=0.1,
            what=f"process {pid} to end",
        )


def test_a_second_ctrl_c_kills_what_is_left_at_once(tmp_path):
    process = launch(tmp_path, f"stubborn: {STUBBORN}\n", stop_timeout="60")
    wait_until_printed(process, "up")
    started = time.monotonic()
    os.killpg(process.pid, signal.SIGINT)
    wait_until_printed(process, "SIGINT received")
    os.killpg(process.pid, signal.SIGINT)
    output = process.communicate(timeout=30)[0]
    assert time.monotonic() - started < 15 and "stubborn killing it" in output, output
    assert process.returncode == 1
