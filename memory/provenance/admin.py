"""Admin: registered sources (their policy, and a new key by rotation) and their keys (read-only:
a key's validity changes only by rotating, and by revoking it as a source, an action governance
adds to `SourceKeyAdmin` because it is a revocation). Every change goes through
`memory.provenance.registry`, so it leaves the same history rows as the management command."""

from datetime import timedelta

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.http import HttpRequest
from simple_history.admin import SimpleHistoryAdmin

from memory.errors import DomainError
from memory.models import MemoryKind, RegisteredSource, SourceKey
from memory.provenance.keys import PUBLIC_KEY_MAX_CHARS, InvalidPublicKey, read_public_key
from memory.provenance.registry import (
    MAX_ROTATION_OVERLAP,
    ROTATION_OVERLAP,
    checked_source_name,
    source_register,
    source_rotate,
)


class RegisteredSourceForm(forms.ModelForm):
    public_key = forms.CharField(
        required=False,
        max_length=PUBLIC_KEY_MAX_CHARS,
        widget=forms.Textarea(attrs={"rows": 3, "cols": 70}),
        help_text="Ed25519 public key, PEM or raw base64. Required for a new source; on an existing one it "
        "rotates to this key (the old one keeps verifying for the overlap).",
    )
    overlap_hours = forms.IntegerField(
        min_value=0,
        max_value=int(MAX_ROTATION_OVERLAP.total_seconds() // 3600),
        initial=int(ROTATION_OVERLAP.total_seconds() // 3600),
        help_text="On rotation: hours the previous key keeps verifying.",
    )
    auto_admit_kinds = forms.MultipleChoiceField(
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="Kinds whose verified claims from this source are admitted without review.",
    )

    class Meta:
        model = RegisteredSource
        fields = ["tenant", "name", "description", "authority", "auto_admit_kinds"]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["auto_admit_kinds"].choices = [(name, name) for name in MemoryKind.objects.values_list("name", flat=True)]
        if self.instance.pk:
            for name in ("tenant", "name"):
                self.fields[name].disabled = True

    def clean_name(self) -> str:
        try:
            return checked_source_name(self.cleaned_data["name"])
        except DomainError as exc:
            raise ValidationError(exc.detail) from None

    def clean_public_key(self) -> str:
        text = self.cleaned_data["public_key"]
        if not text.strip():
            if not self.instance.pk:
                raise ValidationError("A new source needs its public key.")
            return ""
        try:
            read_public_key(text)
        except InvalidPublicKey as exc:
            raise ValidationError(str(exc)) from None
        return text


class SourceKeyInline(admin.TabularInline):
    model = SourceKey
    extra = 0
    fields = readonly_fields = ("fingerprint", "valid_from", "valid_until", "revoked_at", "state")
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    @admin.display(description="state now")
    def state(self, key: SourceKey) -> str:
        return SourceKey.State(key.state).label


@admin.register(RegisteredSource)
class RegisteredSourceAdmin(SimpleHistoryAdmin):
    form = RegisteredSourceForm
    list_display = ["name", "tenant", "authority", "auto_admit_kinds", "created_at"]
    list_filter = ["tenant", "authority"]
    search_fields = ["name", "tenant__slug"]
    list_select_related = ["tenant"]
    inlines = [SourceKeyInline]

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        return False  # its keys verified records: revoke a key instead

    def save_model(self, request: HttpRequest, obj: RegisteredSource, form, change: bool) -> None:
        label = f"user:{request.user.get_username()}"
        data = form.cleaned_data
        try:
            if not change:
                source, _, _ = source_register(
                    tenant=data["tenant"],
                    name=data["name"],
                    public_key=data["public_key"],
                    authority=data["authority"],
                    auto_admit_kinds=data["auto_admit_kinds"],
                    actor_label=label,
                )
                obj.pk, obj._state.adding = source.pk, False  # the admin's redirect and log name the row registered
                return
            obj.auto_admit_kinds = sorted(set(data["auto_admit_kinds"]))
            obj._change_reason, obj._history_actor = "admin.source_policy", label
            obj.save()
            if data["public_key"]:
                key = source_rotate(
                    source=obj, public_key=data["public_key"], actor_label=label, overlap=timedelta(hours=data["overlap_hours"])
                )
                messages.success(request, f"Rotated {obj} to key {key.fingerprint}.")
        except DomainError as exc:
            messages.error(request, exc.detail)


@admin.register(SourceKey)
class SourceKeyAdmin(admin.ModelAdmin):
    list_display = ["__str__", "source", "valid_from", "valid_until", "revoked_at"]
    list_filter = ["source__tenant"]
    search_fields = ["fingerprint", "source__name", "source__tenant__slug"]
    list_select_related = ["source__tenant"]
    fields = readonly_fields = ("source", "public_key", "fingerprint", "valid_from", "valid_until", "revoked_at", "created_at")

    def has_add_permission(self, request: HttpRequest, obj=None) -> bool:
        return False  # a key comes by registering or rotating its source

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        return False
