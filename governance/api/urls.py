"""Governance API routes under /api/v1/. Register further viewsets (dedup proposals) on `router`."""

from rest_framework.routers import SimpleRouter

from governance.api.views import ForgetRequestViewSet

app_name = "governance-api"

router = SimpleRouter()
router.register("forget", ForgetRequestViewSet, basename="forget")

urlpatterns = [
    *router.urls,
]
