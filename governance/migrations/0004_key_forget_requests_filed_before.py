"""Requests filed before forget requests named their requester by key and kept subjects as keyed
fingerprints (memory.fingerprints):
- `requested_by_agent` is filled from the `agent:<tenant>/<agent>` label. The credential that filed
  them is not known, so agents read them back no more; reviewers still do.
- Tombstones written with the old unkeyed sha256 are rewritten to the keyed fingerprint (the
  requests still name the subject), and completed requests are reopened: the next
  `propagate_forgets` run blanks what propagation then left behind (provenance strings) and
  replaces the subject by its fingerprint on the records, their history, proposals and the request.
"""

import hashlib
import re

from django.conf import settings
from django.db import migrations
from django.utils.crypto import salted_hmac

# `memory.fingerprints` as this migration ran it (a frozen copy): the keyed fingerprint of a
# tenant's subject, under FORGET_FINGERPRINT_KEY or else SECRET_KEY (the deployment's key, read
# when the migration runs, as the code of the day reads it).
_FINGERPRINT = re.compile(r"forgotten:[0-9a-f]{64}")
_KEY_SALT = "governed-memory.forgotten-subject"


def is_subject_fingerprint(value: str) -> bool:
    return bool(_FINGERPRINT.fullmatch(value or ""))


def subject_fingerprint(tenant_id: int, subject: str) -> str:
    if is_subject_fingerprint(subject):
        return subject
    secret = getattr(settings, "FORGET_FINGERPRINT_KEY", "") or settings.SECRET_KEY
    message = f"{tenant_id}\x00{subject}".encode("utf-8", "surrogatepass")
    return "forgotten:" + salted_hmac(_KEY_SALT, message, secret=secret, algorithm="sha256").hexdigest()


def backfill_requesting_agents(apps, schema_editor):
    ForgetRequest = apps.get_model("governance", "ForgetRequest")
    Agent = apps.get_model("memory", "Agent")
    labels = (
        ForgetRequest.objects.order_by()
        .filter(requested_by__startswith="agent:")
        .values_list("requested_by", flat=True)
        .distinct()
    )
    for label in labels:
        tenant_slug, _, agent_slug = label.removeprefix("agent:").partition("/")
        agent = Agent.objects.filter(tenant__slug=tenant_slug, slug=agent_slug).first()
        if agent is not None:
            ForgetRequest.objects.filter(requested_by=label).update(requested_by_agent=agent)


def key_the_fingerprints_and_reopen(apps, schema_editor):
    ForgetRequest = apps.get_model("governance", "ForgetRequest")
    ForgetTombstone = apps.get_model("governance", "ForgetTombstone")
    filed = ForgetRequest.objects.order_by().values_list("tenant_id", "tenant__slug", "subject").distinct()
    for tenant_id, tenant_slug, subject in filed:
        if is_subject_fingerprint(subject):
            continue
        unkeyed = hashlib.sha256(f"{tenant_slug}\x00{subject}".encode()).hexdigest()
        keyed = subject_fingerprint(tenant_id, subject)
        old = ForgetTombstone.objects.filter(tenant_id=tenant_id, subject_fingerprint=unkeyed)
        if ForgetTombstone.objects.filter(tenant_id=tenant_id, subject_fingerprint=keyed).exists():
            old.delete()
        else:
            old.update(subject_fingerprint=keyed)
    ForgetRequest.objects.filter(status="completed").update(status="propagating", completed_at=None)


class Migration(migrations.Migration):
    dependencies = [
        ("governance", "0003_forget_requester_keys_and_keyed_fingerprints"),
    ]

    operations = [
        migrations.RunPython(backfill_requesting_agents, migrations.RunPython.noop),
        migrations.RunPython(key_the_fingerprints_and_reopen, migrations.RunPython.noop),
    ]
