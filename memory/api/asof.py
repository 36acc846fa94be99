"""`as_of` in the agent API, for reviewers (contract: "Recall additions"): a record as it was at a
past moment (`GET /api/v1/memories/{id}/?as_of=<time>`) and what recall would have returned then
(`POST /api/v1/recall/` with `as_of`, `tenant` and `agent`). Reconstruction is `memory.asof`; this
module parses the requests, refuses agents and shapes the responses.

An agent token that sends `as_of` gets a 403 (a request never widens its own scope); a reviewer
reaches only the tenants they review (another tenant is a 404, like a missing one)."""

from collections.abc import Mapping
from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter
from rest_framework import serializers

from memory.actors import Actor
from memory.api.serializers import MemoryRecordSerializer, RecallResponseSerializer
from memory.asof import agent_in_scope, recall_as_of, record_as_of
from memory.errors import ScopeDenied, ValidationFailed
from memory.recall import recall_query
from memory.validation import CheckedDateTimeField, RecallQuerySerializer, validated

AS_OF_HELP = (
    "Reviewers only: the state at this moment (ISO 8601 with a zone, not in the future), reconstructed "
    "from history. Forgotten content is never shown; a record pruned since is 410, with `pruned_at` "
    "when its trace is kept."
)

AS_OF_PARAMETER = OpenApiParameter(
    "as_of",
    OpenApiTypes.DATETIME,
    OpenApiParameter.QUERY,
    required=False,
    description=AS_OF_HELP,
)

AS_OF_RESPONSE_HELP = (
    "The record. With ?as_of= (reviewers): the record as it was then, plus an `as_of` object: `time` (asked), "
    "`state_since` (when it entered that state), `transition` (e.g. review.promote), `content_withheld` ('forgotten' "
    "when content, hash and provenance strings are withheld because the record is forgotten now, else null), "
    "`status_now`. `last_used_at` is not kept in history and reads null."
)

AGENTS_REFUSED = "Only reviewers may ask about a past moment (as_of); an agent recalls and reads the present."


class AsOfStateSerializer(serializers.Serializer):
    time = serializers.DateTimeField(source="as_of", help_text="The moment asked about.")
    state_since = serializers.DateTimeField(help_text="When the record entered the state shown (its history row).")
    transition = serializers.CharField(help_text="The transition that made that state, e.g. review.promote.")
    content_withheld = serializers.CharField(
        allow_null=True,
        help_text="'forgotten' when the content, its hash and provenance strings "
        "are not shown (the record is forgotten now); else null.",
    )
    status_now = serializers.CharField(help_text="The record's status today.")


class MemoryRecordAsOfSerializer(MemoryRecordSerializer):
    """A record; with `?as_of=`, as it was then, plus `as_of` saying which state that is."""

    as_of = AsOfStateSerializer(required=False, help_text="Present only when the request gave as_of.")

    def to_representation(self, instance):
        data = super().to_representation(instance.record)
        if instance.content_withheld:
            data.update(content=None, content_hash=None)
            data["provenance"].update(uri=None, session_id=None, turn_id=None, tool=None, source_version=None)
        data["as_of"] = AsOfStateSerializer(instance).data
        return data


class PrunedSinceSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    pruned_at = serializers.DateTimeField()


class AsOfRecallSerializer(serializers.Serializer):
    time = serializers.DateTimeField(source="as_of")
    tenant = serializers.CharField(source="tenant.slug")
    agent = serializers.CharField(source="agent.slug")
    index = serializers.CharField(source="result.index", help_text="The lexical index whose recipe ranked the records.")
    candidates = serializers.IntegerField(
        source="result.candidates", help_text="Records of the scope that were active then (the ranking's collection)."
    )
    withheld = serializers.ListField(
        child=serializers.UUIDField(), help_text="Records that were candidates then and are forgotten now: never returned."
    )
    pruned = PrunedSinceSerializer(
        many=True,
        help_text="Records of the scope that were active then and have been "
        "pruned since (from their content-free trace): not ranked.",
    )
    may_miss_pruned = serializers.BooleanField(
        help_text="True when records pruned since could be missing: pruned "
        "before their traces were kept, or longer ago than the "
        "traces are kept."
    )
    notes = serializers.ListField(child=serializers.CharField(), help_text="How this reconstruction may differ from then.")


class RecallAsOfResponseSerializer(RecallResponseSerializer):
    """Recall's response; with `as_of` (reviewers), what recall would have returned then, plus `as_of`."""

    as_of = AsOfRecallSerializer(required=False, help_text="Present only when the request gave as_of.")


def refuse_agent_as_of(data: Any) -> None:
    if isinstance(data, Mapping) and data.get("as_of") is not None:
        raise ScopeDenied(AGENTS_REFUSED, errors={"as_of": ["Reviewers only."]})


def parse_as_of_param(raw: str) -> Any:
    """The `as_of` query parameter, checked like every date-time the API takes."""
    field = CheckedDateTimeField()
    try:
        return field.run_validation(raw)
    except serializers.ValidationError as exc:
        messages = [str(message) for message in exc.detail]
        messages.append("In a URL, write the zone as Z or encode '+' as %2B.")
        raise ValidationFailed("The as_of parameter is invalid.", errors={"as_of": messages}, title="Invalid request") from None


def record_as_of_data(actor: Actor, record_id, raw_as_of: str) -> dict:
    if actor.is_agent:
        raise ScopeDenied(AGENTS_REFUSED, errors={"as_of": ["Reviewers only."]})
    state = record_as_of(actor=actor, record_id=record_id, at=parse_as_of_param(raw_as_of))
    return MemoryRecordAsOfSerializer(state).data


REVIEWERS_RECALL_THE_PAST = (
    "Reviewers recall only as of a past moment: give as_of, tenant and agent. Recall in the "
    "present is an agent's, with its token."
)


def recall_as_of_data(actor: Actor, data: Any) -> dict:
    """A reviewer's recall body: without as_of it is a 403 as before (recall in the present is an
    agent's); with it, tenant and agent are required too (a reviewer has no token that fixes them)."""
    if not isinstance(data, Mapping) or data.get("as_of") is None:
        raise ScopeDenied(REVIEWERS_RECALL_THE_PAST, errors={"as_of": ["Required for reviewers."]})
    body = validated(RecallQuerySerializer, data, detail="The recall request is invalid: see errors.")
    missing = {
        name: ["Required for reviewers: recall as of a past time names its tenant and agent."]
        for name in ("tenant", "agent")
        if body.get(name) is None
    }
    if missing:
        raise ValidationFailed("The recall request is invalid: see errors.", errors=missing, title="Invalid request")
    agent = agent_in_scope(actor, tenant=body["tenant"], agent=body["agent"])
    reconstructed = recall_as_of(agent=agent, q=recall_query(body), at=body["as_of"])
    response = RecallResponseSerializer(reconstructed.result).data
    response["as_of"] = AsOfRecallSerializer(reconstructed).data
    return response
