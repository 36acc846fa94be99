"""The golden recall page through Django's test client: the reviewer's tenants only, each question
with its latest result, the run button (POST only, a tenant outside the reviewer's scope is a 404
that runs nothing), the run detail page, removing a question, and the nav link."""

import pytest
from django.contrib.messages import get_messages
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from governance.golden.models import GoldenQuestion, GoldenRun
from governance.golden.runner import run_golden_sets
from governance.golden.services import golden_question_create
from memory.actors import Actor

pytestmark = pytest.mark.django_db


def golden_url() -> str:
    return reverse("review:golden")


def run_url() -> str:
    return reverse("review:golden_run")


@pytest.fixture
def question(tenant, credential, write, reviewer_actor):
    record = write(content="The billing contact is the finance team.", subject="customer/acme")
    return golden_question_create(
        actor=reviewer_actor,
        tenant=tenant,
        agent=credential.agent,
        purpose="support",
        question="who is the billing contact",
        expected=[record.pk],
        k=3,
    )


@pytest.fixture
def foreign_question(other_tenant, make_credential, write, make_reviewer):
    credential = make_credential(other_tenant)
    record = write(credential_=credential, content="Globex wants invoices in EUR.", subject="customer/globex")
    return golden_question_create(
        actor=Actor.for_user(make_reviewer(other_tenant, username="gina")),
        tenant=other_tenant,
        agent=credential.agent,
        purpose="support",
        question="which currency for globex invoices",
        expected=[record.pk],
    )


def test_anonymous_user_is_sent_to_login(client):
    response = client.get(golden_url())
    assert response.status_code == 302 and response["Location"].startswith(reverse("login"))


def test_the_page_lists_the_reviewers_questions_only_with_a_run_button(reviewer_client, question, foreign_question):
    response = reviewer_client.get(golden_url())
    html = response.content.decode()
    assert response.status_code == 200
    assert "who is the billing contact" in html and "globex" not in html.lower()
    assert f'action="{run_url()}"' in html and 'name="tenant" value="acme"' in html
    assert "not run yet" in html
    assert f'href="{golden_url()}" aria-current="page"' in html  # the nav link, current


def test_the_latest_result_of_each_question_is_shown(reviewer_client, tenant, question):
    (run,) = run_golden_sets(tenants=[tenant])
    html = reviewer_client.get(golden_url()).content.decode()
    if run.index_active:
        assert "hit</span> rank 1" in html and "hit@k 100%" in html
    assert f"#{run.pk}" in html  # in the recent runs either way


def test_run_now_runs_the_tenants_set_and_shows_the_run(reviewer_client, question):
    response = reviewer_client.post(run_url(), {"tenant": "acme"})
    run = GoldenRun.objects.get()
    assert response.status_code == 302 and response["Location"] == reverse("review:golden_run_detail", args=[run.pk])
    assert (run.trigger, run.requested_by, run.questions, run.hits) == ("manual", "user:rita", 1, 1)
    messages = [str(m) for m in get_messages(response.wsgi_request)]
    assert messages == [f"Golden set of acme ran on index {run.index}: hit@k 100%, MRR 1.00 over 1 question."]
    detail = reviewer_client.get(response["Location"]).content.decode()
    assert "who is the billing contact" in detail and "hit</span>" in detail


def test_run_now_is_post_only_and_refuses_a_tenant_outside_the_scope(reviewer_client, question, foreign_question):
    assert reviewer_client.get(run_url()).status_code == 405
    assert reviewer_client.post(run_url(), {"tenant": "globex"}).status_code == 404
    assert reviewer_client.post(run_url(), {}).status_code == 404
    assert not GoldenRun.objects.exists()


def test_run_now_without_questions_says_so(reviewer_client, tenant):
    response = reviewer_client.post(run_url(), {"tenant": "acme"}, follow=True)
    assert "has no golden questions yet" in response.content.decode() and not GoldenRun.objects.exists()


def test_another_tenants_run_is_a_404(reviewer_client, other_tenant, foreign_question):
    (run,) = run_golden_sets(tenants=[other_tenant])
    assert reviewer_client.get(reverse("review:golden_run_detail", args=[run.pk])).status_code == 404


def test_removing_a_question_needs_a_post_in_scope(reviewer_client, question, foreign_question):
    remove = reverse("review:golden_question_remove", args=[question.pk])
    assert reviewer_client.get(remove).status_code == 405
    assert reviewer_client.post(reverse("review:golden_question_remove", args=[foreign_question.pk])).status_code == 404
    assert reviewer_client.post(remove).status_code == 302
    assert list(GoldenQuestion.objects.values_list("pk", flat=True)) == [foreign_question.pk]


def test_run_now_needs_the_csrf_token(reviewer, question):
    client = Client(enforce_csrf_checks=True)
    client.force_login(reviewer)
    assert client.post(run_url(), {"tenant": "acme"}).status_code == 403
    assert not GoldenRun.objects.exists()


def _page_queries(client) -> int:
    with CaptureQueriesContext(connection) as ctx:
        assert client.get(golden_url()).status_code == 200
    return len(ctx.captured_queries)


def test_the_page_does_not_query_per_question(reviewer_client, tenant, credential, write, reviewer_actor, question):
    run_golden_sets(tenants=[tenant])
    few = _page_queries(reviewer_client)
    for n in range(5):
        record = write(content=f"Fact number {n} about invoices.", subject="customer/acme")
        golden_question_create(
            actor=reviewer_actor,
            tenant=tenant,
            agent=credential.agent,
            purpose="support",
            question=f"fact {n}",
            expected=[record.pk],
        )
    run_golden_sets(tenants=[tenant])
    assert _page_queries(reviewer_client) == few
