"""`bin/run` itself as a test fixture: the demo exactly as a new user starts it (embedded defaults:
SQLite and the filesystem broker, in a private var folder and on a free port), with the venv as it
is (BIN_RUN_SKIP_INSTALL=1), stopped the way Ctrl-C stops it (SIGINT to its process group), and
started again on the same folder and port as a user restarts it (each start with a log of its own)."""

import contextlib
import os
import re
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

from tests.processes import ROOT, free_port

EXPORT_LINE = re.compile(r"export (API=\S+ TOKEN=\S+ REVIEWER=\S+)")


class DemoRun:
    def __init__(self, directory: Path, **env: str):
        self.directory = directory
        self.port = free_port()
        self.starts = 0
        self.log_path = directory / "bin-run.log"
        self.env = {
            **{
                key: value
                for key, value in os.environ.items()
                if key not in {"DATABASE_URL", "REDIS_URL", "PROMETHEUS_MULTIPROC_DIR", "DJANGO_SETTINGS_MODULE"}
                and not key.startswith(("JOB_", "PYTEST_", "CELERY_"))
            },
            "APP_VAR_DIR": str(directory / "var"),
            "APP_PORT": str(self.port),
            "BIN_RUN_SKIP_INSTALL": "1",
            "PROMETHEUS_MULTIPROC_DIR": str(directory / "var" / "prometheus"),
            "PROCFILE_STOP_TIMEOUT": "60",
            **env,
        }
        self.process: subprocess.Popen | None = None
        self.base = f"http://127.0.0.1:{self.port}"
        self.exports: dict[str, str] = {}

    def output(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def start(self, *args: str, timeout: float = 240) -> None:
        """Start `bin/run` (with `args`, e.g. "--reset"), and wait until it is up and printed its exports."""
        self.starts += 1
        self.log_path = self.directory / ("bin-run.log" if self.starts == 1 else f"bin-run-{self.starts}.log")
        self.exports = {}
        self.process = subprocess.Popen(
            [str(ROOT / "bin" / "run"), *args],
            cwd=ROOT,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=self.log_path.open("wb"),
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, as a terminal's foreground job
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.process.poll() is None, f"bin/run exited early:\n{self.output()[-6000:]}"
            text = self.output()
            if (match := EXPORT_LINE.search(text)) and "worker | " in text and " ready." in text and self.answers():
                self.exports = dict(pair.split("=", 1) for pair in match.group(1).split())
                return
            time.sleep(0.5)
        raise AssertionError(f"bin/run did not come up within {timeout} s:\n{self.output()[-6000:]}")

    def answers(self) -> bool:
        try:
            urllib.request.urlopen(f"{self.base}/health/", timeout=2)
        except urllib.error.HTTPError:
            return True  # up, whatever it says of itself
        except OSError:
            return False
        return True

    def interrupt(self, timeout: float = 90) -> int:
        """Ctrl-C: SIGINT to the whole foreground process group; returns bin/run's exit status."""
        os.killpg(self.process.pid, signal.SIGINT)
        try:
            return self.process.wait(timeout=timeout)
        finally:
            self.kill()

    def kill(self) -> None:
        """After a failed stop (or none): kill bin/run and every process it started."""
        if not self.process or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)
        # The launcher starts each process in a session of its own and names its pid: none may
        # outlive the test, even if the launcher itself was killed.
        for pid in re.findall(r"system \| \w+ started \(pid (\d+)\)", self.output()):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(int(pid), signal.SIGKILL)
