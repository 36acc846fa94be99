"""`seed_demo`: what a new user gets from `bin/run`."""

import io
import json
import re
import stat

import pytest
from django.core.management import call_command
from django.utils import timezone
from rest_framework.test import APIClient

from memory.models import AgentCredential, MemoryRecord, ReviewerToken

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def own_var_dir(settings, tmp_path):
    """The demo keeps its tokens in APP_VAR_DIR: each test starts without them."""
    settings.VAR_DIR = tmp_path


def seed() -> str:
    out = io.StringIO()
    call_command("seed_demo", stdout=out)
    return out.getvalue()


def tokens(text: str) -> tuple[str, str]:
    match = re.search(r"export API=\S+ TOKEN=(gma_\S+) REVIEWER=(gmr_\S+)", text)
    return match.group(1), match.group(2)


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
    stale = MemoryRecord.objects.filter(
        tenant__slug="acme",
        confirmed_at__lt=MemoryRecord.objects.order_by("-created_at").values_list("created_at", flat=True).first(),
    )
    assert stale.exists()
    for record in stale:
        assert abs((record.observed_at - record.confirmed_at).total_seconds()) < 120


def test_the_readmes_recall_example_finds_the_contact_preference_first():
    out = io.StringIO()
    call_command("seed_demo", stdout=out)
    token = re.search(r"\bgma_\S+", out.getvalue()).group(0)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    response = client.post(
        "/api/v1/recall/",
        {
            "query": "does acme prefer email or phone",
            "purpose": "support",
            "subject": "customer/acme",
            "limit": 10,
            "token_budget": 800,
        },
        format="json",
    )
    first = response.json()["items"][0]
    assert first["content"].startswith("Prefers email over phone") and first["score_parts"]["lexical"] > 0


def test_a_second_run_prints_the_same_tokens_and_writes_nothing_new(tmp_path):
    first = seed()
    records, credentials, reviewer_tokens = (
        MemoryRecord.objects.count(),
        AgentCredential.objects.count(),
        ReviewerToken.objects.count(),
    )
    assert tokens(seed()) == tokens(first)
    assert (MemoryRecord.objects.count(), AgentCredential.objects.count(), ReviewerToken.objects.count()) == (
        records,
        credentials,
        reviewer_tokens,
    )
    # Raw tokens on disk: readable by their owner only.
    assert stat.S_IMODE((tmp_path / "demo-tokens.json").stat().st_mode) == 0o600


def test_a_revoked_or_unknown_demo_token_is_replaced_and_the_other_kept(tmp_path):
    agent_token, reviewer_token = tokens(seed())
    AgentCredential.objects.update(revoked_at=timezone.now())
    new_agent_token, same_reviewer_token = tokens(seed())
    assert new_agent_token != agent_token and same_reviewer_token == reviewer_token
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {new_agent_token}")
    assert client.get("/api/v1/memories/").status_code == 200
    # A tokens file from another database (or a damaged one) names tokens this one does not know.
    (tmp_path / "demo-tokens.json").write_text("not json")
    assert set(tokens(seed())).isdisjoint({new_agent_token, reviewer_token})
    stored = json.loads((tmp_path / "demo-tokens.json").read_text())
    assert [set(pair) for pair in stored.values()] == [{"agent", "reviewer"}]


def test_the_recall_bin_run_suggests_returns_only_items_that_match_its_words():
    text = seed()
    token = tokens(text)[0]
    body = json.loads(re.search(r"Try: curl .* -d '(\{.*\})'", text).group(1))
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    items = client.post("/api/v1/recall/", body, format="json").json()["items"]
    assert items and all(item["score_parts"]["lexical"] > 0 for item in items)
    assert all("email" in item["content"].lower() and "phone" in item["content"].lower() for item in items)
