"""Request bodies of the memory API, defined once: each DRF serializer here is both the validator
and the OpenAPI schema of its body, so the two cannot disagree.

Every field is strict (a JSON string is a string, an integer an integer; no coercion), every string
refuses NUL characters and unpaired surrogates (DRF's CharField validators), every date-time must
carry a zone and lie within what both databases store and read back, and unknown fields are errors.
A body is validated completely, every mistake reported at once, before anything is written.
Scope (purpose, capabilities, supersession) is checked by the services, which know the credential.
"""

import math
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from django.utils.functional import cached_property
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.settings import api_settings

from memory.errors import ValidationFailed
from memory.fingerprints import is_subject_fingerprint
from memory.models import (
    AUTHORITY_FOR_SOURCE,
    IDEMPOTENCY_KEY_MAX_CHARS,
    NOTE_MAX_CHARS,
    PURPOSE_MAX_CHARS,
    SUBJECT_MAX_CHARS,
    Authority,
    MemoryKind,
    SourceKey,
    SourceType,
)
from memory.provenance.models import SOURCE_NAME_MAX_CHARS

# The range of date-times accepted anywhere: PostgreSQL stores far more, but Python's datetime stops
# at year 1 and 9999, and a value near either end can leave that range when shifted to UTC or moved
# by a TTL. Everything is stored in UTC.
EARLIEST = datetime(1900, 1, 1, tzinfo=UTC)
LATEST = datetime(9999, 1, 1, tzinfo=UTC)
TTL_MAX_SECONDS = 10**9
RECALL_QUERY_MAX_CHARS = 1000
DERIVED_FROM_MAX_ITEMS = 100
BATCH_MAX_ITEMS = 100
RECALL_KINDS_MAX_ITEMS = 20


MAX_UTC_OFFSET = timedelta(hours=14)  # the widest offset any real zone uses (Kiribati, +14:00)


def checked_datetime(value: datetime) -> datetime:
    """`value` (aware) in UTC, or ValueError when no database here could store and read it back."""
    offset = value.utcoffset()
    if offset is None:  # naive
        raise ValueError("Must include a time zone.")
    if abs(offset) > MAX_UTC_OFFSET:
        raise ValueError("The UTC offset must lie between -14:00 and +14:00.")
    try:
        utc = value.astimezone(UTC)
    except (OverflowError, ValueError):
        utc = None
    if utc is None or not EARLIEST <= utc < LATEST:
        raise ValueError(f"Must lie between {EARLIEST:%Y-%m-%d} and {LATEST:%Y-%m-%d} (UTC).")
    return utc


# --------------------------------------------------------------------------------------------
# strict fields


class StrictCharField(serializers.CharField):
    """A JSON string, not a number coerced to text. NUL and lone surrogates are refused (DRF)."""

    default_error_messages = {"invalid": "Must be a string."}

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


VERSION_MAX = 2**31 - 1  # a record's version column (PositiveIntegerField) holds no more


class StrictIntegerField(serializers.IntegerField):
    """An integer in JSON, not a numeric string, float or boolean: a version is never guessed."""

    default_error_messages = {"invalid": "Must be an integer."}

    def to_internal_value(self, data):
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictFloatField(serializers.FloatField):
    """A JSON number (integer or float), not a string or boolean; finite."""

    default_error_messages = {"invalid": "Must be a number."}

    def to_internal_value(self, data):
        if isinstance(data, bool) or not isinstance(data, (int, float)) or not math.isfinite(data):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictBooleanField(serializers.BooleanField):
    default_error_messages = {"invalid": "Must be true or false."}

    def to_internal_value(self, data):
        if not isinstance(data, bool):
            self.fail("invalid")
        return data


class StrictChoiceField(serializers.ChoiceField):
    """One of the choices; the error names the choices, never echoes what was sent."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.error_messages["invalid_choice"] = f"Must be one of: {', '.join(str(c) for c in self.choices)}."


class StrictUUIDField(serializers.UUIDField):
    """A record id as a JSON string (not an integer, which DRF would turn into a UUID)."""

    default_error_messages = {"invalid": "Must be a record id (UUID)."}

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class CheckedDateTimeField(serializers.DateTimeField):
    """An ISO 8601 date-time with a zone, within [EARLIEST, LATEST), returned in UTC."""

    default_error_messages = {
        "invalid": "Must be an ISO 8601 date-time with a time zone, e.g. 2026-11-29T10:00:00Z.",
        "naive": "Must include a time zone.",
    }

    def to_internal_value(self, value):
        if not isinstance(value, str):
            self.fail("invalid")
        try:
            parsed = parse_datetime(value)
        except ValueError:
            parsed = None
        if parsed is None:
            self.fail("invalid")
        if timezone.is_naive(parsed):
            self.fail("naive")
        try:
            return checked_datetime(parsed)
        except ValueError as exc:
            raise serializers.ValidationError(str(exc)) from None


class RejectUnknownFieldsMixin:
    """A body field the endpoint does not know is an error, not silently ignored: a typo like
    `expected_verison` must not pass as "no version given"."""

    def to_internal_value(self, data):
        unknown = sorted(set(data) - set(self.fields)) if isinstance(data, Mapping) else []
        errors = {name: ["Unknown field."] for name in unknown}
        try:
            value = super().to_internal_value(data)
        except serializers.ValidationError as exc:
            if not isinstance(exc.detail, dict):
                raise
            raise serializers.ValidationError({**exc.detail, **errors}) from None
        if errors:
            raise serializers.ValidationError(errors)
        return value


class StrictSerializer(RejectUnknownFieldsMixin, serializers.Serializer):
    """A body that must be a JSON object with only the declared fields. Marked for the schema
    (`additionalProperties: false`) by `config.schema.forbid_unknown_fields`."""

    default_error_messages = {"invalid": "Expected a JSON object."}
    forbids_unknown_fields = True


def note_field(**kwargs) -> StrictCharField:
    """The free-text note of a decision (history row, dedup proposal): one limit everywhere."""
    return StrictCharField(required=False, allow_blank=True, max_length=NOTE_MAX_CHARS, default="", **kwargs)


# --------------------------------------------------------------------------------------------
# the write body


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
    verified_key: SourceKey | None = None  # set once its signature verified (memory.provenance.verify)


def _optional_text(max_length: int, help_text: str) -> StrictCharField:
    return StrictCharField(required=False, allow_null=True, allow_blank=True, max_length=max_length, help_text=help_text)


class ProvenanceSerializer(StrictSerializer):
    source_type = StrictChoiceField(choices=SourceType.choices, help_text="Where the claim came from.")
    uri = _optional_text(1000, "The source's address (required for web_page and document).")
    session_id = _optional_text(200, "The writing session (a user turn or tool output needs it, or a uri).")
    turn_id = _optional_text(200, "The turn within the session.")
    tool = _optional_text(200, "The tool's name (required for tool_output).")
    source_version = _optional_text(200, "The version of the source read (required when signed: a source version is immutable).")
    observed_at = CheckedDateTimeField(required=False, allow_null=True, help_text="When the claim was observed at its source.")
    contaminated = StrictBooleanField(
        required=False,
        default=False,
        help_text="True when the writing session had read external content.",
    )
    # DRF's metaclass takes declared fields off the class, so this name does not hide Field.source
    # at run time; the stubs cannot know that.
    source = _optional_text(  # type: ignore[assignment]
        SOURCE_NAME_MAX_CHARS,
        "A registered source's name (signed provenance): the write then carries source_version, observed_at and the "
        "source's signature, and is refused unless the signature verifies.",
    )
    signature = _optional_text(
        200,
        "Base64 of the source's Ed25519 signature over the RFC 8785 canonical JSON of "
        '{"source", "source_version", "content_sha256", "subject", "observed_at"} (observed_at exactly as sent).',
    )

    verified = StrictBooleanField(
        required=False,
        allow_null=True,
        help_text="Ignored on a write (the server verifies the signature and says so on the record); accepted so "
        "that a record's provenance can be sent back as it was read.",
    )

    def to_internal_value(self, data):
        value = super().to_internal_value(data)
        # A signature covers observed_at as the source wrote it, not as parsed and shifted to UTC.
        value["observed_at_sent"] = data.get("observed_at") if isinstance(data.get("observed_at"), str) else ""
        return value

    def validate(self, attrs):
        attrs = {
            name: attrs.get(name) or ""
            for name in ("uri", "session_id", "turn_id", "tool", "source_version", "source", "signature")
        } | {
            "source_type": attrs["source_type"],
            "observed_at": attrs.get("observed_at"),
            "observed_at_sent": attrs.get("observed_at_sent") or "",
            "contaminated": attrs.get("contaminated", False),
        }
        errors = {}
        source_type = attrs["source_type"]
        if source_type in (SourceType.USER_TURN, SourceType.TOOL_OUTPUT) and not (attrs["session_id"] or attrs["uri"]):
            # Either field would do, so the error belongs to the provenance as a whole.
            errors[api_settings.NON_FIELD_ERRORS_KEY] = ["A user turn or tool output needs a session id or a URI."]
        if source_type in (SourceType.WEB_PAGE, SourceType.DOCUMENT) and not attrs["uri"]:
            errors["uri"] = ["A web page or document needs its URI."]
        if source_type == SourceType.TOOL_OUTPUT and not attrs["tool"]:
            errors["tool"] = ["Tool output needs the tool's name."]
        if errors:
            raise serializers.ValidationError(errors)
        return attrs


class KindField(StrictCharField):
    """A memory kind by name, returned as the MemoryKind; kinds are admin data, read from the
    database once per body."""

    def to_internal_value(self, data):
        name = super().to_internal_value(data)
        kinds = self.parent.kinds
        if name not in kinds:
            raise serializers.ValidationError(f"Unknown kind. Known kinds: {', '.join(sorted(kinds))}.")
        return kinds[name]


class MemoryWriteSerializer(StrictSerializer):
    """The body of `POST /api/v1/memories/` (and of each batch item). `validated_draft()` returns
    the WriteDraft the write service stores. Context: `now` (the write's time)."""

    kind = KindField(help_text="A memory kind (see GET /api/v1/kinds/ or the admin); it sets the TTL limits.")
    subject = StrictCharField(max_length=SUBJECT_MAX_CHARS, help_text="Who or what the memory is about, e.g. customer/acme.")
    purpose = StrictCharField(max_length=PURPOSE_MAX_CHARS, help_text="One of the purposes the token allows.")
    content = StrictCharField(
        trim_whitespace=False,
        max_length=settings.MEMORY_MAX_CONTENT_CHARS,
        help_text="The claim, as a distilled sentence (not a transcript).",
    )
    authority = StrictChoiceField(
        choices=Authority.choices, help_text="Whose authority the claim carries; must fit the source type."
    )
    confidence = StrictFloatField(min_value=0, max_value=1, help_text="The writer's confidence in [0, 1]; never verification.")
    provenance = ProvenanceSerializer()
    ttl_seconds = StrictIntegerField(
        required=False,
        allow_null=True,
        min_value=1,
        max_value=TTL_MAX_SECONDS,
        help_text="Time to live in seconds (or expires_at; neither = the kind's default TTL; at most the kind's maximum).",
    )
    expires_at = CheckedDateTimeField(required=False, allow_null=True, help_text="Instead of ttl_seconds: when it expires.")
    valid_from = CheckedDateTimeField(required=False, allow_null=True, help_text="When the claim starts to hold.")
    valid_to = CheckedDateTimeField(required=False, allow_null=True, help_text="When the claim stops holding.")
    supersedes = StrictUUIDField(required=False, allow_null=True, help_text="An active record of yours this one corrects.")
    supersedes_version = StrictIntegerField(
        required=False, allow_null=True, min_value=1, max_value=VERSION_MAX, help_text="Its current version."
    )
    derived_from = serializers.ListField(
        child=StrictUUIDField(),
        required=False,
        allow_null=True,
        allow_empty=False,
        max_length=DERIVED_FROM_MAX_ITEMS,
        help_text="Source records of a summary or merge (always reviewed).",
    )
    tenant = StrictCharField(required=False, allow_null=True, help_text="Optional; if given, must be the token's tenant.")
    agent = StrictCharField(required=False, allow_null=True, help_text="Optional; if given, must be the token's agent.")

    @cached_property
    def kinds(self) -> dict[str, MemoryKind]:
        """Known kinds by name: from the context (a batch reads them once), else the database."""
        kinds = self.context.get("kinds")
        return kinds if kinds is not None else {kind.name: kind for kind in MemoryKind.objects.all()}

    def validate_subject(self, subject: str) -> str:
        if is_subject_fingerprint(subject):
            raise serializers.ValidationError("This form is reserved for the fingerprints of forgotten subjects.")
        return subject

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        errors: dict[str, list[str]] = {}
        source_type = attrs["provenance"]["source_type"]
        authority = attrs["authority"]
        if authority not in AUTHORITY_FOR_SOURCE[source_type]:
            allowed = ", ".join(sorted(AUTHORITY_FOR_SOURCE[source_type]))
            errors["authority"] = [f"A {source_type} source cannot carry {authority} authority (allowed: {allowed})."]
        if not attrs["content"].strip():
            errors["content"] = ["Content may not be empty."]
        valid_from, valid_to = attrs.get("valid_from"), attrs.get("valid_to")
        if valid_from and valid_to and valid_to <= valid_from:
            errors["valid_to"] = ["Must be after valid_from."]
        if attrs.get("supersedes") is not None and attrs.get("supersedes_version") is None:
            errors["supersedes_version"] = ["Required with supersedes: the version you are correcting."]
        if attrs.get("supersedes") is None and attrs.get("supersedes_version") is not None:
            errors["supersedes_version"] = ["Only meaningful together with supersedes."]
        expires_at = self._expiry(attrs, errors)
        if errors:
            raise serializers.ValidationError(errors)
        attrs["expires_at"] = expires_at
        return attrs

    def _expiry(self, attrs, errors) -> datetime | None:
        now, kind = self.context["now"], attrs["kind"]
        ttl_seconds, expires_at = attrs.get("ttl_seconds"), attrs.get("expires_at")
        if ttl_seconds is not None and expires_at is not None:
            errors["ttl_seconds"] = ["Give ttl_seconds or expires_at, not both."]
            return None
        if expires_at is not None and expires_at <= now:
            errors["expires_at"] = ["Must be in the future."]
            return None
        ttl = (
            timedelta(seconds=ttl_seconds) if ttl_seconds is not None else (expires_at - now if expires_at else kind.default_ttl)
        )
        if ttl > kind.max_ttl:
            field_name = "expires_at" if expires_at is not None else "ttl_seconds"
            errors[field_name] = [f"Longer than the {kind.name} kind allows ({int(kind.max_ttl.total_seconds())} seconds)."]
            return None
        return expires_at if expires_at is not None else now + ttl

    def validated_draft(self) -> WriteDraft:
        data = self.validated_data
        return WriteDraft(
            kind=data["kind"],
            subject=data["subject"],
            purpose=data["purpose"],
            content=data["content"],
            authority=data["authority"],
            confidence=float(data["confidence"]),
            provenance=data["provenance"],
            expires_at=data["expires_at"],
            valid_from=data.get("valid_from"),
            valid_to=data.get("valid_to"),
            supersedes=data.get("supersedes"),
            supersedes_version=data.get("supersedes_version"),
            derived_from=list(dict.fromkeys(data.get("derived_from") or [])),
        )


class BatchItemSerializer(MemoryWriteSerializer):
    """One item of `POST /api/v1/memories/batch/`: a write body, plus its own idempotency key."""

    idempotency_key = StrictCharField(
        required=False,
        allow_null=True,
        min_length=1,
        max_length=IDEMPOTENCY_KEY_MAX_CHARS,
        help_text="Same meaning as the Idempotency-Key header of a single write.",
    )


@extend_schema_field(
    {
        "type": "array",
        "minItems": 1,
        "maxItems": BATCH_MAX_ITEMS,
        "items": {
            "type": "object",
            "description": "A write body (as MemoryWriteRequest) plus an optional idempotency_key; "
            "an item that is not valid is that item's 400 in the results.",
        },
    }
)
class BatchItemsField(serializers.ListField):
    """The batch's items: a list of 1 to BATCH_MAX_ITEMS JSON objects. Each object is validated on
    its own (a bad item is that item's 400, not the batch's)."""

    default_error_messages = {"not_an_object": "Item {index} is not a JSON object."}

    def __init__(self, **kwargs):
        super().__init__(child=serializers.JSONField(), min_length=1, max_length=BATCH_MAX_ITEMS, **kwargs)

    def to_internal_value(self, data):
        items = super().to_internal_value(data)
        for index, item in enumerate(items):
            if not isinstance(item, Mapping):
                self.fail("not_an_object", index=index)
        return items


class BatchWriteSerializer(StrictSerializer):
    items = BatchItemsField(help_text=f"At most {BATCH_MAX_ITEMS} write bodies; the results come back in the same order.")


def parse_write(
    data: Any,
    *,
    now: datetime,
    kinds: Mapping[str, MemoryKind] | None = None,
    serializer_class: type[MemoryWriteSerializer] = MemoryWriteSerializer,
) -> WriteDraft:
    """A raw write body (or batch item) as a WriteDraft, or ValidationFailed naming every field error."""
    serializer = serializer_class(data=data, context={"now": now, "kinds": kinds})
    if not serializer.is_valid():
        raise ValidationFailed("The memory was not stored: see errors.", errors=flatten_errors(serializer.errors))
    return serializer.validated_draft()


def parse_writes(
    items: list,
    *,
    now: datetime,
    kinds: Mapping[str, MemoryKind],
    serializer_class: type[MemoryWriteSerializer] = MemoryWriteSerializer,
) -> list[WriteDraft | ValidationFailed]:
    """`parse_write` for each item of a batch, in order (a draft, or the item's ValidationFailed),
    with one serializer whose fields are built once: DRF deep-copies a serializer's declared fields
    for every instance, which cost more than validating a batch item itself."""
    serializer = serializer_class(data=None, context={"now": now, "kinds": kinds})
    parsed: list[WriteDraft | ValidationFailed] = []
    for item in items:
        serializer.initial_data = item
        for computed in ("_validated_data", "_errors", "_data"):
            serializer.__dict__.pop(computed, None)
        if serializer.is_valid():
            parsed.append(serializer.validated_draft())
        else:
            parsed.append(ValidationFailed("The memory was not stored: see errors.", errors=flatten_errors(serializer.errors)))
    return parsed


# --------------------------------------------------------------------------------------------
# transitions and recall


class TransitionSerializer(StrictSerializer):
    expected_version = StrictIntegerField(
        min_value=1, max_value=VERSION_MAX, help_text="The version you decided on; a stale one is a 409."
    )
    note = note_field(help_text="Why; kept in the history row.")


class RecallQuerySerializer(StrictSerializer):
    """The body of `POST /api/v1/recall/`."""

    query = StrictCharField(
        required=False,
        allow_blank=True,
        max_length=RECALL_QUERY_MAX_CHARS,
        default="",
        help_text="What the agent needs, in words.",
    )
    purpose = StrictCharField(max_length=PURPOSE_MAX_CHARS, help_text="One of the purposes the token allows.")
    subject = StrictCharField(
        required=False, allow_null=True, max_length=SUBJECT_MAX_CHARS, help_text="Only memories about this subject."
    )
    kinds = serializers.ListField(
        child=StrictCharField(max_length=64),
        required=False,
        allow_null=True,
        max_length=RECALL_KINDS_MAX_ITEMS,
        help_text="Only these kinds.",
    )
    limit = StrictIntegerField(required=False, min_value=1, max_value=settings.MEMORY_RECALL_MAX_LIMIT, default=10)
    token_budget = StrictIntegerField(
        required=False,
        allow_null=True,
        min_value=1,
        max_value=1_000_000,
        help_text="Fill at most this many (estimated) tokens, in rank order.",
    )
    min_relevance = StrictFloatField(
        required=False,
        allow_null=True,
        min_value=0,
        max_value=1,
        help_text="Leave out items whose relevance is under this (0 to 1; 0 keeps every item). "
        "Default: the serving index's recipe. The response counts them in below_floor.",
    )
    tenant = StrictCharField(
        required=False, allow_null=True, help_text="Agents: optional, must be the token's tenant. Reviewers: required with as_of."
    )
    agent = StrictCharField(
        required=False, allow_null=True, help_text="Agents: optional, must be the token's agent. Reviewers: required with as_of."
    )
    as_of = CheckedDateTimeField(
        required=False,
        allow_null=True,
        help_text="Reviewers only (with tenant and agent): what recall would have returned at "
        "this moment, reconstructed from history. An agent token sending it gets 403.",
    )

    def validate_kinds(self, kinds):
        if not kinds:
            return None
        unknown = set(kinds) - set(MemoryKind.objects.filter(name__in=kinds).values_list("name", flat=True))
        if unknown:
            raise serializers.ValidationError(f"Unknown kinds: {', '.join(sorted(unknown))}.")
        return list(dict.fromkeys(kinds))


def validated(serializer_class: type[serializers.Serializer], data: Any, *, detail: str, **context) -> dict:
    """`data` validated by `serializer_class`, or ValidationFailed ("Invalid request") with every
    field error."""
    serializer = serializer_class(data=data, context=context)
    if not serializer.is_valid():
        raise ValidationFailed(detail, errors=flatten_errors(serializer.errors), title="Invalid request")
    return serializer.validated_data


def flatten_errors(detail, path: str = "") -> dict[str, list[str]]:
    """DRF's nested error structure as `{"field.sub": ["message", ...]}`."""
    if isinstance(detail, dict):
        flat: dict[str, list[str]] = {}
        for key, value in detail.items():
            flat.update(flatten_errors(value, f"{path}.{key}" if path else str(key)))
        return flat
    if isinstance(detail, list) and any(isinstance(item, (dict, list)) for item in detail):
        flat = {}
        for index, item in enumerate(detail):
            flat.update(flatten_errors(item, f"{path}.{index}" if path else str(index)))
        return flat
    messages = detail if isinstance(detail, list) else [detail]
    # A nested object's own error (e.g. provenance is not an object) is named after the object.
    name = path.removesuffix(".non_field_errors") or "non_field_errors"
    return {name: [str(message) for message in messages]}
