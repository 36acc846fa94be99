"""A reviewer's notification settings: the daily digest on or off (alerts always reach reviewers
with an email address: they are about queues rotting, which someone must hear about)."""

from django import forms
from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect

from governance.alerts.models import DigestPreference
from governance.alerts.selectors import alert_policies
from governance.review.common import ReviewerRequest, render_page, reviewer_required


class DigestForm(forms.Form):
    digest_enabled = forms.BooleanField(required=False, label="Send me the daily digest")


@reviewer_required
def notifications(request: ReviewerRequest) -> HttpResponse:
    preference = DigestPreference.objects.filter(user=request.user).first() or DigestPreference(user=request.user)
    if request.method == "POST":
        form = DigestForm(request.POST)
        if form.is_valid():
            preference.digest_enabled = form.cleaned_data["digest_enabled"]
            preference.save()
            messages.success(
                request, "Daily digest " + ("on." if preference.digest_enabled else "off: you will not get it any more.")
            )
            return redirect("review:notifications")
    form = DigestForm(initial={"digest_enabled": preference.digest_enabled})
    return render_page(
        request,
        "review/notifications.html",
        {
            "nav": "",
            "form": form,
            "preference": preference,
            "policies": alert_policies(request.actor),
        },
    )
