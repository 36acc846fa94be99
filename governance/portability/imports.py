"""The import guard governance adds to `memory.portable.importer`: a note about a subject that was
forgotten in this tenant is refused, so an old export cannot bring a forgotten subject back. The
subject is matched by its keyed fingerprint against the tenant's tombstones, which outlive pruning
(and are re-created by a restore's re-forget)."""

from governance.forget.models import ForgetTombstone
from memory.fingerprints import subject_fingerprint
from memory.models import Tenant


def forgotten_subjects_guard(tenant: Tenant, subjects: set[str]) -> dict[str, str]:
    by_fingerprint = {subject_fingerprint(tenant.pk, subject): subject for subject in subjects}
    forgotten = ForgetTombstone.objects.filter(tenant=tenant, subject_fingerprint__in=list(by_fingerprint))
    return {
        by_fingerprint[fingerprint]: f"Its subject was forgotten here on {forgotten_at:%Y-%m-%d}: not imported."
        for fingerprint, forgotten_at in forgotten.values_list("subject_fingerprint", "forgotten_at")
    }
