from csp.decorators import csp_update
from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.templatetags.static import static
from django.urls import include, path, re_path
from django.utils.functional import lazy
from django.views import defaults
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from memory.api.problems import api_not_found

ADMIN_PREFIX = "admin/"

urlpatterns = [
    path("", RedirectView.as_view(pattern_name="review:home", permanent=False)),
    # Browsers ask for /favicon.ico on pages that name no icon (JSON, the API docs).
    path("favicon.ico", RedirectView.as_view(url=lazy(static, str)("site/favicon.svg"), permanent=True)),
    path(ADMIN_PREFIX, admin.site.urls),
    # Log in and out, and change one's own password; no password reset (no mail flow is designed
    # for it: an admin sets a forgotten password).
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    # The reviewer's own pages (the admin keeps Django's under registration/ for /admin/password_change/).
    path(
        "accounts/password_change/",
        auth_views.PasswordChangeView.as_view(template_name="account/password_change.html"),
        name="password_change",
    ),
    path(
        "accounts/password_change/done/",
        auth_views.PasswordChangeDoneView.as_view(template_name="account/password_change_done.html"),
        name="password_change_done",
    ),
    path("api/v1/", include("memory.api.urls")),
    path("api/v1/", include("governance.api.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    # Swagger UI with its start-up script as a file of its own (no inline script), and `data:`
    # images for its icons, under the site's Content-Security-Policy.
    path(
        "api/docs/",
        csp_update({"img-src": ["data:"]})(SpectacularSwaggerSplitView.as_view(url_name="api-schema")),
        name="api-docs",
    ),
    # Last of the API routes: any other /api/ URL is a problem+json 404, not an HTML page.
    re_path(r"^api/", api_not_found),
    path("review/", include("governance.review.urls")),
    path("", include("governance.ops.urls")),
]


def page_not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    """A 404 under /admin/ in the admin's frame and words (an admin is not sent to the review home);
    any other path gets templates/404.html, the reviewer's page."""
    if request.path_info.startswith(f"/{ADMIN_PREFIX}") and hasattr(request, "user"):
        return render(request, "admin/404.html", admin.site.each_context(request), status=404)
    return defaults.page_not_found(request, exception)


handler404 = page_not_found
