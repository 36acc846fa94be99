"""One FilterSet for memory records, shared by the API list, the reviewer queues and selectors."""

import django_filters
from django import forms
from django_filters.fields import IsoDateTimeField

from memory.models import Authority, MemoryRecord, SourceType, Status, Trust
from memory.validation import checked_datetime


class CheckedIsoDateTimeField(IsoDateTimeField):
    """An ISO 8601 filter value within the range every date-time in the app keeps (see
    `memory.validation.checked_datetime`): an offset or year the database cannot take is a 400."""

    def to_python(self, value):
        value = super().to_python(value)
        if value is None:
            return None
        try:
            return checked_datetime(value)
        except ValueError as exc:
            raise forms.ValidationError(str(exc), code="invalid") from None


class CheckedIsoDateTimeFilter(django_filters.IsoDateTimeFilter):
    field_class = CheckedIsoDateTimeField


class MemoryRecordFilter(django_filters.FilterSet):
    status = django_filters.ChoiceFilter(choices=Status.choices)
    kind = django_filters.CharFilter(field_name="kind__name")
    subject = django_filters.CharFilter()
    purpose = django_filters.CharFilter()
    authority = django_filters.ChoiceFilter(choices=Authority.choices)
    trust = django_filters.ChoiceFilter(choices=Trust.choices)
    source_type = django_filters.ChoiceFilter(choices=SourceType.choices)
    tenant = django_filters.CharFilter(field_name="tenant__slug")
    agent = django_filters.CharFilter(field_name="agent__slug")
    created_after = CheckedIsoDateTimeFilter(field_name="created_at", lookup_expr="gte")
    created_before = CheckedIsoDateTimeFilter(field_name="created_at", lookup_expr="lt")
    ordering = django_filters.OrderingFilter(
        fields=(
            ("created_at", "created_at"),
            ("expires_at", "expires_at"),
            ("confirmed_at", "confirmed_at"),
            ("confidence", "confidence"),
            ("version", "version"),
        ),
    )

    class Meta:
        model = MemoryRecord
        fields = ["status", "kind", "subject", "purpose", "authority", "trust", "source_type", "tenant", "agent"]
