"""Golden questions as a forget artifact. A question's text was written about its records and its
subject ("what plan is Jane Doe on?"), so it may hold the personal data a forget removes. Every
question that expected a forgotten record, or asks about the forgotten subject in that tenant, is
deleted; its links to the records go with it. Past runs stay: they keep question and record ids
and scores only, never text."""

from django.db.models import Q

from governance.golden.models import GoldenQuestion
from memory.services import record_id_set


class GoldenQuestionsArtifact:
    name = "golden_questions"
    covers = ("governance.GoldenQuestion", "governance.GoldenQuestion_expected")

    def purge(self, request, record_ids):
        about = Q(tenant_id=request.tenant_id, subject=request.subject)
        if record_ids:
            about |= Q(
                pk__in=GoldenQuestion.expected.through.objects.filter(memoryrecord_id__in=record_id_set(record_ids)).values(
                    "goldenquestion_id"
                )
            )
        questions = GoldenQuestion.objects.filter(about)
        removed = questions.count()
        if removed:
            # Deleting the questions deletes their record links (the through rows) by cascade.
            questions.delete()
        return removed, (
            "Golden questions that expected a forgotten record or asked about the subject deleted "
            "(their text may describe it); golden runs keep ids and scores only."
        )
