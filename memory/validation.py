"""Validation of a memory write: shape, provenance, authority against source, TTL against the kind.
It gathers every field error before raising, so a client sees all its mistakes at once. Scope
(purpose, capabilities, supersession) is checked by the service, which knows the credential."""

import math
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Mapping

from django.conf import settings
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from memory.errors import ValidationFailed
from memory.models import AUTHORITY_FOR_SOURCE, Authority, MemoryKind, SourceType

PROVENANCE_TEXT_FIELDS = {"uri": 1000, "session_id": 200, "turn_id": 200, "tool": 200, "source_version": 200}
KNOWN_FIELDS = {
    "kind", "subject", "purpose", "content", "authority", "confidence", "provenance", "ttl_seconds",
    "expires_at", "valid_from", "valid_to", "supersedes", "supersedes_version", "derived_from",
    "tenant", "agent",
}


@dataclass
class WriteDraft:
    kind: MemoryKind
    subject: str
    purpose: str
    content: str
    authority: str
    confidence: float
    provenance: dict[str, Any]
    expires_at: datetime
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    supersedes: uuid.UUID | None = None
    supersedes_version: int | None = None
    derived_from: list[uuid.UUID] = field(default_factory=list)


class _Errors:
    def __init__(self) -> None:
        self.by_field: dict[str, list[str]] = {}

    def add(self, name: str, message: str) -> None:
        self.by_field.setdefault(name, []).append(message)

    def __bool__(self) -> bool:
        return bool(self.by_field)


def _text(data: Mapping, name: str, errors: _Errors, *, max_length: int, required: bool = True) -> str:
    value = data.get(name)
    if value is None or value == "":
        if required:
            errors.add(name, "This field is required.")
        return ""
    if not isinstance(value, str):
        errors.add(name, "Must be a string.")
        return ""
    value = value.strip()
    if required and not value:
        errors.add(name, "May not be blank.")
    if len(value) > max_length:
        errors.add(name, f"At most {max_length} characters.")
    return value


def _datetime(data: Mapping, name: str, errors: _Errors, *, path: str | None = None) -> datetime | None:
    value = data.get(name)
    if value in (None, ""):
        return None
    if isinstance(value, datetime):
        parsed = value
    elif isinstance(value, str):
        try:
            parsed = parse_datetime(value)
        except ValueError:
            parsed = None
    else:
        parsed = None
    if parsed is None:
        errors.add(path or name, "Must be an ISO 8601 date-time.")
        return None
    if timezone.is_naive(parsed):
        errors.add(path or name, "Must include a time zone.")
        return None
    return parsed


def _uuid(value: Any, name: str, errors: _Errors) -> uuid.UUID | None:
    try:
        return uuid.UUID(str(value))
    except (ValueError, AttributeError, TypeError):
        errors.add(name, "Must be a record id (UUID).")
        return None


def _int(value: Any, name: str, errors: _Errors) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int):
        errors.add(name, "Must be an integer.")
        return None
    return value


def _provenance(data: Mapping, errors: _Errors) -> dict[str, Any]:
    raw = data.get("provenance")
    if raw is None:
        errors.add("provenance", "Provenance is required: where did this claim come from?")
        return {}
    if not isinstance(raw, Mapping):
        errors.add("provenance", "Must be an object.")
        return {}
    source_type = raw.get("source_type")
    if source_type in (None, ""):
        errors.add("provenance.source_type", "This field is required.")
    elif source_type not in SourceType.values:
        errors.add("provenance.source_type", f"Must be one of: {', '.join(SourceType.values)}.")
    result: dict[str, Any] = {"source_type": source_type}
    for name, max_length in PROVENANCE_TEXT_FIELDS.items():
        value = raw.get(name)
        if value is None:
            result[name] = ""
        elif not isinstance(value, str):
            errors.add(f"provenance.{name}", "Must be a string or null.")
        elif len(value) > max_length:
            errors.add(f"provenance.{name}", f"At most {max_length} characters.")
        else:
            result[name] = value
    if source_type in (SourceType.USER_TURN, SourceType.TOOL_OUTPUT) and not (result.get("session_id") or result.get("uri")):
        errors.add("provenance.session_id", "A user turn or tool output needs a session id or a URI.")
    if source_type in (SourceType.WEB_PAGE, SourceType.DOCUMENT) and not result.get("uri"):
        errors.add("provenance.uri", "A web page or document needs its URI.")
    if source_type == SourceType.TOOL_OUTPUT and not result.get("tool"):
        errors.add("provenance.tool", "Tool output needs the tool's name.")
    result["observed_at"] = _datetime(raw, "observed_at", errors, path="provenance.observed_at")
    contaminated = raw.get("contaminated", False)
    if not isinstance(contaminated, bool):
        errors.add("provenance.contaminated", "Must be true or false.")
        contaminated = True  # never let a malformed flag read as clean
    result["contaminated"] = contaminated
    return result


def parse_write(data: Any, *, kinds: Mapping[str, MemoryKind], now: datetime) -> WriteDraft:
    """Turn a raw write body into a WriteDraft, or raise ValidationFailed with every field error."""
    errors = _Errors()
    if not isinstance(data, Mapping):
        raise ValidationFailed("The body must be a JSON object.", errors={"non_field_errors": ["Expected an object."]})
    for name in sorted(set(data) - KNOWN_FIELDS):
        errors.add(name, "Unknown field.")

    kind = None
    kind_name = data.get("kind")
    if kind_name in (None, ""):
        errors.add("kind", "This field is required.")
    elif not isinstance(kind_name, str) or kind_name not in kinds:
        errors.add("kind", f"Unknown kind. Known kinds: {', '.join(sorted(kinds))}.")
    else:
        kind = kinds[kind_name]

    subject = _text(data, "subject", errors, max_length=200)
    purpose = _text(data, "purpose", errors, max_length=100)
    max_chars = settings.MEMORY_MAX_CONTENT_CHARS
    content = data.get("content")
    if content is None or (isinstance(content, str) and not content.strip()):
        errors.add("content", "Content may not be empty.")
        content = ""
    elif not isinstance(content, str):
        errors.add("content", "Must be a string.")
        content = ""
    elif len(content) > max_chars:
        errors.add("content", f"At most {max_chars} characters.")

    authority = data.get("authority")
    if authority in (None, ""):
        errors.add("authority", "This field is required.")
    elif authority not in Authority.values:
        errors.add("authority", f"Must be one of: {', '.join(Authority.values)}.")

    confidence = data.get("confidence")
    if isinstance(confidence, bool) or not isinstance(confidence, (int, float)) or not math.isfinite(confidence):
        errors.add("confidence", "Must be a number between 0 and 1.")
        confidence = 0.0
    elif not 0 <= confidence <= 1:
        errors.add("confidence", "Must be between 0 and 1.")

    provenance = _provenance(data, errors)
    source_type = provenance.get("source_type")
    if authority in Authority.values and source_type in SourceType.values:
        if authority not in AUTHORITY_FOR_SOURCE[source_type]:
            allowed = ", ".join(sorted(AUTHORITY_FOR_SOURCE[source_type]))
            errors.add("authority", f"A {source_type} source cannot carry {authority} authority (allowed: {allowed}).")

    expires_at = _expiry(data, kind, now, errors)
    valid_from = _datetime(data, "valid_from", errors)
    valid_to = _datetime(data, "valid_to", errors)
    if valid_from and valid_to and valid_to <= valid_from:
        errors.add("valid_to", "Must be after valid_from.")

    supersedes = supersedes_version = None
    if data.get("supersedes") is not None:
        supersedes = _uuid(data["supersedes"], "supersedes", errors)
        if data.get("supersedes_version") is None:
            errors.add("supersedes_version", "Required with supersedes: the version you are correcting.")
        else:
            supersedes_version = _int(data["supersedes_version"], "supersedes_version", errors)
    elif data.get("supersedes_version") is not None:
        errors.add("supersedes_version", "Only meaningful together with supersedes.")

    derived_from: list[uuid.UUID] = []
    raw_sources = data.get("derived_from")
    if raw_sources is not None:
        if not isinstance(raw_sources, list) or not raw_sources:
            errors.add("derived_from", "Must be a non-empty list of record ids.")
        else:
            derived_from = [u for u in (_uuid(v, "derived_from", errors) for v in raw_sources) if u]
            derived_from = list(dict.fromkeys(derived_from))

    if errors:
        raise ValidationFailed("The memory was not stored: see errors.", errors=errors.by_field)
    return WriteDraft(
        kind=kind, subject=subject, purpose=purpose, content=content, authority=authority,
        confidence=float(confidence), provenance=provenance, expires_at=expires_at,
        valid_from=valid_from, valid_to=valid_to, supersedes=supersedes,
        supersedes_version=supersedes_version, derived_from=derived_from,
    )


def _expiry(data: Mapping, kind: MemoryKind | None, now: datetime, errors: _Errors) -> datetime | None:
    ttl_seconds = data.get("ttl_seconds")
    expires_at = _datetime(data, "expires_at", errors)
    if ttl_seconds is not None and data.get("expires_at") is not None:
        errors.add("ttl_seconds", "Give ttl_seconds or expires_at, not both.")
        return None
    ttl: timedelta | None = None
    if ttl_seconds is not None:
        if isinstance(ttl_seconds, bool) or not isinstance(ttl_seconds, (int, float)) or not math.isfinite(ttl_seconds):
            errors.add("ttl_seconds", "Must be a number of seconds.")
            return None
        if ttl_seconds <= 0:
            errors.add("ttl_seconds", "Must be positive.")
            return None
        if ttl_seconds > 1e9:
            errors.add("ttl_seconds", "Too large.")
            return None
        ttl = timedelta(seconds=ttl_seconds)
    elif expires_at is not None:
        if expires_at <= now:
            errors.add("expires_at", "Must be in the future.")
            return None
        ttl = expires_at - now
    if kind is None:
        return None
    if ttl is None:
        ttl = kind.default_ttl
    if ttl > kind.max_ttl:
        field_name = "ttl_seconds" if ttl_seconds is not None else "expires_at"
        errors.add(field_name, f"Longer than the {kind.name} kind allows ({int(kind.max_ttl.total_seconds())} seconds).")
        return None
    return expires_at if expires_at is not None else now + ttl
