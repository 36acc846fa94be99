"""Operations endpoints at the site root: /health/ and /metrics (no auth; neither carries content)."""

from django.urls import path

from governance.ops import views
from governance.ops.metrics import MetricsView

urlpatterns: list = [
    path("health/", views.health, name="health"),
    path("metrics", MetricsView.as_view(), name="metrics"),
]
