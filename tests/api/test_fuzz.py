"""Property-based fuzzing of the whole API from its own OpenAPI schema (schemathesis): valid and
invalid bodies, query strings and paths for every operation, sent with an agent token and with a
reviewer token, through the real Django stack and database. Every response must be something the
schema documents (status, content type, body shape), never a 500. Bounded and seeded, so CI stays
fast and a failure reproduces."""

import hypothesis
import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from drf_spectacular.generators import SchemaGenerator
from hypothesis import HealthCheck
from schemathesis.config import SchemathesisConfig

from memory.models import MemoryRecord, ReviewerToken
from tests.conftest import memory_body

pytestmark = pytest.mark.django_db

EXAMPLES_PER_OPERATION = 15


# Body rules the schema cannot state (a kind must exist: kinds are admin data; authority must fit the
# source type; a TTL must fit the kind's maximum) make some schema-valid bodies a documented 400.
CONFIG = SchemathesisConfig.from_dict(
    {
        "checks": {
            "positive_data_acceptance": {
                "expected-statuses": ["2xx", "400", "401", "403", "404", "409", "429"],
            }
        }
    }
)


def _load_schema():
    """The schema the app serves at /api/schema/, wired to the app itself (WSGI, no network)."""
    loaded = schemathesis.openapi.from_dict(SchemaGenerator().get_schema(request=None, public=True), config=CONFIG)
    loaded.app = get_wsgi_application()
    return loaded


schema = _load_schema()


@pytest.fixture(autouse=True)
def keep_the_test_connection_open():
    # Requests go straight to the WSGI application, inside the test's transaction: like Django's
    # test client, keep the end of a request from closing the test's database connection.
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.fixture
def records(write):
    """Some records to find: an active and a quarantined one."""
    return [write(), write(authority="agent", provenance={"source_type": "agent_inference"})]


fuzz = hypothesis.settings(
    max_examples=EXAMPLES_PER_OPERATION,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)


@schema.parametrize()
@fuzz
def test_every_generated_request_with_an_agent_token_gets_a_documented_answer(case, credential, records):
    case.call_and_validate(headers={"Authorization": f"Bearer {credential.raw_token}"})


@schema.parametrize()
@fuzz
def test_every_generated_request_with_a_reviewer_token_gets_a_documented_answer(case, reviewer, records):
    raw = getattr(reviewer, "fuzz_token", None) or ReviewerToken.issue(user=reviewer)[1]
    reviewer.fuzz_token = raw
    case.call_and_validate(headers={"Authorization": f"Bearer {raw}"})


def test_the_schema_documents_problems_and_refuses_unknown_fields():
    raw = schema.raw_schema
    components = raw["components"]["schemas"]
    for path, operations in raw["paths"].items():
        if not path.startswith("/api/v1/"):
            continue
        for method, operation in operations.items():
            for code, response in operation["responses"].items():
                if code[0] in "45":
                    assert set(response["content"]) == {"application/problem+json"}, (path, method, code)
            assert {"401", "429"} <= set(operation["responses"]), (path, method)
    request_bodies = {
        operation["requestBody"]["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[-1]
        for operations in raw["paths"].values()
        for operation in operations.values()
        if "requestBody" in operation
    }
    assert {"MemoryWriteRequest", "TransitionRequest", "RecallQueryRequest"} <= request_bodies
    for name in request_bodies | {"ProvenanceRequest"}:
        assert components[name].get("additionalProperties") is False, name


def test_a_valid_write_from_the_schema_example_is_stored(agent_client):
    """The positive side of the fuzz: the documented body shape is accepted."""
    before = MemoryRecord.objects.count()
    assert agent_client.post("/api/v1/memories/", memory_body(), format="json").status_code == 201
    assert MemoryRecord.objects.count() == before + 1
