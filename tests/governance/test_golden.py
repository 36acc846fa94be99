"""Golden recall sets: scoring, the runner (set-based, content-free runs, stale questions), the
question rules, forgetting, the nightly job, the promotion gate and the demo tenant's ten questions
(the CI gate on recall)."""

import json
import uuid
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from governance.forget.artifacts import registered_artifacts, uncovered_references
from governance.forget.services import forget_request_create
from governance.golden.gate import golden_promotion_gate
from governance.golden.models import GoldenQuestion, GoldenRun
from governance.golden.runner import run_golden_sets, score_question
from governance.golden.selectors import score_trend
from governance.golden.services import golden_question_create
from governance.jobs import run_job
from memory.actors import Actor
from memory.errors import ValidationFailed
from memory.models import MemoryRecord, Tenant
from memory.recall import RecallQuery, recall_for_agent
from memory.search import IndexStatus, SearchIndex
from memory.search.build import ensure_active_index, promote_index, serving_index
from memory.services import memory_retire
from tests.governance.golden_support import UNSTEMMED, make_candidate

pytestmark = pytest.mark.django_db

# The demo tenant's golden set must do at least this well with the shipped ranking (CI gate).
DEMO_MIN_HIT_AT_K = 1.0
DEMO_MIN_MRR = 0.9


@pytest.fixture
def facts(write):
    """Five support facts about three subjects, with the words a question would use."""
    return {
        "email": write(content="Prefers email over phone for routine updates.", subject="customer/acme"),
        "billing": write(content="The billing contact is the finance team.", subject="customer/acme"),
        "plan": write(content="Runs on the Enterprise plan since March.", subject="customer/acme"),
        "deploys": write(content="Deploys go through staging and need one approval.", subject="team/deploys"),
        "roadtrip": write(content="Planning a roadtrip to the coast in June.", subject="customer/erin"),
    }


@pytest.fixture
def ask(tenant, credential, reviewer_actor):
    """ask(question, *records, subject="", k=3) -> a golden question of the default agent."""

    def make(question, *records, subject="", k=3, agent=None):
        return golden_question_create(
            actor=reviewer_actor,
            tenant=tenant,
            agent=agent or credential.agent,
            purpose="support",
            subject=subject,
            question=question,
            expected=[r.pk for r in records],
            k=k,
        )

    return make


def test_score_is_the_rank_of_the_first_expected_record_within_k():
    a, b, c, d = "abcd"
    assert score_question({c}, [a, b, c, d], k=3).rank == 3
    assert score_question({c, b}, [a, b, c, d], k=3).rank == 2  # any expected record counts
    assert score_question({d}, [a, b, c, d], k=3).rank is None  # found, but beyond k
    hit, miss = score_question({a}, [a], k=1), score_question({a}, [], k=10)
    assert (hit.hit, hit.reciprocal_rank, miss.hit, miss.reciprocal_rank) == (True, 1.0, False, 0.0)
    assert score_question({c}, [a, b, c], k=3).reciprocal_rank == pytest.approx(1 / 3)


def test_a_run_scores_each_question_through_recall_and_stores_hit_at_k_and_mrr(tenant, facts, ask, credential):
    email = ask("how does the customer want routine updates, email?", facts["email"], subject="customer/acme")
    billing = ask("who is the billing contact", facts["billing"])
    roadtrip = ask("where is the roadtrip going", facts["roadtrip"], k=1)
    ask("deploys through staging", facts["deploys"], facts["plan"])

    (run,) = run_golden_sets(tenants=[tenant])

    results = {result["question"]: result for result in run.results}
    for question in (email, billing, roadtrip):  # each shares a rare word with its record only
        assert (results[str(question.pk)]["rank"], results[str(question.pk)]["hit"]) == (1, True)
    assert (run.questions, run.stale, run.trigger, run.tenant_id) == (4, 0, GoldenRun.Trigger.MANUAL, tenant.pk)
    assert run.hits == sum(result["hit"] for result in run.results)
    assert run.hit_at_k == pytest.approx(run.hits / 4)
    assert run.mrr == pytest.approx(sum(result["reciprocal_rank"] for result in run.results) / 4)
    for result in run.results:
        question = GoldenQuestion.objects.get(pk=result["question"])
        recalled = recall_for_agent(
            agent=credential.agent,
            q=RecallQuery(query=question.question, purpose="support", subject=question.subject or None, limit=question.k),
        ).items
        assert result["found"] == [str(item.record.pk) for item in recalled]  # exactly what the agent gets
        assert result["rank"] == score_question(result["expected"], result["found"], question.k).rank
    assert run.finished_at >= run.started_at and GoldenRun.objects.get(pk=run.pk).results == run.results


def test_runs_hold_ids_and_scores_never_question_text_or_content(tenant, facts, ask):
    ask("roadtrip coast plans", facts["roadtrip"])
    (run,) = run_golden_sets(tenants=[tenant])
    stored = json.dumps(GoldenRun.objects.filter(pk=run.pk).values("results", "index", "requested_by").get())
    assert "roadtrip" not in stored.lower() and "coast" not in stored.lower()
    assert set(run.results[0]) == {"question", "k", "expected", "found", "rank", "reciprocal_rank", "hit", "stale"}


def test_a_run_does_not_mark_records_used(tenant, facts, ask):
    ask("roadtrip", facts["roadtrip"])
    run_golden_sets(tenants=[tenant])
    assert not MemoryRecord.objects.filter(last_used_at__isnull=False).exists()


def test_a_question_whose_records_cannot_be_recalled_is_stale_and_not_scored(tenant, facts, ask, reviewer_actor):
    ask("roadtrip to the coast", facts["roadtrip"])
    stale = ask("billing contact", facts["billing"])
    record = facts["billing"]
    memory_retire(record_id=record.pk, expected_version=record.version, actor=reviewer_actor, note="gone")

    (run,) = run_golden_sets(tenants=[tenant])

    results = {result["question"]: result for result in run.results}
    assert results[str(stale.pk)] | {"found": []} == {**results[str(stale.pk)], "stale": True, "hit": False, "found": []}
    assert (run.questions, run.stale) == (1, 1)
    assert run.hit_at_k == 1.0  # the stale question does not count as a miss


def test_one_run_per_tenant_and_a_tenant_filter(tenant, other_tenant, facts, ask, make_credential, make_reviewer, write):
    other = make_credential(other_tenant)
    record = write(credential_=other, content="Globex wants invoices in EUR.", subject="customer/globex")
    golden_question_create(
        actor=Actor.for_user(make_reviewer(other_tenant, username="gina")),
        tenant=other_tenant,
        agent=other.agent,
        purpose="support",
        question="invoice currency",
        expected=[record.pk],
    )
    ask("roadtrip", facts["roadtrip"])

    runs = run_golden_sets()
    assert sorted(run.tenant_id for run in runs) == sorted([tenant.pk, other_tenant.pk])
    assert [run.tenant_id for run in run_golden_sets(tenants=[other_tenant])] == [other_tenant.pk]
    assert run_golden_sets(tenants=[Tenant.objects.create(slug="empty")]) == []  # no questions, no run


def _queries_for_run(tenant) -> int:
    with CaptureQueriesContext(connection) as ctx:
        run_golden_sets(tenants=[tenant])
    return len(ctx.captured_queries)


def _queries_for_one_recall(question) -> int:
    q = RecallQuery(query=question.question, purpose=question.purpose, subject=question.subject or None, limit=question.k)
    index = serving_index(None)  # a run resolves its index once
    with CaptureQueriesContext(connection) as ctx:
        recall_for_agent(agent=question.agent, q=q, index=index)
    return len(ctx.captured_queries)


def test_the_runner_loads_set_based_one_recall_per_question_and_nothing_more(tenant, facts, ask):
    """Each added question costs exactly the queries of one recall: the runner's own reads (the
    questions, their expected ids, which are recallable) and its insert do not grow with them."""
    first = ask("roadtrip to the coast", facts["roadtrip"])
    ask("billing contact", facts["billing"])
    with_two = _queries_for_run(tenant)
    for _ in range(4):
        ask("roadtrip to the coast", facts["roadtrip"], facts["plan"])
    with_six = _queries_for_run(tenant)
    assert with_six - with_two == 4 * _queries_for_one_recall(first)
    assert with_two - 2 * _queries_for_one_recall(first) <= 6


# ------------------------------------------------------------------------------------------------
# the question rules


def test_expected_records_must_be_active_records_in_the_questions_scope(tenant, other_tenant, facts, ask, write, make_credential):
    other_agent = make_credential(tenant, agent_slug="sales-bot", purposes=("sales",))
    foreign = write(credential_=make_credential(other_tenant), content="Globex fact.")
    sales = write(credential_=other_agent, purpose="sales", content="A sales fact.")
    with pytest.raises(ValidationFailed) as foreign_error:
        ask("q", foreign)
    with pytest.raises(ValidationFailed) as missing_error:
        ask("q", MemoryRecord(pk=uuid.uuid4()))
    # Another tenant's record reads exactly like one that does not exist.
    assert foreign_error.value.errors["expected"][0].split(":")[0] == missing_error.value.errors["expected"][0].split(":")[0]
    with pytest.raises(ValidationFailed, match="invalid") as other_scope:
        ask("q", sales)
    assert "Not in the question's tenant, agent, purpose" in other_scope.value.errors["expected"][0]
    with pytest.raises(ValidationFailed) as other_subject:
        ask("q", facts["deploys"], subject="customer/acme")
    assert "Not in the question's" in other_subject.value.errors["expected"][0]
    with pytest.raises(ValidationFailed) as bad_k:
        ask("q", facts["email"], k=0)
    assert set(bad_k.value.errors) == {"k"}
    assert not GoldenQuestion.objects.exists()


def test_a_question_about_an_inactive_record_is_refused(tenant, facts, ask, reviewer_actor):
    record = facts["plan"]
    memory_retire(record_id=record.pk, expected_version=record.version, actor=reviewer_actor, note="old")
    with pytest.raises(ValidationFailed) as error:
        ask("plan", record)
    assert "Not active" in error.value.errors["expected"][0]
    assert not GoldenQuestion.objects.exists()


# ------------------------------------------------------------------------------------------------
# forgetting


def test_forgetting_a_subject_deletes_the_questions_about_it_with_a_receipt(tenant, facts, ask, reviewer_actor):
    about_erin = ask("where is the roadtrip going", facts["roadtrip"], subject="customer/erin")
    expects_erin = ask("plans for June, roadtrip or plan", facts["plan"], facts["roadtrip"])
    kept = ask("billing contact", facts["billing"])
    request = forget_request_create(actor=reviewer_actor, tenant=tenant, subject="customer/erin", reason="erasure")

    run_job("propagate_forgets")

    assert list(GoldenQuestion.objects.values_list("pk", flat=True)) == [kept.pk]
    assert not GoldenQuestion.expected.through.objects.filter(goldenquestion_id__in=[about_erin.pk, expects_erin.pk]).exists()
    receipt = request.receipts.get(artifact="golden_questions")
    assert receipt.removed == 2 and "deleted" in receipt.note
    assert "golden_questions" in {artifact.name for artifact in registered_artifacts()}
    assert not uncovered_references() & {"governance.GoldenQuestion", "governance.GoldenQuestion_expected"}


def test_past_runs_survive_a_forget_with_ids_and_scores_only(tenant, facts, ask, reviewer_actor):
    ask("where is the roadtrip going", facts["roadtrip"], subject="customer/erin")
    (run,) = run_golden_sets(tenants=[tenant])
    forget_request_create(actor=reviewer_actor, tenant=tenant, subject="customer/erin")
    run_job("propagate_forgets")
    run.refresh_from_db()
    assert run.questions == 1 and run.results[0]["expected"] == [str(facts["roadtrip"].pk)]
    assert not GoldenQuestion.objects.exists()


# ------------------------------------------------------------------------------------------------
# nightly, trend


def test_the_nightly_job_runs_every_tenants_set_on_the_active_index(tenant, facts, ask):
    ask("roadtrip", facts["roadtrip"])
    ask("billing contact", facts["billing"])
    job = run_job("golden_recall", trigger="run_job")
    assert job.status == "succeeded", job.errors
    (run,) = GoldenRun.objects.all()
    assert (run.trigger, run.requested_by, run.questions) == (GoldenRun.Trigger.NIGHTLY, "job:golden_recall", 2)
    assert job.counts == {"tenants": 1, "questions": 2, "hits": run.hits, "stale": 0}


def test_the_trend_weights_each_day_by_questions_scored(tenant, reviewer_actor):
    now = timezone.now()
    for days_ago, questions, hits, mrr in [(2, 10, 9, 0.8), (2, 30, 30, 1.0), (1, 4, 2, 0.5)]:
        GoldenRun.objects.create(
            tenant=tenant,
            index="lexical-v1",
            index_active=True,
            trigger="nightly",
            started_at=now - timedelta(days=days_ago),
            questions=questions,
            hits=hits,
            hit_at_k=hits / questions,
            mrr=mrr,
        )
    GoldenRun.objects.create(
        tenant=tenant,
        index="candidate",
        index_active=False,
        trigger="index_change",
        started_at=now - timedelta(days=1),
        questions=4,
        hits=0,
        hit_at_k=0,
        mrr=0,
    )
    trend = score_trend(reviewer_actor, now=now)
    assert [(p.questions, round(p.hit_at_k, 4), round(p.mrr, 4)) for p in trend] == [(40, 0.975, 0.95), (4, 0.5, 0.5)]


# ------------------------------------------------------------------------------------------------
# the promotion gate (registered with memory.search; promote_index runs it)


@pytest.fixture
def stemmed_questions(facts, ask):
    """Questions that reach their record only through a stem, at k=1."""
    return [
        ask("roadtrips planned", facts["roadtrip"], k=1),
        ask("bills contacts", facts["billing"], k=1),
        ask("deploy approvals staged", facts["deploys"], k=1),
    ]


def test_a_candidate_that_scores_as_well_on_every_tenant_is_promoted(tenant, stemmed_questions):
    active = ensure_active_index()
    candidate = make_candidate("lexical-copy")  # the same recipe

    promoted, passed = promote_index(candidate.pk, actor="test")

    assert passed and promoted.status == IndexStatus.ACTIVE
    report = promoted.report["promotion"]["gates"]["golden_recall"]
    assert report["passed"] is True and report["failed_tenants"] == []
    scores = report["tenants"][tenant.slug]
    assert scores["candidate"]["hit_at_k"] == scores["active"]["hit_at_k"] == 1.0
    assert scores["candidate"]["mrr"] == scores["active"]["mrr"] == 1.0
    runs = GoldenRun.objects.filter(trigger=GoldenRun.Trigger.INDEX_CHANGE)
    assert sorted(runs.values_list("index", "index_active")) == sorted([(active.name, True), ("lexical-copy", False)])
    assert {scores["candidate"]["run"], scores["active"]["run"]} == set(runs.values_list("pk", flat=True))


def test_a_candidate_whose_recipe_loses_the_stems_stays_candidate_with_its_report(tenant, stemmed_questions, credential):
    active = ensure_active_index()
    bad = make_candidate("lexical-unstemmed", UNSTEMMED)

    candidate, promoted = promote_index(bad.pk, actor="test")

    assert not promoted and candidate.status == IndexStatus.CANDIDATE
    active.refresh_from_db()
    assert active.status == IndexStatus.ACTIVE  # the old index keeps serving
    report = candidate.report["promotion"]["gates"]["golden_recall"]
    assert report["passed"] is False and report["failed_tenants"] == [tenant.slug]
    scores = report["tenants"][tenant.slug]
    assert scores["active"]["hit_at_k"] == 1.0 and scores["candidate"]["hit_at_k"] < 1.0
    assert scores["candidate"]["mrr"] < scores["active"]["mrr"]
    served = recall_for_agent(agent=credential.agent, q=RecallQuery(query="roadtrips planned", purpose="support", limit=1))
    assert served.index == active.name


def test_the_gate_compares_on_every_tenant(tenant, other_tenant, stemmed_questions, make_credential, make_reviewer, write):
    """A candidate as good on one tenant's set but worse on another's is held back."""
    other = make_credential(other_tenant)
    record = write(credential_=other, content="Invoices are sent in EUR every quarter.", subject="customer/globex")
    write(credential_=other, content="Globex was invoiced twice by mistake.", subject="customer/globex")
    golden_question_create(
        actor=Actor.for_user(make_reviewer(other_tenant, username="gina")),
        tenant=other_tenant,
        agent=other.agent,
        purpose="support",
        question="invoiced quarters",
        expected=[record.pk],
        k=1,
    )
    ensure_active_index()
    passed, report = golden_promotion_gate(
        make_candidate("lexical-unstemmed", UNSTEMMED), SearchIndex.objects.get(status=IndexStatus.ACTIVE)
    )
    assert not passed and set(report["tenants"]) == {tenant.slug, other_tenant.slug}
    assert report["failed_tenants"] == sorted([tenant.slug, other_tenant.slug]), report["tenants"]


def test_without_an_active_index_the_gate_records_the_candidate_and_passes(tenant, stemmed_questions):
    passed, report = golden_promotion_gate(make_candidate("first"), None)
    assert passed and report["active"] is None and "No active index" in report["note"]
    assert report["tenants"][tenant.slug]["active"] is None


def test_a_tenant_without_questions_does_not_hold_a_candidate_back(tenant):
    active = ensure_active_index()
    passed, report = golden_promotion_gate(make_candidate("lexical-unstemmed", UNSTEMMED), active)
    assert passed and report["tenants"] == {}


# ------------------------------------------------------------------------------------------------
# the demo tenant (CI gate)


def test_seed_demo_writes_ten_golden_questions_that_the_demo_data_answers(db, capsys):
    call_command("seed_demo")
    call_command("seed_demo")  # re-running adds nothing
    demo = Tenant.objects.get(slug="acme")
    assert GoldenQuestion.objects.filter(tenant=demo).count() == 10

    (run,) = run_golden_sets(tenants=[demo])

    misses = [result for result in run.results if not result["hit"]]
    assert (run.questions, run.stale) == (10, 0)
    assert run.hit_at_k >= DEMO_MIN_HIT_AT_K, misses
    assert run.mrr >= DEMO_MIN_MRR, run.results


# ------------------------------------------------------------------------------------------------
# admin


def test_the_admin_adds_questions_under_the_same_rules(
    admin_client, tenant, other_tenant, credential, facts, make_credential, write
):
    foreign = write(credential_=make_credential(other_tenant), content="Globex fact.")
    form = {
        "tenant": tenant.pk,
        "agent": credential.agent.pk,
        "purpose": "support",
        "subject": "",
        "question": "who is the billing contact",
        "k": 3,
    }
    refused = admin_client.post("/admin/governance/goldenquestion/add/", {**form, "expected": str(foreign.pk)})
    assert refused.status_code == 200 and "Not in the question&#x27;s tenant" in refused.content.decode()
    assert not GoldenQuestion.objects.exists()

    added = admin_client.post("/admin/governance/goldenquestion/add/", {**form, "expected": str(facts["billing"].pk)})
    assert added.status_code == 302
    question = GoldenQuestion.objects.get()
    assert (question.created_by, list(question.expected.all())) == ("user:admin", [facts["billing"]])
    assert admin_client.get("/admin/governance/goldenrun/").status_code == 200
