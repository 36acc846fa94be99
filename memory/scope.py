"""Recall's scope, defined once: the hard filters every recall path applies before it ranks.

A record is in the scope when it belongs to the tenant and the agent, has the purpose (one the
token allows: recall checks that before it makes a scope), has the subject and one of the kinds
when those are given, is active, is unexpired at `now` (expires_at after it), and is valid then
(valid_from at or before `now`, valid_to after it; either end may be open).

The scope renders itself for each place that filters, and every rendering selects the same
records (tests/memory/test_scope_agreement.py holds them to it):
- `q()`: the ORM filter, over the records or their history rows (the fields are named alike);
- `admits()`: a Python predicate over anything with those attributes (as-of recall's rows);
- SQL in the running database's dialect, written by the engine (`memory.engine.<vendor>.ranking`):
  `sql()` over a search index's copy of the columns, and the ranking statements' own rendering
  through the index's scope terms. A search index holds the active records only (its triggers
  keep it so), so in SQL the status is the index's membership rather than a clause.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from django.db.models import Q

from memory.models import Status

STATUS = Status.ACTIVE  # the one status recall returns


class Scoped(Protocol):
    """What the Python predicate reads of a record (a MemoryRecord or one of its history rows)."""

    tenant_id: int
    agent_id: int
    purpose: str
    subject: str
    kind_id: int
    status: str
    expires_at: datetime
    valid_from: datetime | None
    valid_to: datetime | None


@dataclass(frozen=True)
class Scope:
    """The hard filters of one recall: whose records (tenant, agent), which of them (purpose,
    optional subject, optional kinds; `kind_ids` None: any kind, empty: none), and when (`now`,
    for status, expiry and validity)."""

    tenant_id: int
    agent_id: int
    purpose: str
    now: datetime
    subject: str | None = None
    kind_ids: tuple[int, ...] | None = None

    # ------------------------------------------------------------------ the ORM

    def q(self, *, timely: bool = True) -> Q:
        """The filter as a Q over records or history rows; `timely=False` leaves out expiry and
        validity (the collection BM25 counts)."""
        return self.owner() & self.filters(
            purpose=self.purpose, now=self.now, subject=self.subject, kind_ids=self.kind_ids, timely=timely
        )

    def owner(self) -> Q:
        """Whose records: the tenant's and the agent's, in any status."""
        return Q(tenant_id=self.tenant_id, agent_id=self.agent_id)

    @staticmethod
    def filters(
        *,
        purpose: str,
        now: datetime,
        subject: str | None = None,
        kind_ids: tuple[int, ...] | None = None,
        timely: bool = True,
    ) -> Q:
        """`q()` but the owner, for a queryset the caller has already bounded by tenant and agent
        (`memory.recall.hard_filters`)."""
        q = Q(purpose=purpose, status=STATUS)
        if subject is not None:
            q &= Q(subject=subject)
        if kind_ids is not None:
            q &= Q(kind_id__in=kind_ids)
        if timely:
            q &= (
                Q(expires_at__gt=now)
                & (Q(valid_from__isnull=True) | Q(valid_from__lte=now))
                & (Q(valid_to__isnull=True) | Q(valid_to__gt=now))
            )
        return q

    # ------------------------------------------------------------------ Python

    def admits(self, record: Scoped) -> bool:
        """The filter as a predicate over one record or history row."""
        return (
            record.tenant_id == self.tenant_id
            and record.agent_id == self.agent_id
            and record.purpose == self.purpose
            and record.status == STATUS
            and (self.subject is None or record.subject == self.subject)
            and (self.kind_ids is None or record.kind_id in self.kind_ids)
            and self.timely(record)
        )

    def timely(self, record: Scoped) -> bool:
        """Expiry and validity alone: unexpired at `now` and within the valid window."""
        return (
            record.expires_at > self.now
            and (record.valid_from is None or record.valid_from <= self.now)
            and (record.valid_to is None or record.valid_to > self.now)
        )

    # ------------------------------------------------------------------ SQL

    def sql(self, alias: str = "d", *, timely: bool = True) -> tuple[str, dict[str, Any]]:
        """The filter over a search index's copy of the columns (alias `alias`), in the running
        database's dialect, with its parameters (the engine writes it)."""
        from memory.engine import current

        return current().ranking.scope_where(self, alias, timely=timely)
