"""`bin/render-units`: the systemd units of a deployment pass `systemd-analyze verify` (every
command they start exists, every directive is known), each host's target wants what it was told
to run, and the web unit's own command line serves /health/live/ and /health/ready/ here."""

import configparser
import shlex
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest
from django.conf import settings

from tests.processes import ROOT, database_url_for_subprocesses, free_port

RENDER = ROOT / "bin" / "render-units"


def render(out, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(RENDER), "--out", str(out), "--root", str(ROOT), "--venv", str(ROOT / ".venv"), *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def read_unit(path) -> configparser.RawConfigParser:
    unit = configparser.RawConfigParser(strict=False, interpolation=None)  # systemd repeats keys (ExecStart)
    unit.optionxform = str
    unit.read(path)
    return unit


def test_the_units_verify_and_each_target_wants_what_its_host_runs(tmp_path):
    web_host, beat_host = tmp_path / "web", tmp_path / "beat"
    assert render(web_host, "--web", "8000,8001").returncode == 0
    assert render(beat_host, "--workers", "w1,w2", "--beat").returncode == 0
    for out, instances in ((web_host, {"web@8000", "web@8001"}), (beat_host, {"worker@w1", "worker@w2", "beat"})):
        wants = set(read_unit(out / "governed-memory.target")["Unit"]["Wants"].split())
        assert wants == {"governed-memory-migrate.service", *(f"governed-memory-{i}.service" for i in instances)}
        for template in out.glob("*@.service"):  # systemd-analyze verifies instances, not templates
            (out / template.name.replace("@.", "@example.")).write_text(template.read_text())
        units = sorted(str(p) for p in out.iterdir() if "@." not in p.name)
        verified = subprocess.run(["systemd-analyze", "verify", *units], capture_output=True, text=True, cwd=out, timeout=60)
        assert verified.returncode == 0, verified.stderr
        assert "is not executable" not in verified.stderr and "Unknown key" not in verified.stderr, verified.stderr
    worker = read_unit(beat_host / "governed-memory-worker@.service")["Service"]
    assert worker["ExecStart"].endswith("-n %i@%H") and int(worker["TimeoutStopSec"]) > settings.CELERY_TASK_TIME_LIMIT


def test_a_broken_unit_fails_verification(tmp_path):
    # the check above can fail: a command that does not exist is caught
    assert render(tmp_path, "--beat").returncode == 0
    beat = tmp_path / "governed-memory-beat.service"
    beat.write_text(beat.read_text().replace(str(ROOT / ".venv"), "/nonexistent/venv"))
    verified = subprocess.run(["systemd-analyze", "verify", str(beat)], capture_output=True, text=True, timeout=60)
    assert verified.returncode != 0 and "is not executable" in verified.stderr


def test_bad_arguments_are_refused_and_write_nothing(tmp_path):
    for args, message in (
        ((), "say what this host runs"),
        (("--web", "80x"), "--web takes port numbers"),
        (("--web", "70000"), "between 1 and 65535"),
        (("--workers", "w 1"), "--workers names"),
    ):
        done = render(tmp_path / "out", *args)
        assert done.returncode == 2 and message in done.stderr, done.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.django_db(transaction=True)
def test_the_web_units_command_serves_the_probes(tmp_path):
    assert render(tmp_path, "--web", "8000").returncode == 0
    exec_start = read_unit(tmp_path / "governed-memory-web@.service")["Service"]["ExecStart"]
    port = free_port()
    command = shlex.split(exec_start.replace("%i", str(port)).replace("0.0.0.0:", "127.0.0.1:"))
    env = {
        "PATH": "/usr/bin:/bin",
        "DATABASE_URL": database_url_for_subprocesses(),
        "APP_VAR_DIR": str(tmp_path / "var"),
        "SEMANTIC_LOAD_AT_START": "false",
    }
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline, answered = time.monotonic() + 60, None
        while time.monotonic() < deadline and answered is None:
            assert process.poll() is None, process.stdout.read()[-3000:]
            try:
                answered = urllib.request.urlopen(f"http://127.0.0.1:{port}/health/live/", timeout=2).status
            except (urllib.error.URLError, OSError):
                time.sleep(0.2)
        assert answered == 200
        assert urllib.request.urlopen(f"http://127.0.0.1:{port}/health/ready/", timeout=10).status == 200
    finally:
        process.terminate()
        process.wait(timeout=30)
