from django.contrib import admin
from django.urls import include, path
from django.views.generic import RedirectView

urlpatterns = [
    path("", RedirectView.as_view(pattern_name="review:home", permanent=False)),
    path("admin/", admin.site.urls),
    path("accounts/", include("django.contrib.auth.urls")),
    path("api/v1/", include("memory.api.urls")),
    path("api/v1/", include("governance.api.urls")),
    path("review/", include("governance.review.urls")),
    path("", include("governance.ops.urls")),
]
