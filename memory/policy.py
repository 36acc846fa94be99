"""Rules the lifecycle services, admission and governance share, each written once: how long a
note may be, what a reviewer's correction may say and how long it lives, how much work goes in
one chunk, and what a record becoming active sets off.

A leaf: it imports no service, so `memory.admission` (which the services import) can use it."""

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django.conf import settings

from memory.errors import ValidationFailed
from memory.models import NOTE_MAX_CHARS, MemoryKind, MemoryRecord, Status
from memory.tasks import embed_after_commit

# How much work goes in one piece where work is chunked: ids bound per statement where a list of
# ids becomes one placeholder each (SQLite's limit on parameters; it keeps a statement short
# elsewhere), rows read per fetch by an export.
CHUNK = 1000


def checked_note(note: Any, *, field: str = "note", required: str = "", limit: int = NOTE_MAX_CHARS) -> str:
    """A note as the history row keeps it (a transition's note, a revocation's, a forget request's
    or a cleared hold's reason): too long is an error, never cut short. `required`: the error's
    detail when a note is missing; such a note is stripped first, and anything but text counts as
    missing. `limit`: a shorter one, for a note that is later written into a longer one."""
    if required:
        note = note.strip() if isinstance(note, str) else ""
        if not note:
            raise ValidationFailed(required, errors={field: ["This field is required."]})
    if len(note) > limit:
        raise ValidationFailed(f"The {field} is too long.", errors={field: [f"At most {limit} characters."]})
    return note


def checked_correction(content: Any) -> str:
    """A reviewer's corrected content, stripped: empty or longer than a write may be is an error."""
    content = (content or "").strip()
    if not content:
        raise ValidationFailed("The correction is empty.", errors={"content": ["Content may not be empty."]})
    if len(content) > settings.MEMORY_MAX_CONTENT_CHARS:
        raise ValidationFailed(
            "The correction is too long.", errors={"content": [f"At most {settings.MEMORY_MAX_CONTENT_CHARS} characters."]}
        )
    return content


def correction_expires_at(kind: MemoryKind, now: datetime) -> datetime:
    """When a reviewer's correction expires (it names no TTL): the kind's default, never past its maximum."""
    return now + min(kind.default_ttl, kind.max_ttl)


def on_activation(records: Iterable[MemoryRecord]) -> None:
    """What a record becoming active sets off once the transaction commits (stored active, promoted,
    restored, or written as a correction): today its embedding for a semantic index. Records among
    `records` that are not active are left out."""
    embed_after_commit([record.pk for record in records if record.status == Status.ACTIVE])
