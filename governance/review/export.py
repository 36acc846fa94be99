"""The reviewer's download of a tenant's memory (`/review/export/`): the same Markdown notes as
`manage.py export_memories` (memory.portable.export), as a zip. The form picks one of the
reviewer's tenants and optionally a subject and statuses; the download is a GET (it changes
nothing) of a tenant in the reviewer's scope, else 404. The zip is built in a spooled temporary
file (memory up to a few MB, then disk), and the export is logged without content."""

import tempfile

from django import forms
from django.http import FileResponse, Http404
from django.http.response import HttpResponseBase
from django.utils import timezone

from governance.review.common import ReviewerRequest, render_page, reviewer_required
from memory.models import SUBJECT_MAX_CHARS, Status, Tenant
from memory.portable.export import export_to_zip
from memory.selectors import tenants_in_scope

SPOOL_BYTES = 8 * 1024 * 1024


class ExportForm(forms.Form):
    tenant: "forms.ModelChoiceField[Tenant]" = forms.ModelChoiceField(queryset=None, to_field_name="slug", empty_label=None)
    subject = forms.CharField(required=False, max_length=SUBJECT_MAX_CHARS, help_text="Only this subject (exact); empty for all.")
    status = forms.MultipleChoiceField(
        choices=Status.choices,
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="Only these statuses; none ticked for all. Forgotten memories are exported as tombstones without content.",
    )

    def __init__(self, *args, tenants, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["tenant"].queryset = tenants


@reviewer_required
def export(request: ReviewerRequest) -> HttpResponseBase:
    """The form; submitting it (GET) downloads the zip."""
    tenants = tenants_in_scope(request.actor)
    if "tenant" not in request.GET:
        form = ExportForm(tenants=tenants, initial={"tenant": tenants.first()})
        return render_page(request, "review/export.html", {"nav": "export", "form": form})
    form = ExportForm(request.GET, tenants=tenants)
    if not form.is_valid():
        if "tenant" in form.errors:  # another tenant's export: as if it did not exist
            raise Http404("No such tenant in your scope.")
        return render_page(request, "review/export.html", {"nav": "export", "form": form}, status=400)
    tenant = form.cleaned_data["tenant"]
    root = f"{tenant.slug}-memories-{timezone.now():%Y%m%d-%H%M%S}"
    stream = tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES)  # noqa: SIM115  (FileResponse closes it once sent)
    export_to_zip(
        request.actor,
        tenant,
        stream,
        root=root,
        subject=form.cleaned_data["subject"] or None,
        statuses=form.cleaned_data["status"] or None,
    )
    stream.seek(0)
    return FileResponse(stream, as_attachment=True, filename=f"{root}.zip", content_type="application/zip")
