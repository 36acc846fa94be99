"""Recall's relevance floor over HTTP: `relevance` on each item, `below_floor` and `min_relevance` in
the response and the schema, and a bad `min_relevance` a 400 problem, never a 500."""

import pytest
import yaml
from rest_framework.test import APIClient

from tests.api.conftest import RECALL, assert_problem

pytestmark = pytest.mark.django_db

NOTES = [
    "Acme's billing contact is the finance team.",
    "Prefers email over phone for routine updates.",
    "Lunch is at noon on Fridays.",
]


@pytest.fixture
def notes(write):
    return [write(content=text, provenance={"session_id": None}) for text in NOTES]


def test_the_api_shows_relevance_and_the_floor(agent_client, notes):
    response = agent_client.post(RECALL, {"purpose": "support", "query": "acme billing contact"}, format="json")
    assert response.status_code == 200
    body = response.json()
    assert body["below_floor"] >= 1 and body["min_relevance"] > 0
    assert body["items"] and all(0 <= item["relevance"] <= 1 for item in body["items"])
    explicit = agent_client.post(
        RECALL, {"purpose": "support", "query": "acme billing contact", "min_relevance": 0}, format="json"
    )
    assert explicit.json()["min_relevance"] == 0 and explicit.json()["below_floor"] == 0


@pytest.mark.parametrize("value", [1.5, -0.1, "0.5", True, [0.2], {"lexical": 0.1}, float("nan")])
def test_a_bad_min_relevance_is_a_400_problem_not_a_500(agent_client, value):
    if isinstance(value, float) and value != value:
        response = agent_client.post(
            RECALL, '{"purpose": "support", "query": "x", "min_relevance": NaN}', content_type="application/json"
        )
    else:
        response = agent_client.post(RECALL, {"purpose": "support", "query": "x", "min_relevance": value}, format="json")
    assert_problem(response, 400, errors={"min_relevance"} if not (isinstance(value, float) and value != value) else None)


def test_the_schema_names_relevance_below_floor_and_min_relevance(db):
    schema = yaml.safe_load(APIClient().get("/api/schema/").content)
    components = schema["components"]["schemas"]
    assert "relevance" in components["RecallItem"]["properties"]
    assert {"below_floor", "min_relevance"} <= set(components["RecallAsOfResponse"]["properties"])
    assert "min_relevance" in components["RecallQueryRequest"]["properties"]
