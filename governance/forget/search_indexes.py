"""Search indexes as a forget artifact. Every index (building, candidate or active) keeps a copy of
its records' words (lexical) or embeddings (semantic); a record leaves every index in the same
transaction that takes it out of `active` (the storage triggers), so a forgotten subject is gone
from recall at once. Propagation then deletes whatever any index still holds for the request's
records (an index built from a snapshot taken just before the forget, say) and, on SQLite, merges
the FTS5 segments so the deleted words leave the file too. One receipt covers every index, with a
count per index."""

from memory.engine import current
from memory.search import storage
from memory.search.build import purge_index_files, purge_index_records
from memory.search.models import STORED_STATUSES, SearchIndex


class SearchIndexesArtifact:
    name = "search_indexes"
    covers = ()  # per-index tables outside the ORM; they hold record ids, not foreign keys

    def purge(self, request, record_ids):
        indexes = list(SearchIndex.objects.filter(status__in=STORED_STATUSES).order_by("pk"))
        removed = {
            index.name: purge_index_records(index, record_ids)
            for index in indexes
            if record_ids and storage.storage_exists(index.storage_name)
        }
        files = {index.name: purge_index_files(index, record_ids) for index in indexes if record_ids}
        files = {name: purged for name, purged in files.items() if purged is not None}
        per_index = ", ".join(f"{name}: {count}" for name, count in removed.items()) or "none held"
        note = (
            f"Entries (words, vectors) left every search index when the records stopped being active; "
            f"left over now, per index: {per_index}.{current().ops.INDEX_PURGE_NOTE}"
        )
        if files:
            unverified = sorted(name for name, purged in files.items() if not purged.verified)
            if unverified:
                raise RuntimeError(f"forgotten vectors still found in the approximate files of {', '.join(unverified)}")
            overwritten = sum(purged.positions for purged in files.values())
            read = sum(purged.files for purged in files.values())
            note += (
                f" Approximate-search files: {overwritten} vectors overwritten; all {read} files read back, "
                "none holds a forgotten id or vector."
            )
        return sum(removed.values()), note[:500]
