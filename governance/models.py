"""Django's entry point for governance's models: it gathers every feature's models, so the app
registry finds them all when it imports this module. Each model lives with its feature (table
names and the `governance` app label are unchanged)."""

from governance.alerts.models import Alert, AlertPolicy, DigestPreference
from governance.dedup.models import DedupProposal, DedupProposalDrop
from governance.events.models import Delivery, WebhookSubscription
from governance.forget.models import ForgetRequest, ForgetTombstone, PropagationReceipt
from governance.golden.models import GoldenQuestion, GoldenRun
from governance.jobs.models import JobRun
from governance.retention.models import PrunedRecord
from governance.revocations.models import Revocation, RevocationRecord

__all__ = [
    "Alert",
    "AlertPolicy",
    "DedupProposal",
    "DedupProposalDrop",
    "Delivery",
    "DigestPreference",
    "ForgetRequest",
    "ForgetTombstone",
    "GoldenQuestion",
    "GoldenRun",
    "JobRun",
    "PropagationReceipt",
    "PrunedRecord",
    "Revocation",
    "RevocationRecord",
    "WebhookSubscription",
]
