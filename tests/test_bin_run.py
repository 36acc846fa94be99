"""`bin/run` starts quietly, its beat runs the jobs from the database schedule, and Ctrl-C stops web,
worker and beat cleanly; the launcher's own stop rules on small Procfiles."""

import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from tests.demo_run import DemoRun
from tests.processes import ROOT, wait_for

NOISE = ["Traceback", "SIGKILL", "killing it", "No hostname was supplied", "InformationOnly", "Editable install",
         "exited with 'signal", "WorkerLostError", "ERROR"]


@pytest.mark.worker
def test_bin_run_starts_without_noise_runs_beat_from_the_database_and_stops_cleanly_on_ctrl_c(tmp_path):
    demo = DemoRun(tmp_path, JOB_EXPIRE_INTERVAL="1")  # set in beat's environment: pins the expire job to 1 s
    try:
        demo.start()
        database = sqlite3.connect(tmp_path / "var" / "db.sqlite3", timeout=10)

        def beat_ran() -> bool:
            return database.execute("SELECT count(*) FROM governance_jobrun WHERE job = 'expire' AND trigger = 'beat' "
                                    "AND status = 'succeeded'").fetchone()[0] >= 2

        wait_for(beat_ran, timeout=60, interval=0.5, what="beat's database schedule to run expire twice")
        every, enabled = database.execute(
            "SELECT i.every, t.enabled FROM django_celery_beat_periodictask t "
            "JOIN django_celery_beat_intervalschedule i ON i.id = t.interval_id WHERE t.name = 'job-expire'").fetchone()
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
    output = demo.output()
    assert status == 0, output[-6000:]
    for name in ("web", "worker", "beat"):
        assert f"{name} stopped (exit status 0)" in output, output[-6000:]
    found = [noise for noise in NOISE if noise in output]
    assert not found, f"{found} in:\n{output[-8000:]}"


def launch(tmp_path, procfile: str, stop_timeout: str = "10") -> subprocess.Popen:
    (tmp_path / "Procfile").write_text(procfile)
    return subprocess.Popen([sys.executable, str(ROOT / "bin" / "procfile.py"), str(tmp_path / "Procfile")],
                            cwd=tmp_path, env={**os.environ, "PROCFILE_STOP_TIMEOUT": stop_timeout},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)


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
STUBBORN = (f"{sys.executable} -c \"import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
            "print('up', flush=True); time.sleep(60)\"")


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


def test_a_process_that_exits_by_itself_stops_the_others(tmp_path):
    process = launch(tmp_path, "short: echo done\nlong: sleep 60\n")
    output = process.communicate(timeout=30)[0]
    assert "short stopped (exit status 0)" in output and "long stopped" in output
    assert process.returncode == 1


def test_a_closed_terminal_stops_every_process(tmp_path):
    process = launch(tmp_path, f"one: sleep 60\ntwo: {sys.executable} -c \"print('up', flush=True); import time; time.sleep(60)\"\n")
    seen = wait_until_printed(process, "up")
    children = [int(pid) for pid in re.findall(r"started \(pid (\d+)\)", seen)]
    assert len(children) == 2, seen
    os.kill(process.pid, signal.SIGHUP)  # what the terminal sends the launcher when it closes
    output = process.communicate(timeout=30)[0]
    assert "SIGHUP received" in output and "one stopped" in output and "two stopped" in output, output
    for pid in children:
        wait_for(lambda pid=pid: not os.path.exists(f"/proc/{pid}") or "Z" in open(f"/proc/{pid}/stat").read().split()[2],
                 timeout=10, interval=0.1, what=f"process {pid} to end")


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
