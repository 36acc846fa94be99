"""One scope, every rendering: recall's hard filters (`memory.scope.Scope`) select the same records
as an ORM filter, as the running database's SQL (the lexical index's ranking statements, whichever
way PostgreSQL finds the rows, and the column filter the semantic index reads with) and as the
Python predicate as-of recall applies, for random records and random scopes. Times sit on either
side of the scope's moment and on it, so a `>` written as `>=` anywhere shows."""

import hashlib
import uuid
from contextlib import ExitStack
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from unittest import mock

import numpy as np
import pytest
from django.db import transaction
from hypothesis import HealthCheck, Phase, event, given, settings
from hypothesis import strategies as st

from memory.engine import current
from memory.engine.postgres import ranking as postgres_ranking
from memory.models import Agent, MemoryKind, MemoryRecord, Status
from memory.scope import Scope
from memory.search import ranking, semantic, vectors
from memory.search.build import serving_index

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
MOMENTS = [NOW + offset for offset in (timedelta(days=-1), timedelta(microseconds=-1), timedelta(0), timedelta(microseconds=1))]
MOMENTS.append(NOW + timedelta(days=1))
PURPOSES = ["support", "sales"]
SUBJECTS = ["customer/acme", "customer/globex", "two words", "kundin/ünïcode"]
KINDS = 3
SEMANTIC = "memory_search_sem_990017"  # a semantic index's storage, made for the test
QUERIES = ["", "alpha", "alpha zulu"]  # every record holds alpha, some zulu; "" ranks by the priors alone
# How PostgreSQL finds the rows: the whole scope in one statement (the defaults, for a scope this
# size), or sources chosen as for a large scope, walked a few rows at a time. SQLite reads none of these.
PATHS = [{}, {"SMALL_SCOPE": 0, "PAGE": 3, "PAGE_BEST": 1}]


def _record(owner: int, purpose: str, subject: str, kind: int, status: str, times: tuple, zulu: bool) -> dict:
    return {"owner": owner, "purpose": purpose, "subject": subject, "kind": kind, "status": status, "times": times, "zulu": zulu}


def _times(expires_at: datetime, valid_from: datetime | None, valid_to: datetime | None) -> tuple:
    if valid_from is not None and valid_to is not None and valid_to <= valid_from:
        valid_to = None  # the records' own constraint: a valid window ends after it starts
    return expires_at, valid_from, valid_to


# Records cluster around a drawn one (each field kept half the time), so that many pairs differ
# in a single field, and are weighted towards what recall returns (active, unexpired, valid now):
# a filter one rendering drops then shows up within a few examples.
LATER = [NOW + timedelta(days=1)] * 8
times = st.builds(
    _times, st.sampled_from(LATER + MOMENTS), st.sampled_from([None] * 4 + MOMENTS), st.sampled_from([None] * 4 + MOMENTS)
)


def _records_around(first: dict) -> st.SearchStrategy:
    def near(name: str, values: list) -> st.SearchStrategy:
        return st.sampled_from([first[name]] * len(values) + values)

    record = st.builds(
        _record,
        near("owner", [0, 1, 2]),  # one of the three agents (two tenants)
        near("purpose", PURPOSES),
        near("subject", SUBJECTS),
        near("kind", list(range(KINDS))),
        st.sampled_from([Status.ACTIVE] * 8 + list(Status)),
        times,
        st.booleans(),
    )
    return st.lists(record, min_size=3, max_size=16)


records = st.fixed_dictionaries(
    {
        "owner": st.integers(0, 2),
        "purpose": st.sampled_from(PURPOSES),
        "subject": st.sampled_from(SUBJECTS),
        "kind": st.integers(0, KINDS - 1),
    }
).flatmap(_records_around)
FIELDS = ["owner", "purpose", "subject", "kinds"]


def _scopes_near(specs: list[dict]) -> st.SearchStrategy:
    """Scopes, each drawn around one of the records: its owner, purpose, subject (or any) and kind
    (or any, or one more), with at most one of them drawn afresh."""

    def near(spec: dict, changed: str | None) -> st.SearchStrategy:
        fresh = {
            "owner": st.integers(0, 3),  # the three agents, and a tenant with another tenant's agent
            "purpose": st.sampled_from(PURPOSES),
            "subject": st.none() | st.sampled_from(SUBJECTS),
            "kinds": st.none() | st.lists(st.integers(0, KINDS - 1), unique=True, max_size=KINDS),  # empty: no kind
        }
        kept = {
            "owner": st.just(spec["owner"]),
            "purpose": st.just(spec["purpose"]),
            "subject": st.sampled_from([spec["subject"], None]),
            "kinds": st.sampled_from([[spec["kind"]], None, [spec["kind"], (spec["kind"] + 1) % KINDS]]),
        }
        return st.fixed_dictionaries({field: fresh[field] if field == changed else kept[field] for field in FIELDS})

    scope = st.tuples(st.sampled_from(specs), st.sampled_from([None, *FIELDS])).flatmap(lambda drawn: near(*drawn))
    return st.lists(scope, min_size=1, max_size=5)


examples = records.flatmap(lambda specs: st.tuples(st.just(specs), _scopes_near(specs)))


def _vector(text: str) -> bytes:
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "little")
    vector = np.random.default_rng(seed).standard_normal(semantic.DIMS).astype("<f4")
    return (vector / np.linalg.norm(vector)).astype("<f4").tobytes()


@pytest.fixture
def world(tenant, other_tenant):
    """Two tenants, three agents (two in the first), three kinds, the lexical index, and a semantic
    index's storage whose rows the checks fill with stand-in vectors (no model is loaded)."""
    agents = [
        Agent.objects.create(tenant=tenant, slug="support-bot"),
        Agent.objects.create(tenant=tenant, slug="sales-bot"),
        Agent.objects.create(tenant=other_tenant, slug="support-bot"),
    ]
    owners = [(agent.tenant_id, agent.pk) for agent in agents] + [(other_tenant.pk, agents[0].pk)]
    kinds = list(MemoryKind.objects.order_by("pk")[:KINDS])
    index = serving_index(None)
    semantic.build_storage(SEMANTIC, {}, encode=lambda texts: np.zeros((len(texts), semantic.DIMS), dtype=np.float32))
    return {"agents": agents, "owners": owners, "kinds": kinds, "index": index}


def _create(world: dict, specs: list[dict]) -> list[MemoryRecord]:
    made = []
    for n, spec in enumerate(specs):
        agent = world["agents"][spec["owner"]]
        expires_at, valid_from, valid_to = spec["times"]
        made.append(
            MemoryRecord(
                tenant_id=agent.tenant_id,
                agent=agent,
                purpose=spec["purpose"],
                subject=spec["subject"],
                kind=world["kinds"][spec["kind"]],
                content=f"Note alpha {n}{' zulu' if spec['zulu'] else ''}.",
                content_hash=f"sha256:{uuid.uuid4().hex * 2}",
                source_type="user_turn",
                authority=("user", "agent", "operator", "third_party")[n % 4],
                confidence=round(0.1 + (n % 9) / 10, 2),
                status=spec["status"],
                created_at=NOW - timedelta(days=10),
                confirmed_at=NOW - timedelta(hours=3 * n + 1),
                expires_at=expires_at,
                valid_from=valid_from,
                valid_to=valid_to,
            )
        )
    MemoryRecord.objects.bulk_create(made)
    pending = vectors.pending(SEMANTIC, limit=len(made))
    vectors.store_vectors(SEMANTIC, [(pk, digest, _vector(str(pk))) for pk, digest, _ in pending])
    return made


def _scope(world: dict, spec: dict) -> Scope:
    tenant_id, agent_id = world["owners"][spec["owner"]]
    kind_ids = None if spec["kinds"] is None else tuple(world["kinds"][k].pk for k in spec["kinds"])
    return Scope(
        tenant_id=tenant_id, agent_id=agent_id, purpose=spec["purpose"], now=NOW, subject=spec["subject"], kind_ids=kind_ids
    )


def _ranked(world: dict, scope: Scope, query: str, path: dict) -> set[uuid.UUID]:
    with ExitStack() as stack:
        for name, value in path.items():
            stack.enter_context(mock.patch.object(postgres_ranking, name, value))
        if path:
            stack.enter_context(mock.patch.object(ranking, "FIRST_FETCH", 2))
        return {row.record_id for row in ranking.rank(world["index"], scope, query)}


def _renderings(world: dict, made: list[MemoryRecord], scope: Scope) -> dict[str, set[uuid.UUID]]:
    where, params = scope.sql()
    found = {
        "ORM": set(MemoryRecord.objects.filter(scope.q()).values_list("pk", flat=True)),
        "Python predicate": {record.pk for record in made if scope.admits(record)},
        "SQL over the semantic index's columns": {uuid.UUID(str(pk)) for pk, _ in vectors.read_scope(SEMANTIC, where, params)},
    }
    for query in QUERIES:
        for n, path in enumerate(PATHS):
            found[f"SQL of the lexical ranking, {query or 'no words'!r}, path {n}"] = _ranked(world, scope, query, path)
    return found


def check_agreement(world: dict, **options) -> None:
    @settings(
        max_examples=options.pop("max_examples", 60),
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        **options,
    )
    @given(examples)
    def agree(example: tuple[list[dict], list[dict]]) -> None:
        specs, scope_specs = example
        with transaction.atomic():
            made = _create(world, specs)
            for spec in scope_specs:
                scope = _scope(world, spec)
                found = _renderings(world, made, scope)
                reference = found["ORM"]
                event("records in the scope" if reference else "an empty scope")
                differing = {name: ids ^ reference for name, ids in found.items() if ids != reference}
                assert not differing, (scope, differing)
            transaction.set_rollback(True)

    agree()


def test_every_rendering_of_the_scope_selects_the_same_records(world):
    check_agreement(world)


def _predicate_without_subject():
    admits = Scope.admits
    return mock.patch.object(Scope, "admits", lambda self, record: admits(replace(self, subject=None), record))


def _sql_without_valid_to():
    engine = current().ranking
    scope_where = engine.scope_where

    def without_valid_to(scope: Scope, alias: str = "d", **options) -> tuple[str, dict]:
        where, params = scope_where(scope, alias, **options)
        return where.replace(f" AND ({alias}.valid_to IS NULL OR {alias}.valid_to > %(now)s)", ""), params

    return mock.patch.object(engine, "scope_where", without_valid_to)


@pytest.mark.parametrize("breakage", [_predicate_without_subject, _sql_without_valid_to])
def test_the_check_sees_a_rendering_that_drops_a_filter(world, breakage):
    """The check itself: with one rendering dropping a filter, it fails."""
    with breakage(), pytest.raises(AssertionError):
        check_agreement(world, max_examples=60, derandomize=True, phases=[Phase.generate])
