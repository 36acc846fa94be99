"""A tenant's memory as plain files: one note per record (`memory.portable.notes`) in folders by
subject, plus an `index.md` a person opens first. Written to a directory
(`manage.py export_memories`) or streamed into a zip (the reviewer download); both come from
`export_files`, so the two cannot differ.

Reads go through the scoped read of the API (`memory.api.views.record_queryset`: the caller's
scope, the effective successor as `superseded_by`), in chunks; derivation links come in one query.
Forgotten records are exported as content-free tombstones. An export leaves the app: nothing can
forget a copy someone downloaded, so it is logged (who, which tenant, how many; never content).
"""

import logging
import os
import zipfile
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from django.utils import timezone

from memory.actors import Actor
from memory.models import MemoryRecord, Status, Tenant
from memory.policy import CHUNK
from memory.portable.notes import INDEX_NAME, note_path, note_title, render_note

logger = logging.getLogger("memory.portable")


@dataclass
class ExportSummary:
    tenant: str
    records: int = 0
    tombstones: int = 0
    by_status: Counter = field(default_factory=Counter)

    def as_dict(self) -> dict:
        return {
            "tenant": self.tenant,
            "records": self.records,
            "tombstones": self.tombstones,
            "by_status": dict(sorted(self.by_status.items())),
        }


def export_queryset(actor: Actor, tenant: Tenant, *, subject: str | None = None, statuses: Iterable[str] | None = None):
    from memory.api.views import record_queryset  # the API's one definition of a readable record

    records = record_queryset(actor).filter(tenant=tenant).select_related("reviewed_by")
    if subject:
        records = records.filter(subject=subject)
    if statuses:
        records = records.filter(status__in=list(statuses))
    return records.order_by("subject", "created_at", "pk")


def export_files(
    actor: Actor,
    tenant: Tenant,
    *,
    subject: str | None = None,
    statuses: Iterable[str] | None = None,
    summary: ExportSummary | None = None,
) -> Iterator[tuple[str, str]]:
    """(relative path, text) of every note of the selection, then `index.md`."""
    summary = summary if summary is not None else ExportSummary(tenant.slug)
    links = defaultdict(list)
    through = MemoryRecord.derived_from.through.objects.filter(from_memoryrecord__tenant=tenant)
    for derived, source in through.order_by("to_memoryrecord_id").values_list("from_memoryrecord_id", "to_memoryrecord_id"):
        links[derived].append(source)
    index: dict[str, list[tuple[str, str, str]]] = defaultdict(list)
    for record in export_queryset(actor, tenant, subject=subject, statuses=statuses).iterator(chunk_size=CHUNK):
        path = note_path(record)
        yield path, render_note(record, derived_from=links.get(record.pk, []), superseded_by=record.superseded_by_id)
        summary.by_status[record.status] += 1
        if record.status == Status.FORGOTTEN:
            summary.tombstones += 1
            index["(forgotten)"].append((path, note_title(record), record.status))
        else:
            summary.records += 1
            index[record.subject].append((path, note_title(record), record.status))
    yield INDEX_NAME, _index(tenant, index, summary)


def _index(tenant: Tenant, index: dict[str, list[tuple[str, str, str]]], summary: ExportSummary) -> str:
    lines = [
        f"# Memories of tenant {tenant.slug}",
        "",
        f"Exported {timezone.now():%Y-%m-%d %H:%M} UTC: {summary.records} notes and {summary.tombstones} tombstones of "
        "forgotten memories. Each note is Markdown with YAML front matter (kind, subject, purpose, authority, trust, "
        "status, confidence, times, provenance, links); its body is the memory's content.",
        "",
    ]
    for subject in sorted(index):
        lines += [f"## {subject}", ""]
        lines += [f"- [{title or '(empty)'}]({path.replace(' ', '%20')}) ({status})" for path, title, status in index[subject]]
        lines.append("")
    return "\n".join(lines)


def export_to_directory(actor: Actor, tenant: Tenant, outdir: Path, **selection) -> ExportSummary:
    """Write the notes under `outdir` (created if missing). Each file is written whole (to a
    temporary name, then renamed), so an interrupted export never leaves a truncated note."""
    summary = ExportSummary(tenant.slug)
    outdir.mkdir(parents=True, exist_ok=True)
    for relative, text in export_files(actor, tenant, summary=summary, **selection):
        target = outdir / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(target.name + ".partial")
        partial.write_text(text, encoding="utf-8")
        os.replace(partial, target)
    _log(actor, summary, "directory")
    return summary


def export_to_zip(actor: Actor, tenant: Tenant, stream, *, root: str, **selection) -> ExportSummary:
    """Write the notes into a zip on `stream` (a file object), under the folder `root`."""
    summary = ExportSummary(tenant.slug)
    with zipfile.ZipFile(stream, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for relative, text in export_files(actor, tenant, summary=summary, **selection):
            archive.writestr(f"{root}/{relative}", text)
    _log(actor, summary, "zip")
    return summary


def _log(actor: Actor, summary: ExportSummary, form: str) -> None:
    logger.info("memories exported", extra={"actor": actor.label, "form": form, **summary.as_dict()})
