"""Real processes for tests, against the test database (passed through DATABASE_URL): a gunicorn
server, and Celery `worker|beat|call` as subprocesses with a private APP_VAR_DIR (filesystem broker folders, beat
schedule file) and a private queue name, so tests never see each other's messages in a shared
Redis. The broker is Redis when REDIS_URL is set (CI), else the filesystem broker."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TypeVar
from urllib.parse import quote

from django.conf import settings
from django.db import connection

ROOT = Path(__file__).resolve().parents[1]
T = TypeVar("T")


def database_url_for_subprocesses() -> str:
    """A DATABASE_URL naming the database this test runs against (pytest-django's test database)."""
    params = connection.settings_dict
    if connection.vendor == "postgresql":
        auth = quote(params["USER"] or "", safe="")
        if params.get("PASSWORD"):
            auth += ":" + quote(params["PASSWORD"], safe="")
        return f"postgres://{auth}@{params['HOST'] or '127.0.0.1'}:{params['PORT'] or 5432}/{params['NAME']}"
    return f"sqlite:///{params['NAME']}"


def wait_for(predicate: Callable[[], T], *, timeout: float, interval: float = 0.1, what: str = "condition") -> T:
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"Timed out after {timeout} s waiting for {what}.")
        time.sleep(interval)


class CeleryStack:
    def __init__(self, directory: Path):
        self.directory = directory
        self.queue = f"test-{uuid.uuid4().hex[:12]}"
        self.processes: list[tuple[subprocess.Popen, Path]] = []
        self.env = {
            **{k: v for k, v in os.environ.items() if k != "PROMETHEUS_MULTIPROC_DIR"},
            "DATABASE_URL": database_url_for_subprocesses(),
            "APP_VAR_DIR": str(directory / "var"),
            "CELERY_QUEUE": self.queue,
            "PYTHONPATH": str(ROOT),
            "PYTHONUNBUFFERED": "1",
            "LOG_LEVEL": "INFO",
            # Nothing is scheduled unless a test asks for it.
            "JOB_EXPIRE_INTERVAL": "0",
            "JOB_PROPAGATE_FORGETS_INTERVAL": "0",
            "JOB_PROPOSE_DUPLICATES_INTERVAL": "0",
            "JOB_PRUNE_INTERVAL": "0",
            "JOB_GOLDEN_RECALL_INTERVAL": "0",
            "JOB_ALERTS_INTERVAL": "0",
            # No semantic index built behind a test's back, no model loaded unless a test asks.
            "SEMANTIC_AUTO_INDEX": "false",
            "SEMANTIC_LOAD_AT_START": "false",
        }

    @property
    def uses_redis(self) -> bool:
        return bool(self.env.get("REDIS_URL"))

    def _spawn(self, label: str, args: list[str], env: dict[str, str]) -> subprocess.Popen:
        log = self.directory / f"{label}-{len(self.processes)}.log"
        process = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "config", *args],
            cwd=self.directory,
            env={**self.env, **env},
            stdout=log.open("wb"),
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: kill -9 reaches the pool children too
        )
        self.processes.append((process, log))
        return process

    def start_worker(self, concurrency: int = 1, **env: str) -> subprocess.Popen:
        name = f"{self.queue}-{len(self.processes)}@%h"
        return self._spawn(
            "worker",
            [
                "worker",
                "--loglevel",
                "INFO",
                "--concurrency",
                str(concurrency),
                "-n",
                name,
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
            ],
            env,
        )

    def start_beat(self, **env: str) -> subprocess.Popen:
        # --max-interval 1: beat rereads the database schedule every second instead of every 5 s
        # (django-celery-beat's default), so a test sees an admin's change take effect sooner.
        return self._spawn(
            "beat", ["beat", "--loglevel", "INFO", "--pidfile", str(self.directory / "beat.pid"), "--max-interval", "1"], env
        )

    def send(self, task: str, **env: str) -> None:
        """Publish one task message the way beat does (`celery call`)."""
        subprocess.run(
            [sys.executable, "-m", "celery", "-A", "config", "call", task],
            cwd=self.directory,
            env={**self.env, **env},
            check=True,
            capture_output=True,
            timeout=60,
        )

    @staticmethod
    def kill(process: subprocess.Popen) -> None:
        """kill -9 the whole process group (main process and pool children), as an OOM kill would."""
        with suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)

    @contextmanager
    def explained(self) -> Iterator[None]:
        """Re-raise a failed assertion with the tail of every process log attached."""
        try:
            yield
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{self.logs()}") from None

    def logs(self, tail: int | None = 4000) -> str:
        """Each process's log, its last `tail` characters (None: all of it)."""
        return "\n".join(
            f"--- {log.name}\n{log.read_text(errors='replace')[-tail if tail else 0 :]}" for _, log in self.processes
        )

    def stop_all(self) -> None:
        # kill -9 at once: a graceful stop proves nothing here, and a worker's warm shutdown took
        # the whole 2 s grace period the previous version gave it, in every test.
        for process, _ in self.processes:
            self.kill(process)
        if self.uses_redis:
            import redis

            client = redis.Redis.from_url(self.env["REDIS_URL"])
            client.delete(self.queue, f"_kombu.binding.{self.queue}", f"_kombu.binding_permanent.{self.queue}")
            client.close()
        # Connections the workers left behind must not block the test database's flush.
        if settings.DATABASES["default"]["ENGINE"].endswith("postgresql"):
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid()"
                )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class GunicornServer:
    """gunicorn serving config.wsgi on a free port, as a separate process, against the test database."""

    def __init__(self, log_path: Path, *, workers: int = 1, **env: str):
        self.log_path = log_path
        self.workers = workers
        self.env = env
        self.process: subprocess.Popen | None = None
        self.base = ""

    def start(self) -> None:
        port = free_port()
        self.base = f"http://127.0.0.1:{port}"
        env = {
            **os.environ,
            "DATABASE_URL": database_url_for_subprocesses(),
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "APP_VAR_DIR": str(settings.VAR_DIR),
            **self.env,
        }
        log = self.log_path.open("a")
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gunicorn",
                "config.wsgi",
                "--bind",
                f"127.0.0.1:{port}",
                "--workers",
                str(self.workers),
                "--log-level",
                "warning",
            ],
            cwd=settings.BASE_DIR,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            assert self.process.poll() is None, self.log_path.read_text()[-3000:]
            try:
                urllib.request.urlopen(f"{self.base}/api/v1/memories/", timeout=1)
            except urllib.error.HTTPError:
                return  # a 401 means it is up
            except OSError:
                time.sleep(0.1)
        raise AssertionError("server did not start:\n" + self.log_path.read_text()[-3000:])

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def call(
        self, method: str, path: str, token: str | None = None, body: dict | None = None, timeout: float = 10
    ) -> tuple[int, dict | str]:
        headers = {"Content-Type": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        request = urllib.request.Request(
            self.base + path,
            method=method,
            data=json.dumps(body).encode() if body is not None else None,
            headers=headers,
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                status, raw, content_type = response.status, response.read(), response.headers["Content-Type"]
        except urllib.error.HTTPError as error:
            status, raw, content_type = error.code, error.read(), error.headers["Content-Type"]
        return status, (json.loads(raw) if "json" in (content_type or "") else raw.decode())
