"""Recall as a function: hard filters first, explainable ranking, token budget."""

from datetime import timedelta

import pytest
from django.utils import timezone

from memory.errors import ScopeDenied, ValidationFailed
from memory.models import MemoryRecord
from memory.recall import parse_recall, recall

pytestmark = pytest.mark.django_db


def _recall(credential, **body):
    return recall(credential=credential, q=parse_recall({"purpose": "support", **body}))


def test_only_active_unexpired_valid_records_of_the_scope_are_recalled(write, credential, tenant, make_credential):
    active = write(content="Acme prefers email for invoices.")
    write(content="Acme prefers email, quarantined.", authority="agent", provenance={"source_type": "agent_inference"})
    write(content="Acme prefers email, not valid yet.", valid_from=(timezone.now() + timedelta(days=1)).isoformat())
    expired = write(content="Acme prefers email, expired.", ttl_seconds=60)
    MemoryRecord.objects.filter(pk=expired.pk).update(created_at=timezone.now() - timedelta(hours=2), expires_at=timezone.now() - timedelta(seconds=1))
    other_agent = make_credential(tenant, agent_slug="sales-bot")
    write(credential_=other_agent, content="Acme prefers email, other agent.")
    result = _recall(credential, query="email")
    assert [item.record.pk for item in result.items] == [active.pk]


def test_lexical_relevance_ranks_matching_content_first(write, credential):
    write(content="The office plant needs water on Mondays.")
    match = write(content="Acme wants to be contacted by email, never by phone.")
    result = _recall(credential, query="how does acme want to be contacted by email")
    assert result.items[0].record.pk == match.pk
    first = result.items[0]
    assert first.score_parts["lexical"] > 0
    assert first.score == pytest.approx(sum(first.score_parts.values()), abs=1e-3)
    assert first.context.startswith("[preference | user | confirmed ")
    assert first.context.endswith(match.content)


def test_token_budget_skips_what_does_not_fit_and_counts_it(write, credential):
    write(content="short email note")
    write(content="email " + "very long text " * 60)
    write(content="another short email note")
    result = _recall(credential, query="email", token_budget=60)
    assert result.omitted_for_budget == 1
    assert len(result.items) == 2
    assert result.tokens_used == sum(item.tokens for item in result.items) <= 60


def test_purpose_not_allowed_is_denied(credential):
    with pytest.raises(ScopeDenied):
        _recall(credential, purpose="billing", query="x")


def test_bad_recall_requests_are_validation_errors(credential):
    with pytest.raises(ValidationFailed) as exc:
        parse_recall({"purpose": "support", "limit": 0, "kinds": ["nope"], "everything": True})
    assert {"limit", "kinds", "everything"} <= set(exc.value.errors)


def test_recall_marks_last_used(write, credential):
    record = write(content="email please")
    _recall(credential, query="email")
    record.refresh_from_db()
    assert record.last_used_at is not None


def test_a_record_sharing_only_some_query_words_still_ranks_first(write, credential):
    write(content="The office plant needs water on Mondays.")
    partial = write(content="Send the quarterly invoices by email.")
    result = _recall(credential, query="how should acme receive invoices and reminders")
    assert result.items[0].record.pk == partial.pk
    assert result.items[0].score_parts["lexical"] > 0
    assert result.items[1].score_parts["lexical"] == 0
