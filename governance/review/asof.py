"""Time travel in the reviewer UI: the "state at..." control on a memory's page, and the page
"What would recall have returned" (`/review/recall-as-of/`): a query, an agent, a purpose, a
moment and optionally a subject, answered from history by `memory.asof` (which says what the
reconstruction can and cannot show: forgotten content never, pruned records not at all).

Both are GET forms that change nothing; a bad time or an agent outside the reviewer's tenants is a
message in the form, never an error page."""

from datetime import UTC, datetime

from django import forms
from django.http import HttpResponse

from governance.review.common import ReviewerRequest, render_page, reviewer_required
from memory.asof import RecordAsOf, check_as_of, recall_as_of, record_as_of
from memory.errors import DomainError
from memory.models import PURPOSE_MAX_CHARS, SUBJECT_MAX_CHARS, Agent, MemoryRecord
from memory.recall import RecallQuery
from memory.validation import RECALL_QUERY_MAX_CHARS, checked_datetime

RESULTS_SHOWN = 20


class MomentField(forms.DateTimeField):
    """A past moment, written the way every page prints times: `2026-12-02 06:22:30` in UTC (the
    seconds optional, a trailing "UTC" allowed, so a time copied from a page works as it is), or
    ISO 8601 with a zone (`2026-12-02T07:22:30+01:00`), read in that zone.

    A text box, not the browser's date-and-time control: that one shows the browser's own format
    (12/02/2026, 06:22:30 AM in a US locale) and no zone, beside times the pages print otherwise."""

    widget = forms.DateTimeInput(
        format="%Y-%m-%d %H:%M:%S",
        attrs={"placeholder": "YYYY-MM-DD HH:MM:SS", "autocomplete": "off", "spellcheck": "false", "class": "moment"},
    )
    input_formats = [
        "%Y-%m-%d %H:%M:%S",
        "%Y-%m-%d %H:%M",
        "%Y-%m-%dT%H:%M:%S",
        "%Y-%m-%dT%H:%M",
        "%Y-%m-%d %H:%M:%S.%f",
        "%Y-%m-%dT%H:%M:%S.%f",
    ]
    default_error_messages = {"invalid": "Enter a date and time in UTC, e.g. 2026-11-03 14:30:00."}

    def to_python(self, value):
        if isinstance(value, str) and value.strip()[-3:].upper() == "UTC":
            value = value.strip()[:-3].rstrip() + "Z"  # "… 06:22:30 UTC", as the pages print it
        return super().to_python(value)

    def clean(self, value):
        moment = super().clean(value)
        if moment is None:
            return None
        try:
            moment = checked_datetime(moment)
            check_as_of(moment)
        except (ValueError, DomainError) as exc:
            raise forms.ValidationError(getattr(exc, "detail", None) or str(exc)) from None
        return moment


class StateAtForm(forms.Form):
    as_of = MomentField(label="State at", help_text="UTC, e.g. 2026-11-03 14:30:00.")


def state_at(request: ReviewerRequest, record: MemoryRecord) -> dict:
    """The memory page's "state at..." control: its form, and (with ?as_of=) the record's state
    then or the reason none can be shown."""
    if "as_of" not in request.GET:
        return {"form": StateAtForm()}
    form = StateAtForm(request.GET)
    if not form.is_valid():
        return {"form": form}
    try:
        state: RecordAsOf = record_as_of(actor=request.actor, record_id=record.pk, at=form.cleaned_data["as_of"])
    except DomainError as exc:
        return {"form": form, "message": exc.detail}
    return {"form": form, "state": state}


class AgentChoiceField(forms.ModelChoiceField):
    def label_from_instance(self, agent: Agent) -> str:
        return f"{agent.tenant.slug} / {agent.slug}"


class RecallAsOfForm(forms.Form):
    query = forms.CharField(
        max_length=RECALL_QUERY_MAX_CHARS, required=False, strip=True, help_text="What the agent asked for, in words."
    )
    agent = AgentChoiceField(queryset=None, help_text="Tenant / agent.")
    purpose = forms.CharField(max_length=PURPOSE_MAX_CHARS, strip=True, help_text="e.g. support")
    as_of = MomentField(label="At", help_text="UTC, e.g. 2026-11-03 14:30:00: when the agent answered the customer.")
    subject = forms.CharField(
        max_length=SUBJECT_MAX_CHARS,
        required=False,
        strip=True,
        help_text="Optional: only memories about this subject, e.g. customer/acme.",
    )

    def __init__(self, *args, agents, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["agent"].queryset = agents
        # One agent is the answer: preselected. Several: a prompt to pick one, never a silent default.
        self.fields["agent"].empty_label = None if len(agents) == 1 else "Choose an agent"


@reviewer_required
def recall_asof(request: ReviewerRequest) -> HttpResponse:
    agents = request.actor.in_tenants(Agent.objects.all()).select_related("tenant").order_by("tenant__slug", "slug")
    asked = bool(request.GET)
    form = RecallAsOfForm(request.GET if asked else None, agents=agents)
    reconstructed = None
    if asked and form.is_valid():
        data = form.cleaned_data
        q = RecallQuery(query=data["query"], purpose=data["purpose"], subject=data["subject"] or None, limit=RESULTS_SHOWN)
        try:
            reconstructed = recall_as_of(agent=data["agent"], q=q, at=data["as_of"])
        except DomainError as exc:
            form.add_error(None, exc.detail)
    return render_page(
        request,
        "review/recall_asof.html",
        {
            "nav": "recall_asof",
            "form": form,
            "reconstructed": reconstructed,
            "as_of_param": _param(form.cleaned_data.get("as_of")) if reconstructed else "",
        },
    )


def _param(moment: datetime | None) -> str:
    # As the pages print times (and the "State at" box then shows it): UTC, to the second.
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S") if moment else ""
