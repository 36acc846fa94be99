"""`seed_demo` tells the truth in history: a demo fact backdated to "confirmed long ago" has its
history row at that moment, with the same times as the record, so what recall would have returned
a moment ago (as-of recall, read from history) is what recall returns now."""

import io
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from governance.golden.demo import DEMO_QUESTIONS
from memory.actors import Actor
from memory.asof import history_model, recall_as_of, record_as_of
from memory.errors import RecordNotFound
from memory.management.commands.seed_demo import DEMO, TRY_RECALL
from memory.models import Agent, AgentCredential, MemoryRecord
from memory.recall import RecallQuery, recall

pytestmark = pytest.mark.django_db

# The demo's own questions: its golden set, the recall `bin/run` suggests, the README's and the
# reviewing guide's examples, and a one-word query that matches little.
QUERIES = [
    *((question, subject or None, None) for question, subject, _ in DEMO_QUESTIONS),
    (TRY_RECALL["query"], TRY_RECALL["subject"], TRY_RECALL["kinds"]),
    ("does acme prefer email or phone", "customer/acme", None),
    ("how should invoices be sent", "customer/acme", None),
    ("how to contact acme", None, None),
    ("contact", None, None),
    ("initech contract renewal", None, None),
]


@pytest.fixture(autouse=True)
def own_var_dir(settings, tmp_path):
    settings.VAR_DIR = tmp_path  # the demo keeps its tokens in APP_VAR_DIR


@pytest.fixture
def demo() -> AgentCredential:
    call_command("seed_demo", stdout=io.StringIO())
    return AgentCredential.objects.usable().get(agent__tenant__slug="acme", agent__slug="support-bot", label="demo")


def backdated() -> list[MemoryRecord]:
    stale_contents = {content for _, _, content, *_, stale_days in DEMO if stale_days}
    records = list(MemoryRecord.objects.filter(tenant__slug="acme", content__in=stale_contents))
    assert len(records) == len(stale_contents)
    return records


def test_backdated_demo_records_have_their_history_at_those_times(demo):
    seeded = timezone.now()
    for record in backdated():
        rows = list(history_model().objects.filter(id=record.pk))
        assert len(rows) == 1  # written once, through the write service, with its reason
        row = rows[0]
        assert row.history_change_reason == f"write.{record.status}"
        assert row.history_date == row.created_at == row.confirmed_at == row.status_changed_at == record.confirmed_at
        assert (row.created_at, row.confirmed_at, row.status_changed_at) == (
            record.created_at,
            record.confirmed_at,
            record.status_changed_at,
        )
        assert seeded - row.history_date > timedelta(days=1)
        # As of a day after its backdated confirmation the fact already existed, as it does now.
        actor = Actor.job("test")
        then = record_as_of(actor=actor, record_id=record.pk, at=row.history_date + timedelta(days=1))
        assert then.record.confirmed_at == record.confirmed_at and then.record.status == record.status
        with pytest.raises(RecordNotFound):
            record_as_of(actor=actor, record_id=record.pk, at=row.history_date - timedelta(seconds=1))


def test_as_of_recall_a_second_later_equals_live_recall_on_the_demo(demo):
    agent = Agent.objects.get(pk=demo.agent_id)
    # Live recall and the as-of recall one second later both rank at that later moment: recency is
    # measured at the moment recalled, and nothing else may differ.
    at = timezone.now() + timedelta(seconds=1)
    compared = 0
    for query, subject, kinds in QUERIES:
        q = RecallQuery(query=query, purpose="support", subject=subject, kinds=kinds, limit=10)
        live = recall(credential=demo, q=q, now=at)
        then = recall_as_of(agent=agent, q=q, at=at, now=at).result
        assert [(item.record.pk, item.score, item.score_parts, item.context) for item in then.items] == [
            (item.record.pk, item.score, item.score_parts, item.context) for item in live.items
        ], query
        assert (then.candidates, then.terms) == (live.candidates, live.terms), query
        compared += len(live.items)
    assert compared >= len(QUERIES)  # the queries find the demo's records, so the order is tested
