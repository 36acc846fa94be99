"""Forms of the reviewer UI. They check the shape of what the browser sent (a version, a note, a
correction, a selection); every decision itself is made by the lifecycle services."""

import uuid
from typing import cast

from django import forms
from django.conf import settings
from django.core.validators import MaxLengthValidator
from django.http import QueryDict

from memory.models import NOTE_MAX_CHARS, SUBJECT_MAX_CHARS, Tenant


class DecisionForm(forms.Form):
    """One decision on one record, at the version the reviewer saw."""

    version = forms.IntegerField(min_value=1, widget=forms.HiddenInput)
    note = forms.CharField(max_length=NOTE_MAX_CHARS, required=False, strip=True)


class SupersedeForm(DecisionForm):
    """A reviewer's correction: the new content replaces the record's."""

    content = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), strip=True)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # Read per form, not at import, so the limit follows the setting.
        limit = settings.MEMORY_MAX_CONTENT_CHARS
        content = self.fields["content"]
        content.max_length = limit
        content.validators.append(MaxLengthValidator(limit))
        content.widget.attrs["maxlength"] = str(limit)


class TamperedSelection(Exception):
    """The selection names something no page of ours renders: not a uuid."""


class BulkDecisionForm(forms.Form):
    """Approve or reject several quarantined records; each selected row carries its own version
    in a field named `version-<id>`, so every decision is still checked against what was seen."""

    decision = forms.ChoiceField(choices=[("approve", "Approve"), ("reject", "Reject")])
    note = forms.CharField(max_length=NOTE_MAX_CHARS, required=False, strip=True)

    def selected_items(self) -> list[tuple[uuid.UUID, int | None]]:
        """(record id, version seen) per selected row, in the order sent; a missing or malformed
        version is None (reported per row). Raises TamperedSelection for an id that is not a uuid."""
        items: list[tuple[uuid.UUID, int | None]] = []
        seen: set[uuid.UUID] = set()
        data = cast(QueryDict, self.data)  # the view binds request.POST
        for raw_id in data.getlist("selected"):
            try:
                record_id = uuid.UUID(raw_id)
            except (ValueError, TypeError, AttributeError) as exc:
                raise TamperedSelection(raw_id) from exc
            if record_id in seen:
                continue
            seen.add(record_id)
            items.append((record_id, _positive_int(data.get(f"version-{raw_id}"))))
        return items


def _positive_int(raw) -> int | None:
    try:
        value = int(raw)
    except (TypeError, ValueError):
        return None
    return value if value >= 1 else None


class ForgetRequestForm(forms.Form):
    """File a forget request for one subject of a tenant the reviewer is assigned to. The view
    shows what will be forgotten first; only the confirmation step applies it."""

    tenant: "forms.ModelChoiceField[Tenant]" = forms.ModelChoiceField(queryset=None, to_field_name="slug", empty_label=None)
    subject = forms.CharField(max_length=SUBJECT_MAX_CHARS, strip=True, help_text="Exactly as stored, e.g. customer/acme.")
    reason = forms.CharField(
        max_length=NOTE_MAX_CHARS,
        strip=True,
        widget=forms.TextInput,
        help_text='Why, for the audit trail, e.g. "erasure request #123".',
    )

    def __init__(self, *args, tenants, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["tenant"].queryset = tenants

    def tenant_out_of_scope(self) -> bool:
        """True when the posted tenant is not one offered: tampering, answered with a 404."""
        return any(error.code == "invalid_choice" for error in self.errors.as_data().get("tenant", []))
