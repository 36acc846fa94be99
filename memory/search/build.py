"""The life of a search index, and the only code that changes its status:

    request_rebuild -> building --build_index--> candidate --promote_index (gates pass)--> active
                                                     |                                   |
                                                     '-- gates fail: stays candidate     '-- replaced (or retire_index): retired

- `request_rebuild(name, recipe)` names what to build: a new index, an existing non-active one
  (rebuilt in place with its or a new recipe), or, for the active index, a successor built beside
  it (`<name>-r<time>`), so the active one keeps serving until the successor is promoted.
- `build_index` fills the storage from the active records (the triggers keep it current from the
  start) and makes it a candidate with its inputs, coverage and build figures.
- `promote_index` runs the registered promotion gates against the active index of the kind and
  swaps them only if every gate passes; the replaced index is retired and its storage dropped.
  A failing candidate stays a candidate, with the gates' report.
- `ensure_active_index` gives recall an index when none of the kind exists (a new database, or a
  test database after a flush): the default recipe, built at once, active without gates (there is
  nothing to compare it with).
- `ensure_semantic_index` requests the semantic index an install with the `semantic` extra should
  have and never had (`bin/run` builds it before the demo starts; the worker queues its build when
  it starts): an ordinary request, built, gated and promoted like any other.

Every status change saves the row with a history reason (`index.build`, `index.promote`, ...).
The Celery task `memory.tasks.build_search_index` and `manage.py rebuild_index` call
`build_and_promote`; both are safe to repeat (only a `building` index is built, only a
`candidate` promoted).
"""

import logging
import re
import time
from typing import Any

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from memory.engine import current
from memory.errors import Conflict, RecordNotFound, ValidationFailed
from memory.models import MemoryRecord, Status
from memory.search import storage
from memory.search.gates import run_promotion_gates
from memory.search.models import STORED_STATUSES, IndexKind, IndexStatus, SearchIndex
from memory.search.recipes import lexical_recipe

logger = logging.getLogger("memory.search")

DEFAULT_NAME: dict[str, str] = {IndexKind.LEXICAL: "lexical-default"}
AUTO_SEMANTIC_NAME = "semantic"  # the semantic index an install with the extra gets (`ensure_semantic_index`)
SUCCESSOR = re.compile(r"-r\d{14}$")  # the suffix of an index built to replace the one it is named after


def complete_recipe(kind: str, given: dict[str, Any] | None) -> dict[str, Any]:
    """The complete recipe of an index of `kind`: the lexical one from `memory.search.recipes`, the
    semantic one from `memory.search.semantic` (chosen here, so recipes need not import semantic)."""
    if kind == IndexKind.LEXICAL:
        return lexical_recipe(given)
    if kind == IndexKind.SEMANTIC:
        from memory.search.semantic import semantic_recipe  # model, version, dims, normalisation

        return semantic_recipe(given)
    raise ValidationFailed(f"Indexes of kind '{kind}' cannot be built here yet.", errors={"kind": ["Not supported."]})


def _set(index: SearchIndex, *, reason: str, actor: str, **changes) -> SearchIndex:
    """Save the index with `changes`, one history row naming the reason and the actor."""
    if "status" in changes and changes["status"] != index.status:
        changes["status_changed_at"] = timezone.now()
    for name, value in changes.items():
        setattr(index, name, value)
    index._change_reason = reason
    index._history_actor = actor
    index.save()
    return index


def _stamp() -> str:
    return timezone.now().strftime("%Y%m%d%H%M%S")


# --------------------------------------------------------------------------------------------
# request, build, promote


def request_rebuild(
    *, name: str, recipe: dict | None = None, kind: str = IndexKind.LEXICAL, actor: str = "system"
) -> SearchIndex:
    """The index `rebuild_index NAME` builds, in status `building` (see the module docstring).
    `recipe` replaces the recipe (validated and completed); without it the index keeps its own,
    and a new index takes the active one's (or the default)."""
    if not name or len(name) > 80 or not name.replace("-", "").replace("_", "").isalnum() or not name.isascii():
        raise ValidationFailed("An index name is 1 to 80 letters, digits, '-' or '_'.", errors={"name": ["Invalid name."]})
    with transaction.atomic():
        existing = SearchIndex.objects.select_for_update().filter(name=name).first()
        if existing is not None and existing.kind != kind:
            raise ValidationFailed(f"Index '{name}' is a {existing.kind} index.", errors={"kind": ["Does not match."]})
        if existing is not None and existing.status == IndexStatus.BUILDING:
            if recipe is not None:
                _set(existing, reason="index.rebuild", actor=actor, recipe=complete_recipe(kind, recipe))
            return existing  # a build already asked for (or killed mid-way): build it
        if existing is not None and existing.status != IndexStatus.ACTIVE:
            new_recipe = complete_recipe(kind, recipe if recipe is not None else existing.recipe)
            if existing.status == IndexStatus.CANDIDATE:
                storage.drop_storage(existing.storage_name)
            return _set(
                existing,
                reason="index.rebuild",
                actor=actor,
                status=IndexStatus.BUILDING,
                recipe=new_recipe,
                inputs={},
                coverage=None,
                built_at=None,
                report={},
            )
        base = existing or SearchIndex.objects.filter(kind=kind, status=IndexStatus.ACTIVE).first()
        new_recipe = complete_recipe(kind, recipe if recipe is not None else (base.recipe if base else None))
        new_name = f"{SUCCESSOR.sub('', name)}-r{_stamp()}" if existing is not None else name
        index = SearchIndex(
            name=new_name,
            kind=kind,
            recipe=new_recipe,
            status=IndexStatus.BUILDING,
            report={"replaces": existing.name} if existing is not None else {},
        )
        index._change_reason, index._history_actor = "index.create", actor
        try:
            with transaction.atomic():
                index.save()
        except IntegrityError:
            raise Conflict(f"An index named '{new_name}' already exists.", code="index_exists") from None
        return index


def build_index(index_id: int, *, actor: str = "system", encode=None) -> SearchIndex:
    """Fill a `building` index's storage and make it a candidate; anything else is left as it is.
    A failed build drops the storage and retires the index with the error's type in its report.
    `encode` replaces a semantic index's model (a benchmark's synthetic vectors)."""
    index = SearchIndex.objects.get(pk=index_id)
    if index.status != IndexStatus.BUILDING:
        return index
    started, up_to = time.monotonic(), timezone.now()
    try:
        held = _build_storage(index, encode=encode)
    except Exception as exc:
        logger.exception("index build failed", extra={"index": index.name})
        storage.drop_storage(index.storage_name)
        _set(
            index,
            reason="index.build_failed",
            actor=actor,
            status=IndexStatus.RETIRED,
            report={**index.report, "build": {"error": type(exc).__name__}},
        )
        raise
    eligible = MemoryRecord.objects.filter(status=Status.ACTIVE).count()
    build = {"records": held, "seconds": round(time.monotonic() - started, 3), "database": current().NAME}
    return _set(
        index,
        reason="index.build",
        actor=actor,
        status=IndexStatus.CANDIDATE,
        built_at=timezone.now(),
        storage_version=storage.storage_version(),
        inputs={"records": held, "up_to": up_to.isoformat()},
        coverage=min(1.0, held / eligible) if eligible else 1.0,
        report={**index.report, "build": build},
    )


def _build_storage(index: SearchIndex, *, encode=None) -> int:
    """Fill the index's storage from the active records; returns how many it holds (for a
    semantic index: how many have their embedding)."""
    if index.kind == IndexKind.SEMANTIC:
        from memory.search import semantic

        return semantic.build_storage(index.storage_name, index.recipe, encode=encode)
    return storage.build_storage(index.storage_name, index.recipe)


def purge_index_records(index: SearchIndex, record_ids) -> int:
    """Delete the given records' entries from the index's storage (words, or vectors); returns how
    many it still held. For forget propagation (`purge_index_files` does the files)."""
    if index.kind == IndexKind.SEMANTIC:
        from memory.search import vectors

        return vectors.purge_records(index.storage_name, record_ids)
    return storage.purge_records(index.storage_name, record_ids)


def purge_index_files(index: SearchIndex, record_ids):
    """Overwrite the given records' vectors and ids in a semantic index's approximate partitions,
    and read every file back for them (`memory.search.ann_forget.Purged`); None for an index without files."""
    from memory.search import ann, ann_forget

    if index.kind != IndexKind.SEMANTIC or not ann.index_dir(index.storage_name).is_dir():
        return None
    return ann_forget.purge(index.storage_name, record_ids, dims=int(index.recipe.get("dims", 384)))


def promote_index(index_id: int, *, actor: str = "system") -> tuple[SearchIndex, bool]:
    """Run the promotion gates for a candidate against the active index of its kind; if all pass,
    the candidate becomes active and the active one is retired (its storage dropped after the
    commit). Returns the index and whether it was promoted."""
    candidate = SearchIndex.objects.get(pk=index_id)
    if candidate.status != IndexStatus.CANDIDATE:
        return candidate, candidate.status == IndexStatus.ACTIVE
    active = SearchIndex.objects.filter(kind=candidate.kind, status=IndexStatus.ACTIVE).first()
    passed, gates = run_promotion_gates(candidate, active)
    decided_at = timezone.now()
    with transaction.atomic():
        locked = {i.pk: i for i in SearchIndex.objects.select_for_update().filter(kind=candidate.kind).order_by("pk")}
        candidate = locked[candidate.pk]
        current = next((i for i in locked.values() if i.status == IndexStatus.ACTIVE), None)
        promotion = {
            "passed": passed,
            "gates": gates,
            "against": active.name if active else None,
            "decided_at": decided_at.isoformat(),
        }
        if candidate.status != IndexStatus.CANDIDATE:
            return candidate, candidate.status == IndexStatus.ACTIVE
        if (current.pk if current else None) != (active.pk if active else None):
            promotion.update(passed=False, note="The active index changed while the gates ran; rebuild to try again.")
            passed = False
        if not passed:
            _set(candidate, reason="index.gates_failed", actor=actor, report={**candidate.report, "promotion": promotion})
            return candidate, False
        if current is not None:
            _set(
                current,
                reason="index.retire",
                actor=actor,
                status=IndexStatus.RETIRED,
                report={**current.report, "retired_by": candidate.name},
            )
            name = current.storage_name
            transaction.on_commit(lambda: storage.drop_storage(name))
        _set(
            candidate,
            reason="index.promote",
            actor=actor,
            status=IndexStatus.ACTIVE,
            report={**candidate.report, "promotion": promotion},
        )
    return candidate, True


def retire_index(name: str, *, actor: str = "system") -> SearchIndex:
    """Retire index `name` and drop its storage after the commit: a candidate, or the active
    semantic index (recall is lexical from then on). The active lexical index cannot be retired:
    recall needs one; replace it with `rebuild_index` instead."""
    with transaction.atomic():
        index = SearchIndex.objects.select_for_update().filter(name=name).first()
        if index is None:
            raise RecordNotFound(f"There is no index named '{name}'.")
        if index.status == IndexStatus.RETIRED:
            return index
        if index.status == IndexStatus.ACTIVE and index.kind == IndexKind.LEXICAL:
            raise Conflict(
                "The active lexical index cannot be retired: recall needs one. Rebuild it to replace it.", code="index_required"
            )
        if index.status == IndexStatus.BUILDING:
            raise Conflict(f"Index '{name}' is being built; retire it once it is a candidate.", code="index_building")
        _set(index, reason="index.retire", actor=actor, status=IndexStatus.RETIRED, report={**index.report, "retired_by": actor})
        storage_name = index.storage_name
        transaction.on_commit(lambda: storage.drop_storage(storage_name))
    return index


def build_and_promote(index_id: int, *, actor: str = "system") -> SearchIndex:
    build_index(index_id, actor=actor)
    index, _ = promote_index(index_id, actor=actor)
    return index


def index_summary(index: SearchIndex) -> dict:
    return {
        "name": index.name,
        "kind": index.kind,
        "status": index.status,
        "recipe": index.recipe,
        "inputs": index.inputs,
        "coverage": index.coverage,
        "built_at": index.built_at.isoformat() if index.built_at else None,
        "promotion": {k: v for k, v in index.report.get("promotion", {}).items() if k != "gates"} or None,
    }


# --------------------------------------------------------------------------------------------
# serving


def ensure_active_index(kind: str = IndexKind.LEXICAL) -> SearchIndex:
    """The active index of `kind`; when there is none, the default one built now (in this
    transaction) and made active. Storage left behind by indexes whose rows are gone (a flushed
    test database) is dropped first."""
    active = SearchIndex.objects.filter(kind=kind, status=IndexStatus.ACTIVE).first()
    if active is not None:
        return active
    if kind not in DEFAULT_NAME:
        raise Conflict(f"No active {kind} index.", code="no_active_index")
    with transaction.atomic():
        current().search.lock_bootstrap()  # one bootstrap at a time
        active = SearchIndex.objects.filter(kind=kind, status=IndexStatus.ACTIVE).first()
        if active is not None:
            return active
        stored = SearchIndex.objects.filter(status__in=STORED_STATUSES)  # of other kinds too: keep theirs
        storage.drop_storage_except(i.storage_name for i in stored)
        name = DEFAULT_NAME[kind]
        if SearchIndex.objects.filter(name=name).exists():
            name = f"{name}-r{_stamp()}"
        index = SearchIndex(name=name, kind=kind, recipe=complete_recipe(kind, None), status=IndexStatus.BUILDING)
        index._change_reason, index._history_actor = "index.bootstrap", "system"
        index.save()
        build_index(index.pk)
        index.refresh_from_db()
        return _set(
            index,
            reason="index.bootstrap",
            actor="system",
            status=IndexStatus.ACTIVE,
            report={
                **index.report,
                "promotion": {
                    "passed": True,
                    "gates": {},
                    "against": None,
                    "note": "First index of its kind: nothing to compare with.",
                },
            },
        )


def ensure_semantic_index(*, actor: str = "system") -> SearchIndex | None:
    """The semantic index this install should have and has never had, requested now (status
    `building`, named AUTO_SEMANTIC_NAME; the caller builds it, through the gates like any other:
    `build_and_promote`, or the task `memory.tasks.build_search_index`), or None. Requested only
    when settings.SEMANTIC_AUTO_INDEX is on, the `semantic` extra is installed in this process and
    no semantic index exists in any status: a retired one means an operator switched semantic
    recall off (`retire_index`) or its build failed (its report says why), and either stays their
    decision; a building or candidate one is on its way, or held back by its gates."""
    from memory.search.semantic import extra_missing

    if not settings.SEMANTIC_AUTO_INDEX or extra_missing() is not None:
        return None
    with transaction.atomic():
        current().search.lock_bootstrap()  # one request at a time (SQLite: its one writer)
        if SearchIndex.objects.filter(kind=IndexKind.SEMANTIC).exists():
            return None
        try:
            return request_rebuild(name=AUTO_SEMANTIC_NAME, kind=IndexKind.SEMANTIC, actor=actor)
        except (Conflict, ValidationFailed) as exc:  # the name is taken (another kind's, or a race lost)
            logger.warning("semantic index not requested", extra={"index": AUTO_SEMANTIC_NAME, "reason": type(exc).__name__})
            return None


def serving_index(index: SearchIndex | str | None = None, *, kind: str = IndexKind.LEXICAL) -> SearchIndex:
    """The index a recall reads: the one given (an instance or a name), or the active one of `kind`.
    An index that is still building, or retired, cannot answer."""
    if index is None:
        return ensure_active_index(kind)
    if isinstance(index, str):
        found = SearchIndex.objects.filter(name=index).first()
        if found is None:
            raise RecordNotFound(f"No index named '{index}'.", errors={"index": ["No such index."]})
        index = found
    if not index.serves:
        raise Conflict(f"Index '{index.name}' is {index.status} and cannot answer recall.", code="index_not_serving")
    return index


def _migrations_pending() -> bool:
    from django.db.migrations.executor import MigrationExecutor

    executor = MigrationExecutor(connection)
    return bool(executor.migration_plan(executor.loader.graph.leaf_nodes()))


def repair_storage(**kwargs) -> list[str]:
    """Rebuild every stored index whose tables or triggers are missing; returns their names.
    Connected to post_migrate: on SQLite a migration that rebuilds the records table drops the
    triggers with it, and an index that silently stopped following the records would rank
    from stale data. Skipped while migrations are pending (a `migrate` to an earlier one): the
    index table may not have the model's newest columns yet; the last `migrate` repairs."""
    if _migrations_pending():
        return []
    repaired = []
    for index in SearchIndex.objects.filter(status__in=[IndexStatus.BUILDING, IndexStatus.CANDIDATE, IndexStatus.ACTIVE]):
        if index.status == IndexStatus.BUILDING:
            continue  # its build (re)creates everything
        if storage.storage_exists(index.storage_name) and storage.triggers_present(index.storage_name):
            continue
        logger.warning("search index storage incomplete: rebuilt", extra={"index": index.name})
        if index.kind == IndexKind.SEMANTIC:  # triggers and rows again; the vectors computed so far stay
            from memory.search import vectors

            held = vectors.repair_storage(index.storage_name)
        else:
            held = storage.build_storage(index.storage_name, index.recipe)
        _set(
            index,
            reason="index.repair",
            actor="system",
            inputs={"records": held, "up_to": timezone.now().isoformat()},
            storage_version=storage.storage_version(),
        )
        repaired.append(index.name)
    return repaired
