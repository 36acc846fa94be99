"""Revocations as a forget artifact. A revocation keeps the ids of the records it sent back
(content-free links) and the source it revoked. A session id or a source-URI prefix is provenance,
which forget propagation blanks on the records themselves; once every record such a revocation
touched is forgotten (or pruned), no record keeps that provenance any more, so neither does the
revocation: its value is erased. The kind of source, the counts, who, why and when stay. A token's
hint and an agent's slug name the app's own credentials, not a person, and stay."""

from django.db.models import Exists, OuterRef

from governance.revocations.models import Revocation, RevocationRecord
from memory.models import Status
from memory.services import record_id_set

ERASED = "(erased: every memory it revoked was forgotten)"
PROVENANCE_SOURCES = (Revocation.Source.SESSION_ID, Revocation.Source.SOURCE_URI_PREFIX)


class RevocationSourcesArtifact:
    name = "revocation_sources"
    covers = ("governance.Revocation", "governance.RevocationRecord")

    def purge(self, request, record_ids):
        note = (
            "Revoked session ids and source-URI prefixes erased where every memory the revocation touched is "
            "forgotten; the links (ids only), counts and reasons stay."
        )
        if not record_ids:
            return 0, note
        touched = RevocationRecord.objects.filter(record_id__in=record_id_set(record_ids)).values("revocation_id")
        kept = RevocationRecord.objects.filter(revocation=OuterRef("pk")).exclude(record__status=Status.FORGOTTEN)
        erased = (
            Revocation.objects.filter(pk__in=touched, source__in=PROVENANCE_SOURCES)
            .exclude(value=ERASED)
            .exclude(Exists(kept))
            .update(value=ERASED)
        )
        return erased, note
