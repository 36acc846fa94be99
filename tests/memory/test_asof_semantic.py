"""As-of recall fuses the semantic index as live recall does (`memory.asof`, `asof_ranking.similarity_at`):
a record keeps the index's vector while its content is unchanged, one whose content changed or that
left the index since is embedded from its content then, and nothing of a forgotten record is ever
embedded or ranked. Runs with the `semantic` extra installed (bin/test installs it)."""

import hashlib

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from memory import asof_ranking
from memory.asof import recall_as_of
from memory.models import MemoryRecord, ReviewerToken
from memory.recall import RecallQuery
from memory.search import IndexKind, gates, semantic, vectors
from memory.search.build import build_and_promote, request_rebuild
from memory.services import memory_forget_subject, memory_retire
from memory.tasks import embed_records

pytestmark = pytest.mark.django_db

QUESTION = "how does acme want to be contacted"
ANSWER = "Prefers email over phone."
# Share no word with the question (nor its stems): only the semantic part can put the answer first.
OTHERS = ["The office is in Berlin.", "Invoices leave on Mondays.", "Deploys run through staging first."]


@pytest.fixture(autouse=True)
def no_gates(monkeypatch):
    monkeypatch.setattr(gates, "_GATES", {})


@pytest.fixture
def embedded_texts(monkeypatch):
    """Every text the model is asked to embed during the test (the query's too)."""
    seen: list[str] = []
    real = semantic.embed

    def spy(texts):
        seen.extend(texts)
        return real(texts)

    monkeypatch.setattr(semantic, "embed", spy)
    semantic._query_vector.cache_clear()
    return seen


def tick():
    """A moment strictly between the changes before and after it (history times are microseconds)."""
    moment = timezone.now()
    while timezone.now() == moment:
        pass
    return moment


def build_semantic():
    return build_and_promote(request_rebuild(name="semantic", kind=IndexKind.SEMANTIC).pk)


def as_of(credential, at, query: str = QUESTION, min_relevance: float | None = None):
    q = RecallQuery(query=query, purpose="support", subject="customer/acme", min_relevance=min_relevance)
    return recall_as_of(agent=credential.agent, q=q, at=at)


def cosine(text: str, query: str = QUESTION) -> float:
    return float(semantic.embed([text])[0] @ semantic.query_vector(query))


def test_as_of_recall_fuses_the_semantic_index_with_the_vectors_it_holds(credential, write, embedded_texts):
    answer = write(content=ANSWER)
    for text in OTHERS:
        write(content=text)
    index = build_semantic()
    moment = tick()
    embedded_texts.clear()

    reconstructed = as_of(credential, moment)
    result = reconstructed.result
    assert result.semantic == index.name and result.semantic_unavailable is None
    top = result.items[0]
    assert top.record.pk == answer.pk and top.score_parts["lexical"] == 0
    assert list(top.score_parts) == ["lexical", "semantic", "fusion", "authority", "confidence", "recency"]
    assert top.score_parts["semantic"] == pytest.approx(cosine(ANSWER), abs=1e-4)
    # Every record's content is unchanged: the index's vectors serve, nothing but the query is embedded.
    assert embedded_texts[:1] == [QUESTION] and set(embedded_texts[1:]) <= {ANSWER}  # (the check above embeds)
    assert reconstructed.semantic_without == 0 and reconstructed.notes == []


def test_a_record_that_left_the_index_since_is_embedded_from_its_content_then(credential, write, reviewer_actor, embedded_texts):
    answer = write(content=ANSWER)
    for text in OTHERS:
        write(content=text)
    index = build_semantic()
    moment = tick()
    memory_retire(record_id=answer.pk, expected_version=answer.version, actor=reviewer_actor, note="outdated")
    assert vectors.count_rows(index.storage_name, embedded=True) == len(OTHERS)  # its vector is gone
    embedded_texts.clear()

    top = as_of(credential, moment).result.items[0]
    assert top.record.pk == answer.pk and top.score_parts["semantic"] == pytest.approx(cosine(ANSWER), abs=1e-4)
    assert ANSWER in embedded_texts and not set(OTHERS) & set(embedded_texts)


def test_a_record_whose_content_changed_since_gets_the_cosine_of_its_content_then(credential, write, embedded_texts):
    answer = write(content=ANSWER)
    for text in OTHERS:
        write(content=text)
    index = build_semantic()
    moment = tick()
    # The content changes in place (no service does that today; an import or a repair could): the
    # index's vector is now the new content's, which as-of recall must not use for the old one.
    changed = "The parking garage closes at ten."
    MemoryRecord.objects.filter(pk=answer.pk).update(
        content=changed, content_hash="sha256:" + hashlib.sha256(changed.encode()).hexdigest()
    )
    assert embed_records([str(answer.pk)]) == {index.name: 1}
    embedded_texts.clear()

    item = next(item for item in as_of(credential, moment).result.items if item.record.pk == answer.pk)
    assert item.record.content == ANSWER  # the record as it was then
    assert item.score_parts["semantic"] == pytest.approx(cosine(ANSWER), abs=1e-4)
    assert item.score_parts["semantic"] != pytest.approx(cosine(changed), abs=1e-3)
    assert ANSWER in embedded_texts and changed not in embedded_texts[:2]


def test_a_forgotten_record_is_neither_embedded_nor_ranked(credential, write, tenant, reviewer_actor, embedded_texts):
    kept = write(content=ANSWER, subject="customer/globex")
    forgotten = write(content="Acme wants to be reached by email.", subject="customer/acme")
    write(content=OTHERS[0], subject="customer/acme")
    build_semantic()
    moment = tick()
    memory_forget_subject(tenant_id=tenant.pk, subject="customer/acme", actor=reviewer_actor)
    embedded_texts.clear()

    reconstructed = recall_as_of(
        agent=credential.agent, q=RecallQuery(query=QUESTION, purpose="support"), at=moment
    )  # no subject: the forgotten ones were candidates then
    assert forgotten.pk in reconstructed.withheld
    assert [item.record.pk for item in reconstructed.result.items] == [kept.pk]
    assert reconstructed.result.items[0].score_parts["semantic"] > 0
    assert forgotten.content not in embedded_texts and OTHERS[0] not in embedded_texts


def test_beyond_the_embedding_limit_a_record_gets_no_semantic_share_and_the_response_says_so(
    credential, write, reviewer_actor, monkeypatch
):
    records = [write(content=text) for text in [ANSWER, *OTHERS]]
    build_semantic()
    moment = tick()
    for record in records[:2]:
        memory_retire(record_id=record.pk, expected_version=record.version, actor=reviewer_actor, note="outdated")
    monkeypatch.setattr(asof_ranking, "EMBED_LIMIT", 1)

    reconstructed = as_of(credential, moment, min_relevance=0.0)  # every record, the one without a share too
    shares = {item.record.pk: item.score_parts["semantic"] for item in reconstructed.result.items}
    assert reconstructed.semantic_without == 1
    assert sorted(shares[record.pk] > 0 for record in records[:2]) == [False, True]
    assert all(shares[record.pk] > 0 for record in records[2:])  # the index's own vectors
    assert any("without a semantic share" in note for note in reconstructed.notes)


def test_where_the_semantic_index_cannot_rank_as_of_recall_is_lexical_and_says_why(credential, write, monkeypatch):
    write(content=ANSWER)
    build_semantic()
    moment = tick()
    reason = "The semantic extra is not installed (torch missing): install the extra."
    monkeypatch.setattr(semantic, "extra_missing", lambda: reason)

    reconstructed = as_of(credential, moment)
    assert reconstructed.result.semantic == "" and reconstructed.result.semantic_unavailable == reason
    assert all("semantic" not in item.score_parts for item in reconstructed.result.items)
    assert any(reason in note for note in reconstructed.notes)


def test_as_of_recall_through_the_api_fuses_the_semantic_index(credential, write, reviewer):
    answer = write(content=ANSWER)
    for text in OTHERS:
        write(content=text)
    build_semantic()
    moment = tick()
    body = {
        "query": QUESTION,
        "purpose": "support",
        "subject": "customer/acme",
        "as_of": moment.isoformat().replace("+00:00", "Z"),
        "tenant": "acme",
        "agent": credential.agent.slug,
    }
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {ReviewerToken.issue(user=reviewer)[1]}")
    response = client.post("/api/v1/recall/", body, format="json")
    assert response.status_code == 200, response.json()
    top = response.json()["items"][0]
    assert top["id"] == str(answer.pk) and top["score_parts"]["semantic"] > 0
