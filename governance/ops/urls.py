"""Operations endpoints at the site root: /health/ (and its per-role probes live/ and ready/) and
/metrics (no auth; none carries content)."""

from django.urls import path

from governance.ops import views
from governance.ops.metrics import MetricsView

urlpatterns: list = [
    path("health/", views.health, name="health"),
    path("health/live/", views.live, name="health_live"),
    path("health/ready/", views.ready, name="health_ready"),
    path("metrics", MetricsView.as_view(), name="metrics"),
]
