"""The default cache without Redis is shared by every process on the machine, and its `add()` is
atomic across processes (the rate limit's per-token lock relies on it)."""

import multiprocessing

from django.conf import settings
from django.core.cache import cache, caches

from config.cache import FileCache

PROCESSES = 6
KEYS = 40


def _race_for_keys(location: str, barrier, results) -> None:
    file_cache = FileCache(location, {})
    barrier.wait()
    results.put([n for n in range(KEYS) if file_cache.add(f"key-{n}", "mine", 30)])


def test_add_is_won_by_exactly_one_process_per_key(tmp_path):
    context = multiprocessing.get_context("fork")
    barrier, results = context.Barrier(PROCESSES), context.Queue()
    processes = [context.Process(target=_race_for_keys, args=(str(tmp_path), barrier, results)) for _ in range(PROCESSES)]
    for process in processes:
        process.start()
    won = [n for _ in processes for n in results.get(timeout=60)]
    for process in processes:
        process.join(timeout=30)
    assert sorted(won) == list(range(KEYS))  # every key added once, by one process


def test_without_redis_the_default_cache_is_the_shared_file_cache():
    if settings.REDIS_URL:
        assert settings.CACHES["default"]["BACKEND"] == "django.core.cache.backends.redis.RedisCache"
        return
    assert isinstance(caches["default"], FileCache)
    assert settings.CACHES["default"]["LOCATION"] == str(settings.VAR_DIR / "cache")
    # What one process writes, another one (a fresh instance on the same folder) reads.
    cache.set("shared-probe", 42, 30)
    assert FileCache(settings.CACHES["default"]["LOCATION"], {}).get("shared-probe") == 42
    cache.delete("shared-probe")
