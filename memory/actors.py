"""Who is acting: an agent credential, a human reviewer, an admin or a scheduled job. Services take
an Actor so that authorisation and the history row's actor are decided in one place."""

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

REVIEWERS_GROUP = "reviewers"

if TYPE_CHECKING:
    from django.contrib.auth.models import User

    from memory.models import AgentCredential


@dataclass(frozen=True)
class Actor:
    kind: str  # "agent" | "user" | "job"
    label: str
    channel: str  # first part of the history reason: agent.write, review.promote, admin.retire, job.expire
    credential: "AgentCredential | None" = None
    user: "User | None" = None
    tenant_ids: frozenset[int] | None = field(default=None)  # None = every tenant (jobs, superusers)

    @classmethod
    def for_credential(cls, credential: "AgentCredential") -> "Actor":
        agent = credential.agent
        return cls(
            kind="agent",
            label=f"agent:{agent.tenant.slug}/{agent.slug}",
            channel="agent",
            credential=credential,
            tenant_ids=frozenset({agent.tenant_id}),
        )

    @classmethod
    def for_user(cls, user: "User", *, channel: str = "review") -> "Actor":
        """A reviewer acts on the tenants assigned to them, and only while in the reviewers group;
        a superuser (admin) on every tenant."""
        if user.is_superuser:
            tenant_ids = None
        elif user.is_active and user.groups.filter(name=REVIEWERS_GROUP).exists():
            tenant_ids = frozenset(user.reviewed_tenants.values_list("id", flat=True))
        else:
            tenant_ids = frozenset()
        return cls(kind="user", label=f"user:{user.get_username()}", channel=channel, user=user, tenant_ids=tenant_ids)

    @classmethod
    def job(cls, name: str) -> "Actor":
        return cls(kind="job", label=f"job:{name}", channel="job")

    @property
    def is_human(self) -> bool:
        return self.kind == "user"

    @property
    def is_agent(self) -> bool:
        return self.kind == "agent"

    def in_tenants(self, queryset, field: str = "tenant_id"):
        """`queryset` limited to the tenants this actor may see (unchanged for jobs and superusers):
        the one place the tenant boundary is written for every model that has a tenant."""
        return queryset if self.tenant_ids is None else queryset.filter(**{f"{field}__in": self.tenant_ids})

    def may_access_tenant(self, tenant_id: int) -> bool:
        return self.tenant_ids is None or tenant_id in self.tenant_ids
