"""Search indexes: rebuildable caches over the memory records, each built by a recipe, with one
active index per kind serving recall.

- `memory.search.models.SearchIndex`: the index row (recipe, inputs, status, coverage, report).
- `memory.search.storage`: its tables and the triggers that keep them in step with the records.
- `memory.search.ranking`: BM25 and the priors, as recall uses them.
- `memory.search.build`: create, build, promote, retire (the only code that changes an index's
  status), and the default index every database starts with.
- `memory.search.gates`: promotion gates (governance registers the golden-recall gate).
"""

from memory.search.gates import register_promotion_gate
from memory.search.models import IndexKind, IndexStatus, SearchIndex

__all__ = ["IndexKind", "IndexStatus", "SearchIndex", "active_index", "register_promotion_gate"]


def active_index(kind: str = IndexKind.LEXICAL) -> SearchIndex | None:
    """The index of this kind that serves recall now, or None if none does."""
    return SearchIndex.objects.filter(kind=kind, status=IndexStatus.ACTIVE).first()
