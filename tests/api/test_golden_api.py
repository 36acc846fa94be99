"""The golden recall API: reviewers add questions and run their tenants' sets; input is validated
by the serializers and the scope rules, a bad request is a problem+json 400 (or 404 outside the
reviewer's scope) that writes nothing, and agents get a 403."""

import uuid

import pytest

from governance.golden.models import GoldenQuestion, GoldenRun
from memory.models import MemoryRecord
from memory.search.build import build_index, ensure_active_index, request_rebuild
from tests.api.conftest import assert_problem

pytestmark = pytest.mark.django_db

GOLDEN = "/api/v1/golden/"
RUNS = "/api/v1/golden/runs/"


@pytest.fixture
def records(write):
    return {
        "billing": write(content="The billing contact is the finance team.", subject="customer/acme"),
        "roadtrip": write(content="Planning a roadtrip to the coast in June.", subject="customer/erin"),
    }


def body(record, **overrides) -> dict:
    return {
        "tenant": "acme",
        "agent": "support-bot",
        "purpose": "support",
        "question": "who is the billing contact",
        "expected": [str(record.pk)],
        "k": 3,
        **overrides,
    }


def test_a_reviewer_adds_a_golden_question_and_lists_it(reviewer_client, records):
    response = reviewer_client.post(GOLDEN, body(records["billing"], subject="customer/acme"), format="json")

    assert response.status_code == 201, response.json()
    created = response.json()
    assert response["Location"].endswith(f"{GOLDEN}{created['id']}/")
    assert {key: created[key] for key in ("tenant", "agent", "purpose", "subject", "question", "expected", "k")} == {
        "tenant": "acme",
        "agent": "support-bot",
        "purpose": "support",
        "subject": "customer/acme",
        "question": "who is the billing contact",
        "expected": [str(records["billing"].pk)],
        "k": 3,
    }
    assert created["created_by"] == "user:rita" and created["last_result"] is None
    listed = reviewer_client.get(GOLDEN).json()
    assert listed["count"] == 1 and listed["results"][0]["id"] == created["id"]
    assert reviewer_client.get(f"{GOLDEN}{created['id']}/").json() == listed["results"][0]


def test_tenant_may_be_left_out_by_a_reviewer_of_one_tenant_and_k_defaults_to_ten(reviewer_client, records):
    payload = body(records["billing"])
    del payload["tenant"], payload["k"]
    response = reviewer_client.post(GOLDEN, payload, format="json")
    assert response.status_code == 201 and response.json()["k"] == 10 and response.json()["subject"] == ""


@pytest.mark.parametrize(
    "overrides, field",
    [
        ({"question": ""}, "question"),
        ({"question": 42}, "question"),
        ({"question": "x" * 1001}, "question"),
        ({"expected": []}, "expected"),
        ({"expected": "not-a-list"}, "expected"),
        ({"expected": ["not-a-uuid"]}, "expected.0"),
        ({"k": 0}, "k"),
        ({"k": 51}, "k"),
        ({"k": "3"}, "k"),
        ({"purpose": None}, "purpose"),
        ({"agent": "no-such-bot"}, "agent"),
        ({"expected_ids": []}, "expected_ids"),
    ],
)
def test_bad_input_is_a_400_naming_the_field_and_writes_nothing(reviewer_client, records, overrides, field):
    response = reviewer_client.post(GOLDEN, body(records["billing"], **overrides), format="json")
    assert_problem(response, 400, errors={field})
    assert not GoldenQuestion.objects.exists()


def test_expected_records_outside_the_reviewers_scope_are_refused_like_missing_ones(
    reviewer_client, records, other_tenant, make_credential, write
):
    foreign = write(credential_=make_credential(other_tenant), content="Globex fact.")
    foreign_problem = assert_problem(reviewer_client.post(GOLDEN, body(foreign), format="json"), 400, errors={"expected"})
    missing = MemoryRecord(pk=uuid.uuid4())
    missing_problem = assert_problem(reviewer_client.post(GOLDEN, body(missing), format="json"), 400, errors={"expected"})
    assert foreign_problem["errors"]["expected"][0].replace(str(foreign.pk), "ID") == missing_problem["errors"]["expected"][
        0
    ].replace(str(missing.pk), "ID")
    assert not GoldenQuestion.objects.exists()


def test_an_expected_record_of_another_subject_or_not_active_is_a_400(reviewer_client, records):
    response = reviewer_client.post(GOLDEN, body(records["roadtrip"], subject="customer/acme"), format="json")
    assert "Not in the question's" in assert_problem(response, 400, errors={"expected"})["errors"]["expected"][0]
    assert not GoldenQuestion.objects.exists()


def test_another_tenant_is_a_404_and_its_questions_and_runs_are_invisible(
    reviewer_client, records, other_tenant, make_reviewer, client_for
):
    assert_problem(reviewer_client.post(GOLDEN, body(records["billing"], tenant="globex"), format="json"), 404)
    created = reviewer_client.post(GOLDEN, body(records["billing"]), format="json").json()
    run = reviewer_client.post(RUNS, {}, format="json").json()
    outsider = client_for(make_reviewer(other_tenant, username="gina"))
    assert outsider.get(GOLDEN).json()["count"] == 0
    assert_problem(outsider.get(f"{GOLDEN}{created['id']}/"), 404)
    assert_problem(outsider.get(f"{RUNS}{run['id']}/"), 404)
    assert_problem(outsider.delete(f"{GOLDEN}{created['id']}/"), 404)
    assert_problem(outsider.post(RUNS, {"tenant": "acme"}, format="json"), 404)
    assert outsider.get(RUNS).json()["count"] == 0 and GoldenQuestion.objects.count() == 1


def test_agents_may_not_use_the_golden_api(agent_client, records):
    assert_problem(agent_client.get(GOLDEN), 403)
    assert_problem(agent_client.post(GOLDEN, body(records["billing"]), format="json"), 403)
    assert_problem(agent_client.post(RUNS, {}, format="json"), 403)
    assert not GoldenQuestion.objects.exists() and not GoldenRun.objects.exists()


def test_a_run_on_demand_scores_the_set_and_is_read_back(reviewer_client, records):
    question = reviewer_client.post(GOLDEN, body(records["billing"], k=1), format="json").json()
    reviewer_client.post(GOLDEN, body(records["roadtrip"], question="roadtrip to the coast"), format="json")

    response = reviewer_client.post(RUNS, {"tenant": "acme"}, format="json")

    assert response.status_code == 201, response.json()
    run = response.json()
    assert {key: run[key] for key in ("tenant", "trigger", "questions", "stale", "hits", "hit_at_k", "mrr")} == {
        "tenant": "acme",
        "trigger": "manual",
        "questions": 2,
        "stale": 0,
        "hits": 2,
        "hit_at_k": 1.0,
        "mrr": 1.0,
    }
    assert run["requested_by"] == "user:rita" and len(run["results"]) == 2
    result = next(r for r in run["results"] if r["question"] == question["id"])
    assert (result["rank"], result["hit"], result["expected"]) == (1, True, [str(records["billing"].pk)])
    assert reviewer_client.get(f"{RUNS}{run['id']}/").json() == run
    assert reviewer_client.get(RUNS).json()["results"][0]["id"] == run["id"]


def test_questions_show_their_result_in_the_latest_run_on_the_active_index(reviewer_client, records):
    question = reviewer_client.post(GOLDEN, body(records["billing"]), format="json").json()
    run = reviewer_client.post(RUNS, {}, format="json").json()
    listed = reviewer_client.get(f"{GOLDEN}{question['id']}/").json()
    if run["index_active"]:
        assert listed["last_result"]["rank"] == 1 and listed["last_result"]["run"] == run["id"]
    else:  # no index built yet: recall serves from its built-in ranking and no run is "on the active index"
        assert listed["last_result"] is None


def test_a_run_needs_questions_and_a_known_index_and_otherwise_writes_nothing(reviewer_client, records):
    assert_problem(reviewer_client.post(RUNS, {}, format="json"), 400, errors={"tenant"})
    reviewer_client.post(GOLDEN, body(records["billing"]), format="json")
    assert_problem(reviewer_client.post(RUNS, {"index": "no-such-index"}, format="json"), 404)
    assert_problem(reviewer_client.post(RUNS, {"tenant": "acme", "extra": 1}, format="json"), 400, errors={"extra"})
    assert_problem(reviewer_client.post(RUNS, {"tenant": 5}, format="json"), 400, errors={"tenant"})
    assert not GoldenRun.objects.exists()


def test_a_reviewer_removes_a_question(reviewer_client, records):
    created = reviewer_client.post(GOLDEN, body(records["billing"]), format="json").json()
    assert reviewer_client.delete(f"{GOLDEN}{created['id']}/").status_code == 204
    assert not GoldenQuestion.objects.exists()
    assert_problem(reviewer_client.get(f"{GOLDEN}{created['id']}/"), 404)


def test_the_golden_endpoints_are_in_the_schema(reviewer_client):
    schema = reviewer_client.get("/api/schema/", HTTP_ACCEPT="application/json").json()
    assert {"/api/v1/golden/", "/api/v1/golden/{id}/", "/api/v1/golden/runs/", "/api/v1/golden/runs/{id}/"} <= set(
        schema["paths"]
    )
    question = schema["components"]["schemas"]["GoldenQuestionInputRequest"]
    assert {"agent", "purpose", "question", "expected"} <= set(question["required"])


def test_a_run_against_a_named_candidate_scores_it_and_a_building_index_is_a_409(reviewer_client, records):
    reviewer_client.post(GOLDEN, body(records["billing"]), format="json")
    ensure_active_index()
    building = request_rebuild(name="lexical-next", actor="test")
    assert_problem(reviewer_client.post(RUNS, {"index": "lexical-next"}, format="json"), 409)
    assert not GoldenRun.objects.exists()

    build_index(building.pk)
    run = reviewer_client.post(RUNS, {"index": "lexical-next"}, format="json").json()
    assert (run["index"], run["index_active"], run["hits"]) == ("lexical-next", False, 1)
