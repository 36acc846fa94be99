"""The cache used when there is no Redis: Django's file cache under VAR_DIR, shared by every
process on the machine (web workers, Celery), with an `add()` that is atomic across processes.

Django's file cache implements `add()` as "exists? then write", so two processes can both win it.
Rate limiting takes a short lock with `add()` (as it can on Redis, where `add()` is SET NX); here an
flock on one file in the cache folder makes the check and the write one step."""

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager

from django.core.cache.backends.base import DEFAULT_TIMEOUT
from django.core.cache.backends.filebased import FileBasedCache


class FileCache(FileBasedCache):
    def __init__(self, dir: str, params: dict):
        super().__init__(dir, params)
        # Not a *.djcache file: clear() and culling leave it alone.
        self._add_lock_path = os.path.join(os.path.abspath(dir), "add.lock")

    def add(self, key, value, timeout=DEFAULT_TIMEOUT, version=None) -> bool:
        with self._exclusive():
            return super().add(key, value, timeout, version)

    @contextmanager
    def _exclusive(self) -> Iterator[None]:
        os.makedirs(os.path.dirname(self._add_lock_path), exist_ok=True)  # the folder may have been removed
        fd = os.open(self._add_lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # released when the descriptor closes, even on a crash
            yield
        finally:
            os.close(fd)
