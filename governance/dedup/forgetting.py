"""Dedup proposals as a forget artifact: a proposal's subject and a reviewer's decision note may
quote the records it compared."""

from django.db.models import Q

from governance.dedup.models import DedupProposal, DedupProposalDrop
from governance.forget.artifacts import scrub_rows
from memory.services import record_id_set


class DedupProposalsArtifact:
    """A dedup proposal holds ids, versions and a score, but also the scope's subject and the
    reviewer's free-text decision note, which may quote the records it compared. On every proposal
    that involves a forgotten record (keep or drop) the note is blanked and the subject replaced by
    its fingerprint. The decision itself stays."""

    name = "dedup_proposals"
    covers = ("governance.DedupProposal",)

    def purge(self, request, record_ids):
        if not record_ids:
            return 0, self._note
        involved = DedupProposal.objects.filter(
            Q(keep_id__in=record_id_set(record_ids))
            | Q(pk__in=DedupProposalDrop.objects.filter(record_id__in=record_id_set(record_ids)).values("proposal_id"))
        )
        return scrub_rows(involved, blank=("decision_note",)), self._note

    _note = (
        "Reviewer decision notes blanked on dedup proposals involving the records, subject replaced by its "
        "keyed fingerprint; decisions kept."
    )
