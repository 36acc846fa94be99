"""Admin forms for the retention policy: durations edited as a number of days (not Django's raw
"60 00:00:00" duration text) and the auto-admitted authorities as checkboxes (not a JSON list)."""

from datetime import timedelta
from decimal import Decimal, InvalidOperation

from django import forms
from django.core.exceptions import ValidationError

from memory.models import Authority, MemoryKind

SECONDS_PER_DAY = 86400


def days_text(value: timedelta) -> str:
    """A duration as days without trailing zeros: 60 days -> "60", 12 hours -> "0.5"."""
    days = Decimal(int(value.total_seconds())) / SECONDS_PER_DAY
    return f"{days.quantize(Decimal('0.000001')).normalize():f}"


class DaysInput(forms.NumberInput):
    """A number input for days; fractions allowed (0.5 = 12 hours). The unit is in the label."""

    def __init__(self, attrs=None):
        super().__init__({"step": "any", "min": "0", "class": "vDaysField", **(attrs or {})})


class DaysField(forms.Field):
    """A duration entered as a (possibly fractional) number of days, kept to the second."""

    widget = DaysInput
    default_error_messages = {
        "invalid": "Enter a number of days, e.g. 30 or 0.5.",
        "not_positive": "Enter more than 0 days.",
        "too_long": "Enter at most %(max)s days.",
    }
    MAX_DAYS = 100 * 365  # well inside timedelta and every database's interval

    def prepare_value(self, value):
        return days_text(value) if isinstance(value, timedelta) else value

    def to_python(self, value) -> timedelta | None:
        if value in self.empty_values:
            return None
        if isinstance(value, timedelta):
            return value
        try:
            days = Decimal(str(value).strip().replace(",", "."))
        except InvalidOperation:
            raise ValidationError(self.error_messages["invalid"], code="invalid") from None
        if not days.is_finite():
            raise ValidationError(self.error_messages["invalid"], code="invalid")
        if days > self.MAX_DAYS:
            raise ValidationError(self.error_messages["too_long"], code="too_long", params={"max": self.MAX_DAYS})
        seconds = int((days * SECONDS_PER_DAY).to_integral_value())
        if seconds < 1:  # checked after rounding: "0.000001" days is 0 seconds
            raise ValidationError(self.error_messages["not_positive"], code="not_positive")
        return timedelta(seconds=seconds)

    def has_changed(self, initial, data) -> bool:
        try:
            return self.to_python(data) != self.to_python(initial)
        except ValidationError:
            return True


class MemoryKindForm(forms.ModelForm):
    """The retention policy of a kind, in the units an admin thinks in."""

    default_ttl = DaysField(label="Default TTL (days)", help_text=MemoryKind._meta.get_field("default_ttl").help_text)
    max_ttl = DaysField(label="Maximum TTL (days)", help_text=MemoryKind._meta.get_field("max_ttl").help_text)
    review_interval = DaysField(
        label="Review interval (days)",
        required=False,
        help_text="Active records unconfirmed for longer go to the drift queue; empty: never.",
    )
    purge_after = DaysField(label="Purge after (days)", help_text=MemoryKind._meta.get_field("purge_after").help_text)
    auto_admit_authorities = forms.MultipleChoiceField(
        label="Auto-admitted authorities",
        choices=Authority.choices,
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="Claims with these authorities from a clean session become active without review; "
        "every other claim waits in quarantine.",
    )

    class Meta:
        model = MemoryKind
        fields = ["name", "description", "default_ttl", "max_ttl", "review_interval", "auto_admit_authorities", "purge_after"]
        # A sentence or two (up to 300 characters): a text area, not a one-line input.
        widgets = {"description": forms.Textarea(attrs={"rows": 3, "cols": 60})}

    def clean_auto_admit_authorities(self) -> list[str]:
        chosen = set(self.cleaned_data["auto_admit_authorities"])
        return [value for value in Authority.values if value in chosen]  # a stable order

    def clean(self):
        data = super().clean()
        default_ttl, max_ttl = data.get("default_ttl"), data.get("max_ttl")
        if default_ttl and max_ttl and default_ttl > max_ttl:
            self.add_error(
                "default_ttl",
                f"The default TTL ({days_text(default_ttl)} days) cannot be longer than "
                f"the maximum TTL ({days_text(max_ttl)} days).",
            )
        return data
