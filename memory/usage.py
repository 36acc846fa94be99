"""`last_used_at` (when recall last returned a record), written off the request path.

In a web request, recall's mark (`memory.services.memory_mark_used`) goes into this process's
buffer instead of the database. The buffer is written with one set-based UPDATE once its oldest
note is MEMORY_LAST_USED_FLUSH_SECONDS old or it holds FLUSH_AT_RECORDS records, by the next
recall that finds it so, after its response has been sent (`request_finished`), and when the
process exits. Outside a request (a job, a shell, a test calling the service) a mark is written at
once; MEMORY_LAST_USED_FLUSH_SECONDS = 0 writes every request's marks after its response.

The UPDATE is `memory.services.write_last_used`, which hands itself to this module on import
(`use_writer`): the services import this module, so this module imports none of them.

A flush stamps every buffered record with the newest note's time, at most the flush interval
after its own use, and like every mark skips records marked within the last minute and never
moves a mark back: flushing twice changes nothing. The deletion-candidate rule (not used for
MEMORY_UNUSED_AFTER_DAYS days) does not notice a delay of seconds; a process killed outright loses
only its unflushed notes (seconds of use).
"""

import atexit
import contextlib
import logging
import threading
import time
import uuid
from collections.abc import Callable
from datetime import datetime

from django.conf import settings
from django.core.signals import request_finished, request_started
from django.dispatch import receiver

logger = logging.getLogger("memory.usage")

FLUSH_AT_RECORDS = 5000


class _Buffer:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.ids: set[uuid.UUID] = set()
        self.newest: datetime | None = None
        self.since = 0.0  # monotonic time of the oldest unflushed note

    def add(self, ids: list, at: datetime) -> None:
        with self.lock:
            if not self.ids:
                self.since = time.monotonic()
            self.ids.update(ids)
            self.newest = at if self.newest is None or at > self.newest else self.newest

    def due(self) -> bool:
        return bool(self.ids) and (
            len(self.ids) >= FLUSH_AT_RECORDS or time.monotonic() - self.since >= settings.MEMORY_LAST_USED_FLUSH_SECONDS
        )

    def take(self) -> tuple[list, datetime | None]:
        with self.lock:
            ids, newest = list(self.ids), self.newest
            self.ids, self.newest = set(), None
            return ids, newest


_buffer = _Buffer()
_in_request = threading.local()
_write: Callable[..., int] | None = None  # memory.services.write_last_used, once it is imported


def use_writer(write: Callable[..., int]) -> None:
    """How a flush writes: `write(record_ids=..., at=...)`, returning how many records changed."""
    global _write
    _write = write


def defer_mark(record_ids: list, at: datetime) -> bool:
    """Buffer the mark when called while serving a request; False elsewhere (write it now)."""
    if not getattr(_in_request, "active", False):
        return False
    _buffer.add(record_ids, at)
    _in_request.noted = True
    return True


def flush() -> int:
    """Write every buffered mark now; returns how many records changed."""
    if _write is None:  # no service imported yet, so nothing was buffered
        return 0
    ids, newest = _buffer.take()
    if not ids or newest is None:  # the newest note is set with the first
        return 0
    try:
        return _write(record_ids=ids, at=newest)
    except Exception:  # kept for the next flush rather than failing a finished request
        _buffer.add(ids, newest)
        logger.warning("last_used_at flush failed; kept for the next one", extra={"records": len(ids)}, exc_info=True)
        return 0


def pending() -> int:
    return len(_buffer.ids)


@receiver(request_started, dispatch_uid="memory-usage-request-started")
def _request_started(sender, **kwargs) -> None:
    _in_request.active, _in_request.noted = True, False


@receiver(request_finished, dispatch_uid="memory-usage-request-finished")
def _request_finished(sender, **kwargs) -> None:
    # Only a request that noted a use flushes, so no other request ever pays for the write.
    noted = getattr(_in_request, "noted", False)
    _in_request.active = _in_request.noted = False
    if noted and _buffer.due():
        flush()


def _flush_at_exit() -> None:
    # Logging and the database may already be gone this late (a test run's database is dropped).
    ids, newest = _buffer.take()
    if ids and _write is not None:
        with contextlib.suppress(Exception):  # at exit: nothing left to report to
            _write(record_ids=ids, at=newest)


atexit.register(_flush_at_exit)
