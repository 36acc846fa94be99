"""Heartbeat files: how a worker or beat process, which serves no HTTP, tells a probe on its host
that it is alive. The Celery worker's main process touches its file from the worker's timer
(`WorkerHeartbeat`, a bootstep added in config.celery), beat's from every scheduler tick
(`governance.jobs.schedule.JobScheduler.tick`); `manage.py probe` reads the file's age. A process
that hangs stops touching it, so the file's age is the liveness signal, not the process's existence.

Files live in `APP_VAR_DIR/run/`, one per Celery node name (worker) or one for beat."""

from __future__ import annotations

import re
import time
from pathlib import Path

from django.conf import settings


def interval() -> float:
    """Seconds between touches (PROBE_HEARTBEAT_SECONDS)."""
    return settings.PROBE_HEARTBEAT_SECONDS


def stale_after() -> float:
    """A file older than this: the process is not alive (three missed touches and a little)."""
    return 3 * interval() + 2


def path_for(role: str, node: str = "") -> Path:
    """The heartbeat file of `role` ("worker", with its Celery node name, or "beat")."""
    name = role if not node else f"{role}-{re.sub(r'[^A-Za-z0-9@._-]', '_', node)}"
    return Path(settings.VAR_DIR) / "run" / f"{name}.alive"


def touch(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch()


def age(path: Path, now: float | None = None) -> float | None:
    """Seconds since the file was last touched, or None when there is none."""
    try:
        modified = path.stat().st_mtime
    except FileNotFoundError:
        return None
    return max(0.0, (now or time.time()) - modified)


def remove(path: Path) -> None:
    path.unlink(missing_ok=True)
