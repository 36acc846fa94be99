from django.contrib import admin
from django.templatetags.static import static
from django.urls import include, path, re_path
from django.utils.functional import lazy
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from memory.api.problems import api_not_found

urlpatterns = [
    path("", RedirectView.as_view(pattern_name="review:home", permanent=False)),
    # Browsers ask for /favicon.ico on pages that name no icon (JSON, the API docs).
    path("favicon.ico", RedirectView.as_view(url=lazy(static, str)("site/favicon.svg"), permanent=True)),
    path("admin/", admin.site.urls),
    path("accounts/", include("django.contrib.auth.urls")),
    path("api/v1/", include("memory.api.urls")),
    path("api/v1/", include("governance.api.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
    # Last of the API routes: any other /api/ URL is a problem+json 404, not an HTML page.
    re_path(r"^api/", api_not_found),
    path("review/", include("governance.review.urls")),
    path("", include("governance.ops.urls")),
]
