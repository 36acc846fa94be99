"""The demo tenant's golden set: ten questions a support agent would ask, each with the demo memory
that answers it (`memory.management.commands.seed_demo.DEMO`, matched by content). Registered as a
demo extension in `GovernanceConfig.ready()`, so `seed_demo` writes them right after the memories;
CI seeds the demo and runs these through the runner as a gate on recall (tests/governance/test_golden.py).

Only records the demo leaves active and unexpired are expected (the quarantined web and tool claims
can never be recalled; the travelling note expires within minutes). The questions are phrased as an
agent asks, not copied from the memories: several share only one or two words with the record."""

from governance.golden.models import GoldenQuestion
from governance.golden.services import golden_question_create
from memory.actors import Actor
from memory.models import Agent, Status

EMAIL = "Prefers email over phone for routine updates."
BILLING = "Acme's billing contact is the finance team (finance@acme.example)."
DEPLOYS = "Deploys go through staging and need one approval."
PLAN = "Acme runs on the Enterprise plan."

DEMO_K = 3
PURPOSE = "support"

# (question, subject or "" for every subject, content of the record it must find)
DEMO_QUESTIONS: list[tuple[str, str, str]] = [
    ("should I call acme or send an email about a routine update", "customer/acme", EMAIL),
    ("acme contact preference phone or email", "", EMAIL),
    ("who is the billing contact at acme", "customer/acme", BILLING),
    ("which address do I send acme's invoice questions to, finance?", "", BILLING),
    ("what plan is acme on", "customer/acme", PLAN),
    ("is acme an enterprise customer", "", PLAN),
    ("how do deploys reach production", "team/deploys", DEPLOYS),
    ("does a deploy need approval before it ships", "", DEPLOYS),
    ("can I skip staging for a quick deploy", "", DEPLOYS),
    ("acme billing: who pays the invoices", "", BILLING),
]


def seed_demo_golden_questions(agent: Agent) -> int:
    """Add the ten golden questions to the demo agent's tenant, once; return how many were added."""
    if GoldenQuestion.objects.filter(tenant_id=agent.tenant_id).exists():
        return 0
    records = dict(
        agent.memories.filter(status=Status.ACTIVE, purpose=PURPOSE, content__in={c for _, _, c in DEMO_QUESTIONS}).values_list(
            "content", "pk"
        )
    )
    actor = Actor.job("seed_demo")
    for question, subject, content in DEMO_QUESTIONS:
        golden_question_create(
            actor=actor,
            tenant=agent.tenant,
            agent=agent,
            purpose=PURPOSE,
            subject=subject,
            question=question,
            expected=[records[content]],
            k=DEMO_K,
        )
    return len(DEMO_QUESTIONS)
