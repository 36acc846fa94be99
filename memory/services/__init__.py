"""Lifecycle services: the only code that creates memory records or changes their status.

Every function is keyword-only and atomic; every transition takes the caller's expected version
(compare-and-swap under a row lock) and leaves exactly one history row per record with its reason
(`review.promote`, `job.expire`, ...), its actor and an optional note. The API, the reviewer UI,
the admin and the Celery jobs all call these. Every status change, bulk ones included, takes its
source and target statuses from `memory.models.TRANSITIONS`.

One module per concern: `write` (one write, idempotency), `batch`, `transitions` (one record,
compare-and-swap), `expiry`, `forget`, `revoke`, `last_used`, and `history` (history rows and bulk
moves); the rules they share with admission and governance are in `memory.policy`. Callers import
from here.
"""

from memory.policy import CHUNK, checked_note
from memory.services.batch import BatchItemResult, memory_write_batch
from memory.services.expiry import memory_expire_due
from memory.services.forget import ForgetOutcome, derived_at_any_depth, memory_forget_subject, record_id_set
from memory.services.history import HISTORY_COLUMNS, TRANSITION_FIELDS
from memory.services.last_used import MARK_GRANULARITY, memory_mark_used, write_last_used
from memory.services.revoke import RevokedSource, RevokeOutcome, memory_revoke_source, revocation_targets
from memory.services.transitions import (
    memory_confirm,
    memory_expire,
    memory_promote,
    memory_reject,
    memory_restore,
    memory_retire,
    memory_supersede,
    memory_supersede_by,
)
from memory.services.write import WriteResult, memory_write, reject_foreign_scope, request_fingerprint

__all__ = [
    "CHUNK",
    "HISTORY_COLUMNS",
    "MARK_GRANULARITY",
    "TRANSITION_FIELDS",
    "BatchItemResult",
    "ForgetOutcome",
    "RevokeOutcome",
    "RevokedSource",
    "WriteResult",
    "checked_note",
    "derived_at_any_depth",
    "memory_confirm",
    "memory_expire",
    "memory_expire_due",
    "memory_forget_subject",
    "memory_mark_used",
    "memory_promote",
    "memory_reject",
    "memory_restore",
    "memory_retire",
    "memory_revoke_source",
    "memory_supersede",
    "memory_supersede_by",
    "memory_write",
    "memory_write_batch",
    "record_id_set",
    "reject_foreign_scope",
    "request_fingerprint",
    "revocation_targets",
    "write_last_used",
]
