"""Webhook subscriptions (created, rotated and disabled here or through the API) and their
deliveries (read-only; dead ones can be replayed)."""

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from governance.events.delivery import replay
from governance.events.models import Delivery, WebhookSubscription
from governance.events.outbound import RefusedURL, checked_target
from governance.events.services import EVENT_TYPES, subscription_delete, subscription_rotate_secret
from governance.readonly_admin import ReadOnlyAdminMixin
from memory.outbox.write import sequence_events


class WebhookSubscriptionForm(forms.ModelForm):
    url = forms.URLField(max_length=2000, assume_scheme="https")

    class Meta:
        model = WebhookSubscription
        fields = "__all__"

    def clean_url(self) -> str:
        url = self.cleaned_data["url"]
        try:
            checked_target(url)
        except RefusedURL as exc:
            raise forms.ValidationError(str(exc)) from None
        return url

    def clean_events(self) -> list[str]:
        events = self.cleaned_data["events"]
        if not isinstance(events, list) or not events or set(events) - EVENT_TYPES - {"*"}:
            raise forms.ValidationError('A list of event types, or ["*"].')
        return events


@admin.register(WebhookSubscription)
class WebhookSubscriptionAdmin(admin.ModelAdmin):
    form = WebhookSubscriptionForm
    list_display = ("url", "tenant", "keeps_copies", "is_active", "failing_since", "disabled_at", "created_at")
    list_filter = ("is_active", "keeps_copies", "tenant")
    readonly_fields = ("cursor", "failing_since", "disabled_at", "previous_secret_until", "created_by", "created_at")
    fields = ("tenant", "url", "events", "subject", "kind", "keeps_copies", "is_active", *readonly_fields)
    actions = ["rotate_secret", "enable"]

    def delete_model(self, request: HttpRequest, obj: WebhookSubscription) -> None:
        subscription_delete(obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[WebhookSubscription]) -> None:
        for subscription in queryset:
            subscription_delete(subscription)

    def save_model(self, request, obj, form, change) -> None:
        created = not change
        if created:
            obj.created_by = request.user
            obj.cursor = sequence_events()  # events from now on, as through the API
        super().save_model(request, obj, form, change)
        if created:  # the secret is shown this once
            self.message_user(request, f"Signing secret (shown once): {obj.secret}", messages.WARNING)

    @admin.action(description="Rotate the signing secret (the old one keeps signing during the overlap)")
    def rotate_secret(self, request: HttpRequest, queryset: QuerySet[WebhookSubscription]) -> None:
        for subscription in queryset:
            subscription_rotate_secret(subscription)
            self.message_user(request, f"New secret for {subscription.url} (shown once): {subscription.secret}", messages.WARNING)

    @admin.action(description="Enable again (a disabled endpoint that works again)")
    def enable(self, request: HttpRequest, queryset: QuerySet[WebhookSubscription]) -> None:
        count = queryset.update(is_active=True, disabled_at=None, failing_since=None)
        self.message_user(request, f"{count} subscription(s) enabled.")


@admin.register(Delivery)
class DeliveryAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ("event", "subscription", "status", "attempts", "last_status_code", "last_error", "next_attempt_at")
    list_filter = ("status",)
    actions = ["replay_dead"]

    @admin.action(description="Replay dead deliveries")
    def replay_dead(self, request: HttpRequest, queryset: QuerySet[Delivery]) -> None:
        self.message_user(request, f"{replay(queryset)} dead deliveries pending again.")
