"""Keyed fingerprints of forgotten subjects: the one definition both apps use.

A subject ("customer/acme") is personal data. Once a forget has propagated, the forgotten records,
their history rows, the forget request and its tombstone keep `forgotten:<hex>` instead: an HMAC
(SHA-256) of the tenant and the subject under a server secret, so the subject cannot be read back
or confirmed by guessing without the key, yet a later forget of the same subject still finds them.

The key is `FORGET_FINGERPRINT_KEY` when set, else one derived from `SECRET_KEY`. Changing it (or
SECRET_KEY while the former is unset) makes earlier fingerprints unmatchable, so production should
set it once and keep it.
"""

import re

from django.conf import settings
from django.db.models import QuerySet
from django.utils.crypto import salted_hmac

FINGERPRINT_PREFIX = "forgotten:"
_FINGERPRINT = re.compile(r"forgotten:[0-9a-f]{64}")
_KEY_SALT = "governed-memory.forgotten-subject"


def is_subject_fingerprint(value: str) -> bool:
    return bool(_FINGERPRINT.fullmatch(value or ""))


def subject_fingerprint(tenant_id: int, subject: str) -> str:
    """`forgotten:` + 64 hex digits (74 characters, within every subject column). A fingerprint
    is its own fingerprint, so scrubbing twice changes nothing and forgetting by fingerprint works."""
    if is_subject_fingerprint(subject):
        return subject
    secret = getattr(settings, "FORGET_FINGERPRINT_KEY", "") or settings.SECRET_KEY
    message = f"{tenant_id}\x00{subject}".encode("utf-8", "surrogatepass")
    return FINGERPRINT_PREFIX + salted_hmac(_KEY_SALT, message, secret=secret, algorithm="sha256").hexdigest()


def records_about(queryset: QuerySet, *, tenant_id: int, subject: str) -> QuerySet:
    """Rows of `queryset` (any model with `tenant_id` and `subject`) about `subject` in the tenant:
    stored under the subject itself or, once forgotten, under its fingerprint. Given a fingerprint
    (a forget re-applied from the ledger, e.g. after a restore), also the rows whose plain subject
    has that fingerprint."""
    queryset = queryset.filter(tenant_id=tenant_id)
    subjects = {subject, subject_fingerprint(tenant_id, subject)}
    if is_subject_fingerprint(subject):
        known = queryset.order_by().values_list("subject", flat=True).distinct()
        subjects.update(plain for plain in known if subject_fingerprint(tenant_id, plain) == subject)
    return queryset.filter(subject__in=subjects)


_SOURCE_KEY_SALT = "governed-memory.held-source"


def source_fingerprint(tenant_id: int, scope: str, value: str) -> str:
    """The keyed fingerprint a source hold (memory.models.SourceHold) keeps of a session id or an
    address prefix: `<scope>:` + 64 hex digits, under the same key as subject fingerprints."""
    secret = getattr(settings, "FORGET_FINGERPRINT_KEY", "") or settings.SECRET_KEY
    message = f"{tenant_id}\x00{scope}\x00{value}".encode("utf-8", "surrogatepass")
    return f"{scope}:" + salted_hmac(_SOURCE_KEY_SALT, message, secret=secret, algorithm="sha256").hexdigest()
