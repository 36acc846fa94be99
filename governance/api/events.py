"""Events out through the API: webhook subscriptions (`/api/v1/webhooks/`, reviewers who may add
webhook subscriptions), the event feed (`GET /api/v1/events/?after=CURSOR`, agents and reviewers),
and a copy-keeping subscriber's acknowledgement of a forget request, signed like a delivery."""

import json

from django.db.models import Q, QuerySet
from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, status
from rest_framework.decorators import action
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView
from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError

from governance.api.common import ScopedViewSet, tenant_for
from governance.events.acknowledgements import acknowledge
from governance.events.models import WebhookSubscription
from governance.events.services import (
    EVENT_TYPES,
    subscription_create,
    subscription_delete,
    subscription_in_scope,
    subscription_rotate_secret,
)
from governance.forget.models import ForgetRequest
from memory.actors import Actor
from memory.api.authentication import permitted_actor
from memory.api.permissions import IsAgentOrReviewer, IsReviewer
from memory.api.views import PROBLEMS
from memory.errors import Gone, RecordNotFound, ScopeDenied, ValidationFailed
from memory.outbox.models import Event, EventLog
from memory.outbox.payload import event_payload
from memory.outbox.write import sequence_events
from memory.validation import RejectUnknownFieldsMixin, StrictCharField

FEED_PAGE_MAX = 500


class WebhookInputSerializer(RejectUnknownFieldsMixin, serializers.Serializer):
    tenant = StrictCharField(required=False, help_text="Slug; optional if you review one tenant.")
    url = serializers.URLField(max_length=2000)
    events = serializers.ListField(child=StrictCharField(max_length=32), min_length=1, max_length=len(EVENT_TYPES) + 1)
    keeps_copies = serializers.BooleanField(default=False)
    subject = StrictCharField(required=False, default="", allow_blank=True)
    kind = StrictCharField(required=False, default="", allow_blank=True, max_length=64)


class WebhookSerializer(serializers.ModelSerializer):
    tenant: serializers.SlugRelatedField = serializers.SlugRelatedField(slug_field="slug", read_only=True)

    class Meta:
        model = WebhookSubscription
        fields = ["id", "tenant", "url", "events", "subject", "kind", "keeps_copies", "is_active", "disabled_at", "created_at"]


class WebhookCreatedSerializer(WebhookSerializer):
    secret = serializers.CharField(help_text="The Standard Webhooks signing secret (whsec_...), shown only in this answer.")

    class Meta(WebhookSerializer.Meta):
        fields = [*WebhookSerializer.Meta.fields, "secret"]


class MayManageWebhooks(BasePermission):
    """A reviewer with the `governance.add_webhooksubscription` permission (or a superuser)."""

    message = "Only a reviewer allowed to manage webhooks may do this."

    def has_permission(self, request, view) -> bool:
        return IsReviewer().has_permission(request, view) and request.user.has_perm("governance.add_webhooksubscription")


class WebhookViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, ScopedViewSet):
    serializer_class = WebhookSerializer
    permission_classes = [MayManageWebhooks]
    queryset = WebhookSubscription.objects.none()

    def scoped(self, actor: Actor, params: dict) -> QuerySet[WebhookSubscription]:
        return actor.in_tenants(WebhookSubscription.objects.select_related("tenant")).order_by("created_at")

    @extend_schema(
        summary="Subscribe a URL to a tenant's events (its signing secret is in this answer only)",
        request=WebhookInputSerializer,
        responses={201: WebhookCreatedSerializer, **{c: PROBLEMS[c] for c in (400, 401, 403, 404, 429)}},
    )
    def create(self, request: Request) -> Response:
        actor = permitted_actor(request)
        body = WebhookInputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        subscription = subscription_create(
            actor=actor,
            tenant=tenant_for(actor, data),
            url=data["url"],
            events=data["events"],
            keeps_copies=data["keeps_copies"],
            subject=data["subject"],
            kind=data["kind"],
        )
        return Response(WebhookCreatedSerializer(subscription).data, status=status.HTTP_201_CREATED)

    @extend_schema(summary="Delete a webhook subscription", responses={204: None, **{c: PROBLEMS[c] for c in (401, 403, 404)}})
    def destroy(self, request: Request, pk: str) -> Response:
        subscription_delete(subscription_in_scope(permitted_actor(request), pk))
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(
        summary="Rotate the signing secret: the old one keeps signing beside the new one during the overlap",
        request=None,
        responses={200: WebhookCreatedSerializer, **{c: PROBLEMS[c] for c in (401, 403, 404)}},
    )
    @action(detail=True, methods=["post"])
    def rotate(self, request: Request, pk: str) -> Response:
        subscription = subscription_rotate_secret(subscription_in_scope(permitted_actor(request), pk))
        return Response(WebhookCreatedSerializer(subscription).data)


class EventFeedQuerySerializer(serializers.Serializer):
    after = serializers.IntegerField(required=False, min_value=0, help_text="The `next` of the previous page.")
    limit = serializers.IntegerField(required=False, min_value=1, max_value=FEED_PAGE_MAX, default=100)


class EventFeedSerializer(serializers.Serializer):
    events = serializers.ListField(child=serializers.DictField())
    next = serializers.IntegerField()


def events_in_scope(actor: Actor) -> QuerySet[Event]:
    """An agent: its own records' events in the purposes its token allows, and its forget events;
    a reviewer: their tenants'."""
    events = Event.objects.select_related("tenant", "kind")
    credential = actor.credential
    if credential is not None:
        return events.filter(tenant_id=credential.agent.tenant_id, agent_id=credential.agent_id).filter(
            Q(purpose__in=credential.purposes) | Q(record_id__isnull=True)
        )
    return actor.in_tenants(events)


class EventFeedView(APIView):
    permission_classes = [IsAgentOrReviewer]

    @extend_schema(
        summary="Events after a cursor, oldest first (410 when the cursor is older than the retention)",
        parameters=[EventFeedQuerySerializer],
        responses={200: EventFeedSerializer, 410: PROBLEMS[404], **{c: PROBLEMS[c] for c in (400, 401, 403, 429)}},
    )
    def get(self, request: Request) -> Response:
        actor = permitted_actor(request)
        query = EventFeedQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        last = sequence_events()
        pruned_through = EventLog.objects.filter(pk=1).values_list("pruned_through", flat=True).first() or 0
        after = query.validated_data.get("after", pruned_through)
        if after < pruned_through:
            raise Gone("The cursor is older than the event feed's retention: start again without `after`.", code="cursor_expired")
        limit = query.validated_data["limit"]
        page = list(events_in_scope(actor).filter(position__gt=after, position__lte=last).order_by("position")[:limit])
        following = page[-1].position if len(page) == limit else max(after, last)
        return Response({"events": [event_payload(event) for event in page], "next": following})


class AcknowledgementInputSerializer(RejectUnknownFieldsMixin, serializers.Serializer):
    webhook = serializers.UUIDField()


def acknowledge_signed(request: Request, forget_request_id: str) -> ForgetRequest:
    """A subscriber's signed acknowledgement of a forget request: the body `{"webhook": id}` signed
    with the subscription's secret like a delivery (Standard Webhooks headers)."""
    raw = request.body.decode("utf-8", errors="replace")
    try:
        data = json.loads(raw)
    except ValueError:
        raise ValidationFailed("The body must be JSON.", errors={"webhook": ["Required."]}) from None
    body = AcknowledgementInputSerializer(data=data if isinstance(data, dict) else {})
    body.is_valid(raise_exception=True)
    subscription = WebhookSubscription.objects.filter(pk=body.validated_data["webhook"], keeps_copies=True).first()
    forget_request = (
        ForgetRequest.objects.filter(pk=forget_request_id, tenant_id=subscription.tenant_id).first() if subscription else None
    )
    if subscription is None or forget_request is None:
        raise RecordNotFound("No such forget request for this webhook.")
    headers = {name: request.headers.get(name, "") for name in ("webhook-id", "webhook-timestamp", "webhook-signature")}
    for secret in subscription.signing_secrets(timezone.now()):
        try:
            Webhook(secret).verify(raw, headers, json_parse=False)
            break
        except WebhookVerificationError:
            continue
    else:
        raise ScopeDenied("The acknowledgement is not signed with this webhook's secret.")
    if not acknowledge(forget_request, subscription):
        raise RecordNotFound("No such forget request for this webhook.")
    forget_request.refresh_from_db()
    return forget_request
