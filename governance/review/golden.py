"""Golden recall in the reviewer UI (`/review/golden/`): each of the reviewer's tenants with its
golden questions, each question's result in the latest run on the active index (rank of the first
expected record, hit or miss, stale), a button that runs the tenant's set now, and the recent runs
(nightly, on demand, and those a candidate index's promotion gate made), each with its per-question
results (`/review/golden/runs/<id>/`).

Reads come from `governance.golden.selectors`, scoped to the reviewer's tenants; a run goes through
`governance.golden.runner`, removing a question through `governance.golden.services`. GET never
changes anything; another tenant (or its run or question) is a 404, like a missing one."""

import uuid
from typing import TYPE_CHECKING, TypedDict, cast

from django import forms
from django.contrib import messages
from django.db.models import Prefetch
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.urls import reverse
from django.views.decorators.http import require_POST

from governance.golden.models import GoldenQuestion, GoldenRun
from governance.golden.runner import run_golden_sets
from governance.golden.selectors import latest_results, latest_runs, questions_in_scope, runs_in_scope
from governance.golden.services import golden_question_delete
from governance.jobs.models import JobRun
from governance.review.common import ReviewerRequest, how_started, render_page, reviewer_required
from memory.errors import RecordNotFound
from memory.models import MemoryRecord, Tenant
from memory.selectors import records_in_scope, tenants_in_scope

if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations

    class _Expected(TypedDict):
        expected_records: list[tuple[uuid.UUID, MemoryRecord]]  # "must find", as the page lists them

    class _HowStarted(TypedDict):
        how: str  # how_started, in the words the job runs use

    # A question and a run as the page shows them (set on the instances for the template). Not columns.
    QuestionWithExpected = WithAnnotations[GoldenQuestion, _Expected]
    RunWithHow = WithAnnotations[GoldenRun, _HowStarted]

RECENT_RUNS = 20
GOLDEN_JOB = "golden_recall"  # the scheduled job whose golden runs are recorded as `nightly`


class GoldenRunForm(forms.Form):
    tenant: "forms.ModelChoiceField[Tenant]" = forms.ModelChoiceField(queryset=None, to_field_name="slug")

    def __init__(self, *args, tenants, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["tenant"].queryset = tenants


class Section(TypedDict):
    """One tenant's part of the golden page."""

    tenant: Tenant
    run: GoldenRun | None  # its latest run on the active index
    questions: list[tuple[GoldenQuestion, dict | None]]  # each with its result in that run


def score(value: float | None) -> str:
    return "—" if value is None else f"{value:.0%}"


@reviewer_required
def golden(request: ReviewerRequest) -> HttpResponse:
    actor = request.actor
    results = latest_results(actor)
    runs = latest_runs(actor)
    sections: dict[int, Section] = {
        tenant.pk: {"tenant": tenant, "run": runs.get(tenant.pk), "questions": []}
        for tenant in tenants_in_scope(actor).order_by("slug")
    }
    # "Must find": each expected record as a reviewer recognises it (kind, subject, a line of its content).
    expected = Prefetch("expected", queryset=MemoryRecord.objects.select_related("kind").order_by("created_at", "pk"))
    questions = questions_in_scope(actor).prefetch_related(None).prefetch_related(expected)
    for question in cast("list[QuestionWithExpected]", list(questions.order_by("created_at", "pk"))):
        question.expected_records = [(record.pk, record) for record in question.expected.all()]
        sections[question.tenant_id]["questions"].append((question, results.get(str(question.pk))))
    recent = list(runs_in_scope(actor).order_by("-started_at", "-pk")[:RECENT_RUNS])
    _say_how_started([*recent, *(section["run"] for section in sections.values() if section["run"] is not None)])
    return render_page(request, "review/golden.html", {"nav": "golden", "sections": list(sections.values()), "recent": recent})


@reviewer_required
def golden_run_detail(request: ReviewerRequest, pk: int) -> HttpResponse:
    run = get_object_or_404(runs_in_scope(request.actor), pk=pk)
    questions = {
        str(q.pk): q for q in questions_in_scope(request.actor).filter(pk__in=[result["question"] for result in run.results])
    }
    expected_ids = {record_id for result in run.results for record_id in result["expected"]}
    records = {
        str(record.pk): record for record in records_in_scope(request.actor).filter(pk__in=expected_ids).select_related("kind")
    }
    rows = [
        (result, questions.get(result["question"]), [(record_id, records.get(record_id)) for record_id in result["expected"]])
        for result in run.results
    ]
    _say_how_started([run])
    return render_page(request, "review/golden_run.html", {"nav": "golden", "run": run, "rows": rows})


def _say_how_started(runs: list[GoldenRun]) -> None:
    """Set each run's `how`, in the words the job runs use. The golden_recall job records its runs
    as `nightly` however the job itself was started (by beat, or by `run_job` as bin/run does at
    start): its job run, which started at the same moment, says which."""
    moments = {run.started_at for run in runs if run.trigger == GoldenRun.Trigger.NIGHTLY}
    job_triggers = (
        dict(JobRun.objects.filter(job=GOLDEN_JOB, started_at__in=moments).values_list("started_at", "trigger"))
        if moments
        else {}
    )
    for run in cast("list[RunWithHow]", runs):
        run.how = how_started(job_triggers.get(run.started_at, run.trigger))


@reviewer_required
@require_POST
def golden_run(request: ReviewerRequest) -> HttpResponse:
    """Run one tenant's golden set now, against the active index."""
    form = GoldenRunForm(request.POST, tenants=tenants_in_scope(request.actor))
    if not form.is_valid():
        raise Http404("No such tenant.")
    tenant = form.cleaned_data["tenant"]
    runs = run_golden_sets(tenants=[tenant], trigger=GoldenRun.Trigger.MANUAL, requested_by=request.actor.label)
    if not runs:
        messages.warning(request, f"{tenant.slug} has no golden questions yet: nothing to run.")
        return redirect("review:golden")
    run = runs[0]
    messages.success(
        request,
        f"Golden set of {tenant.slug} ran on index {run.index}: hit@k {score(run.hit_at_k)}, "
        f"MRR {'—' if run.mrr is None else f'{run.mrr:.2f}'} over {run.questions} question"
        f"{'' if run.questions == 1 else 's'}" + (f" ({run.stale} stale)." if run.stale else "."),
    )
    return redirect(reverse("review:golden_run_detail", args=[run.pk]))


@reviewer_required
@require_POST
def golden_question_remove(request: ReviewerRequest, pk: uuid.UUID) -> HttpResponse:
    try:
        golden_question_delete(actor=request.actor, question_id=pk)
    except RecordNotFound:
        raise Http404("No such golden question.") from None
    messages.success(request, "Golden question removed; past runs keep their scores.")
    return redirect("review:golden")
