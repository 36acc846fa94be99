"""The OpenAPI schema and the interactive docs, served by the app itself."""

import re

import pytest
import yaml
from django.contrib.staticfiles import finders
from django.core.management import call_command
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db

CONTRACT_PATHS = {
    "/api/v1/memories/": {"get", "post"},
    "/api/v1/memories/{id}/": {"get"},
    "/api/v1/memories/{id}/confirm/": {"post"},
    "/api/v1/memories/{id}/promote/": {"post"},
    "/api/v1/memories/{id}/reject/": {"post"},
    "/api/v1/memories/{id}/retire/": {"post"},
    "/api/v1/recall/": {"post"},
    "/api/v1/forget/": {"post"},
    "/api/v1/forget/{id}/": {"get"},
}


def test_the_schema_describes_every_contract_path_with_bearer_auth():
    response = APIClient().get("/api/schema/")
    assert response.status_code == 200
    schema = yaml.safe_load(response.content)
    assert schema["openapi"].startswith("3.")
    for path, methods in CONTRACT_PATHS.items():
        assert methods <= set(schema["paths"][path]), path
    assert schema["components"]["securitySchemes"]["bearerAuth"] == {
        **schema["components"]["securitySchemes"]["bearerAuth"],
        "type": "http",
        "scheme": "bearer",
    }
    write = schema["paths"]["/api/v1/memories/"]["post"]
    assert "Idempotency-Key" in {p["name"] for p in write["parameters"]}
    assert {"201", "400", "403", "409"} <= set(write["responses"])


def test_the_schema_generates_without_warnings(tmp_path):
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(tmp_path / "schema.yaml"))


def test_the_docs_page_loads_its_assets_from_this_server():
    response = APIClient().get("/api/docs/")
    assert response.status_code == 200
    page = response.content.decode()
    assets = re.findall(r'(?:src|href)="([^"]+\.(?:js|css|png))"', page)
    assert assets and all(asset.startswith("/static/") for asset in assets), assets
    assert "cdn" not in page.lower()
    for asset in assets:
        assert finders.find(asset.removeprefix("/static/")), asset
