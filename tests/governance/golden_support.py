"""Search indexes for the golden-gate tests, made through the index lifecycle (`memory.search.build`)."""

from memory.search import SearchIndex
from memory.search.build import build_index, ensure_active_index, request_rebuild

# Words only, no stemming: questions that reach their records only through a stem ("roadtrips
# planned" for "Planning a roadtrip") find nothing with it.
UNSTEMMED = {"stemmer": "none", "stop_words": "none"}


def make_candidate(name: str, recipe: dict | None = None) -> SearchIndex:
    """A built candidate (not promoted) beside the active index."""
    ensure_active_index()
    index = request_rebuild(name=name, recipe=recipe, actor="test")
    return build_index(index.pk, actor="test")
