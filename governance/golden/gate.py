"""The promotion gate for search indexes: a candidate becomes active only if it scores at least as
well as the active index on every tenant's golden set, on hit@k and on MRR. Registered with
`memory.search.register_promotion_gate` in `GovernanceConfig.ready()`; `memory` calls it when a
rebuilt candidate is ready, and keeps the candidate (with this report) when it fails.

Both indexes are scored now, on the same questions and the same records, so a change in the data
since the last nightly run cannot pass or fail a candidate. A tenant without golden questions, or
whose questions are all stale, has nothing to compare and does not hold a candidate back."""

from governance.golden.models import GoldenRun
from governance.golden.runner import run_golden_sets
from memory.models import Tenant
from memory.search import SearchIndex

# Scores are means of a few rationals; equal scores may differ in the last bits.
TOLERANCE = 1e-9


def _summary(run: GoldenRun | None) -> dict | None:
    if run is None:
        return None
    return {"run": run.pk, "questions": run.questions, "stale": run.stale, "hit_at_k": run.hit_at_k, "mrr": run.mrr}


def _at_least(candidate: float | None, active: float | None) -> bool:
    return candidate is None or active is None or candidate >= active - TOLERANCE


def golden_promotion_gate(candidate: SearchIndex, active: SearchIndex | None) -> tuple[bool, dict]:
    """Score `candidate` and `active` on every tenant's golden set; pass only if the candidate is
    at least as good on each. The report names each tenant's runs and scores (ids and numbers only)."""
    requested_by = f"gate:{candidate.name}"
    candidate_runs = {
        run.tenant_id: run
        for run in run_golden_sets(index=candidate, trigger=GoldenRun.Trigger.INDEX_CHANGE, requested_by=requested_by)
    }
    active_runs = (
        {}
        if active is None
        else {
            run.tenant_id: run
            for run in run_golden_sets(index=active, trigger=GoldenRun.Trigger.INDEX_CHANGE, requested_by=requested_by)
        }
    )
    slugs = dict(Tenant.objects.filter(pk__in=list(candidate_runs)).values_list("pk", "slug"))
    tenants = {}
    for tenant_id, run in candidate_runs.items():
        against = active_runs.get(tenant_id)
        passed = against is None or (_at_least(run.hit_at_k, against.hit_at_k) and _at_least(run.mrr, against.mrr))
        tenants[slugs[tenant_id]] = {"passed": passed, "candidate": _summary(run), "active": _summary(against)}
    passed = all(tenant["passed"] for tenant in tenants.values())
    report = {
        "passed": passed,
        "candidate": candidate.name,
        "active": active.name if active is not None else None,
        "rule": "the candidate's hit@k and MRR are at least the active index's on every tenant's golden set",
        "tenants": tenants,
        "failed_tenants": sorted(slug for slug, tenant in tenants.items() if not tenant["passed"]),
    }
    if active is None:
        report["note"] = "No active index to compare with: the candidate's scores are recorded and it passes."
    return passed, report
