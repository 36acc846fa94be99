"""Operations endpoints at the site root: /health/ here; /metrics is added next to it."""

from django.urls import path

from governance.ops import views

urlpatterns: list = [
    path("health/", views.health, name="health"),
]
