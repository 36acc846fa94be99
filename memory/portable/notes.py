"""The note: one memory record as a Markdown file with YAML front matter, defined once for the
export, the reviewer download and the import.

```
---
format: governed-memory-note/1
id: 6f1c0e3a-...
tenant: acme
agent: support-bot
kind: preference
subject: customer/acme
...every governed field (see `live_front_matter`)...
content_hash: sha256:...
---
Prefers email over phone.
```

The body is the content followed by one newline (a reader strips exactly that newline), so the
content's bytes, and its `content_hash`, survive the trip. Times are ISO 8601 strings in UTC,
quoted, so every YAML parser reads them as text. Front matter is written with PyYAML's safe dumper
and read with its safe loader: no tags, no objects, only mappings, lists, strings, numbers,
booleans and nulls.

A forgotten record is a tombstone: its id, scope, kind, dates and links, the subject as its keyed
fingerprint, and no content, content hash or provenance strings.
"""

import re
import uuid
from dataclasses import dataclass
from datetime import date, datetime
from functools import cached_property
from typing import Any

import yaml

from memory.fingerprints import subject_fingerprint
from memory.models import MemoryRecord, Status

FORMAT = "governed-memory-note/1"
INDEX_NAME = "index.md"  # the export's table of contents at its root; not a note
FORGOTTEN_FOLDER = "_forgotten"

_Dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def live_front_matter(record: MemoryRecord, *, derived_from: list, superseded_by) -> dict[str, Any]:
    """Every governed field of a record that still has its content. `record` has tenant, agent,
    kind and reviewed_by loaded."""
    provenance = record.provenance
    sources = [provenance["uri"]] if provenance["uri"] else []
    sources += [f"memory:{source}" for source in derived_from]
    return {
        "format": FORMAT,
        "id": str(record.pk),
        "tenant": record.tenant.slug,
        "agent": record.agent.slug,
        "kind": record.kind.name,
        "subject": record.subject,
        "purpose": record.purpose,
        "status": record.status,
        "version": record.version,
        "authority": record.authority,
        "trust": record.trust,
        "confidence": record.confidence,
        "generated": bool(derived_from),  # a summary or merge: derived by the agent, not observed
        "origin": record.source_type,
        "sources": sources,
        "provenance": {
            "source_type": record.source_type,
            "uri": provenance["uri"],
            "session_id": provenance["session_id"],
            "turn_id": provenance["turn_id"],
            "tool": provenance["tool"],
            "source_version": provenance["source_version"],
            "contaminated": record.contaminated,
            # Signed provenance: the registered source, and whether its signature verified (an
            # import of this note is not verified: a file proves nothing).
            "source": provenance["source"],
            "verified": provenance["verified"],
        },
        "created_at": _iso(record.created_at),
        "observed_at": _iso(record.observed_at),
        "confirmed_at": _iso(record.confirmed_at),
        "expires_at": _iso(record.expires_at),
        "valid_from": _iso(record.valid_from),
        "valid_to": _iso(record.valid_to),
        "status_changed_at": _iso(record.status_changed_at),
        "supersedes": str(record.supersedes_id) if record.supersedes_id else None,
        "superseded_by": str(superseded_by) if superseded_by else None,
        "derived_from": [str(source) for source in derived_from],
        "reviewed": (
            {"by": record.reviewed_by.get_username() if record.reviewed_by else None, "at": _iso(record.reviewed_at)}
            if record.reviewed_at
            else None
        ),
        "quarantine_reason": record.quarantine_reason or None,
        "content_hash": record.content_hash,
    }


def tombstone_front_matter(record: MemoryRecord, *, derived_from: list, superseded_by) -> dict[str, Any]:
    """A forgotten record: what it was (scope, kind, dates, links), never what it said or where from."""
    return {
        "format": FORMAT,
        "id": str(record.pk),
        "tenant": record.tenant.slug,
        "agent": record.agent.slug,
        "kind": record.kind.name,
        "subject": subject_fingerprint(record.tenant_id, record.subject),
        "purpose": record.purpose,
        "status": Status.FORGOTTEN.value,
        "version": record.version,
        "generated": bool(derived_from),
        "origin": record.source_type,
        "created_at": _iso(record.created_at),
        "forgotten_at": _iso(record.status_changed_at),
        "supersedes": str(record.supersedes_id) if record.supersedes_id else None,
        "superseded_by": str(superseded_by) if superseded_by else None,
        "derived_from": [str(source) for source in derived_from],
    }


def render_note(record: MemoryRecord, *, derived_from: list, superseded_by=None) -> str:
    if record.is_forgotten:
        meta = tombstone_front_matter(record, derived_from=derived_from, superseded_by=superseded_by)
        body = f"*Forgotten on {record.status_changed_at:%Y-%m-%d}: the content is not kept.*"
    else:
        meta = live_front_matter(record, derived_from=derived_from, superseded_by=superseded_by)
        body = record.content
    front = yaml.dump(meta, Dumper=_Dumper, sort_keys=False, allow_unicode=True, default_flow_style=False, width=10_000)
    return f"---\n{front}---\n{body}\n"


# --------------------------------------------------------------------------------------------
# where a note lives in an export


def _segment(part: str) -> str:
    cleaned = re.sub(r"[^\w.-]+", "-", part).strip("-.")
    return cleaned[:60] or "_"


def note_path(record: MemoryRecord) -> str:
    """`<subject folders>/<created date>-<kind>-<id>.md`, e.g. `customer/acme/2026-11-29-preference-6f1c….md`;
    forgotten records under `_forgotten/` (their subject is not written anywhere in clear). The
    folders are for browsing; the subject in the front matter is the truth."""
    if record.is_forgotten:
        folder = FORGOTTEN_FOLDER
    else:
        folder = "/".join(_segment(part) for part in record.subject.split("/") if part.strip()) or "_"
    return f"{folder}/{record.created_at:%Y-%m-%d}-{record.kind.name}-{record.pk}.md"


def note_title(record: MemoryRecord, limit: int = 80) -> str:
    if record.is_forgotten:
        return "(forgotten)"
    first_line = record.content.strip().splitlines()[0] if record.content.strip() else ""
    return first_line if len(first_line) <= limit else first_line[: limit - 1] + "…"


# --------------------------------------------------------------------------------------------
# reading a note back


class NoteError(ValueError):
    """A file that is not a note; the message says what is wrong and never quotes the content."""


@dataclass(frozen=True)
class Note:
    meta: dict[str, Any]
    content: str

    @cached_property
    def id(self) -> uuid.UUID:
        return uuid.UUID(str(self.meta["id"]))

    @property
    def status(self) -> str | None:
        return self.meta.get("status")

    @property
    def is_tombstone(self) -> bool:
        return self.status == Status.FORGOTTEN


def _plain(value: Any) -> Any:
    """YAML read back as the JSON types the write body takes: a timestamp someone left unquoted
    becomes its ISO string again."""
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    return value


def parse_note(data: bytes) -> Note:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise NoteError("Not UTF-8 text.") from None
    text = text.removeprefix("\ufeff")
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].rstrip("\r\n") != "---":
        raise NoteError("No YAML front matter: the file must start with a line '---'.")
    end = next((index for index in range(1, len(lines)) if lines[index].rstrip("\r\n") == "---"), None)
    if end is None:
        raise NoteError("The front matter is not closed by a line '---'.")
    try:
        meta = yaml.load("".join(lines[1:end]), Loader=_Loader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 2})" if mark is not None else ""
        raise NoteError(f"The front matter is not valid YAML{where}.") from None
    if not isinstance(meta, dict):
        raise NoteError("The front matter is not a YAML mapping of fields.")
    meta = _plain(meta)
    if meta.get("format", FORMAT) != FORMAT:
        raise NoteError(f"Unknown note format; this version reads {FORMAT}.")
    try:
        uuid.UUID(str(meta.get("id")))
    except ValueError:
        raise NoteError("The front matter needs the record's id (a UUID).") from None
    body = "".join(lines[end + 1 :])
    return Note(meta=meta, content=body[:-1] if body.endswith("\n") else body)
