"""Agent API routes under /api/v1/: memories (write, read, list, transitions) and recall."""

from django.urls import path
from rest_framework.routers import SimpleRouter

from memory.api.indexes import SearchIndexListView
from memory.api.views import MemoryRecordViewSet, RecallView

app_name = "memory-api"

router = SimpleRouter()
router.register("memories", MemoryRecordViewSet, basename="memory")

urlpatterns = [
    path("recall/", RecallView.as_view(), name="recall"),
    path("indexes/", SearchIndexListView.as_view(), name="index-list"),
    *router.urls,
]
