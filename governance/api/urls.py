"""Governance API routes under /api/v1/: forget requests, dedup proposals, golden sets, revocations,
webhooks and the event feed."""

from django.urls import path
from rest_framework.routers import SimpleRouter

from governance.api.events import EventFeedView, WebhookViewSet
from governance.api.golden import GoldenQuestionViewSet, GoldenRunViewSet
from governance.api.revocations import RevocationViewSet
from governance.api.views import ForgetRequestViewSet, ProposalViewSet

app_name = "governance-api"

router = SimpleRouter()
router.register("forget", ForgetRequestViewSet, basename="forget")
router.register("proposals", ProposalViewSet, basename="proposal")
router.register("golden/runs", GoldenRunViewSet, basename="golden-run")
router.register("golden", GoldenQuestionViewSet, basename="golden")
router.register("revocations", RevocationViewSet, basename="revocation")
router.register("webhooks", WebhookViewSet, basename="webhook")

urlpatterns = [
    *router.urls,
    path("events/", EventFeedView.as_view(), name="events"),
]
