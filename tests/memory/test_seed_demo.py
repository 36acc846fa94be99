"""`seed_demo`: what a new user gets from `bin/run`."""

import io
import re

import pytest
from django.core.management import call_command
from rest_framework.test import APIClient

from memory.models import MemoryRecord

pytestmark = pytest.mark.django_db


def test_the_demo_prints_a_working_agent_token_and_reviewer_token():
    out = io.StringIO()
    call_command("seed_demo", stdout=out)
    text = out.getvalue()
    agent_token = re.search(r"\bgma_\S+", text).group(0)
    reviewer_token = re.search(r"\bgmr_\S+", text).group(0)
    assert f"TOKEN={agent_token} REVIEWER={reviewer_token}" in text
    for token in (agent_token, reviewer_token):
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
        assert client.get("/api/v1/memories/").status_code == 200


def test_demo_facts_checked_long_ago_were_also_observed_then():
    call_command("seed_demo", stdout=io.StringIO())
    stale = MemoryRecord.objects.filter(tenant__slug="acme", confirmed_at__lt=MemoryRecord.objects.order_by("-created_at")
                                        .values_list("created_at", flat=True).first())
    assert stale.exists()
    for record in stale:
        assert abs((record.observed_at - record.confirmed_at).total_seconds()) < 120


def test_the_readmes_recall_example_finds_the_contact_preference_first():
    out = io.StringIO()
    call_command("seed_demo", stdout=out)
    token = re.search(r"\bgma_\S+", out.getvalue()).group(0)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    response = client.post("/api/v1/recall/", {"query": "does acme prefer email or phone", "purpose": "support",
                                                "subject": "customer/acme", "limit": 10, "token_budget": 800},
                           format="json")
    first = response.json()["items"][0]
    assert first["content"].startswith("Prefers email over phone") and first["score_parts"]["lexical"] > 0
