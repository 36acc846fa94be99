"""The `expire` job: every active or quarantined record past `expires_at` gets the explicit
`expired` transition (history reason `job.expire`). The work is done by
`memory.services.memory_expire_due`: locked batches that skip rows another transaction holds, on
PostgreSQL each one statement (records and history rows together), along the expiry index or, when
many records are due, through the table in physical order; each batch its own transaction, so a
run killed mid-way loses only its uncommitted batch and the next run picks it up."""

from datetime import datetime

from memory.actors import Actor
from memory.services import memory_expire_due

ACTOR = Actor.job("expire")


def expire(*, now: datetime, batch_size: int) -> dict[str, int]:
    # `now` is fixed at the start of the run: records that come due while it runs wait for the
    # next run, so a run always ends.
    return {"expired": memory_expire_due(actor=ACTOR, now=now, batch_size=batch_size)}
