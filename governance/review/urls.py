"""URLs of the reviewer UI, mounted at /review/."""

from django.urls import path

from governance.review import asof, dashboard, export, golden, holds, notifications, proposals, revocations, views

app_name = "review"
urlpatterns = [
    path("", views.home, name="home"),
    path("quarantine/", views.quarantine, name="quarantine"),
    path("quarantine/bulk/", views.quarantine_bulk, name="quarantine_bulk"),
    path("drift/", views.drift, name="drift"),
    path("memories/<uuid:pk>/", views.memory_detail, name="memory_detail"),
    path("memories/<uuid:pk>/<slug:action>/", views.memory_decide, name="memory_decide"),
    path("forget/", views.forget_list, name="forget_list"),
    path("forget/new/", views.forget_new, name="forget_new"),
    path("forget/<uuid:pk>/", views.forget_detail, name="forget_detail"),
    path("proposals/", proposals.proposal_list, name="proposals"),
    path("proposals/<uuid:pk>/", proposals.proposal_detail, name="proposal_detail"),
    path("proposals/<uuid:pk>/<slug:action>/", proposals.proposal_decide, name="proposal_decide"),
    path("dashboard/", dashboard.dashboard, name="dashboard"),
    path("export/", export.export, name="export"),
    path("golden/", golden.golden, name="golden"),
    path("golden/run/", golden.golden_run, name="golden_run"),
    path("golden/runs/<int:pk>/", golden.golden_run_detail, name="golden_run_detail"),
    path("golden/<uuid:pk>/remove/", golden.golden_question_remove, name="golden_question_remove"),
    path("revocations/", revocations.revocation_list, name="revocation_list"),
    path("revocations/new/", revocations.revocation_new, name="revocation_new"),
    path("revocations/<uuid:pk>/", revocations.revocation_detail, name="revocation_detail"),
    path("holds/", holds.hold_list, name="holds"),
    path("holds/<int:pk>/clear/", holds.hold_clear_view, name="hold_clear"),
    path("notifications/", notifications.notifications, name="notifications"),
    path("recall-as-of/", asof.recall_asof, name="recall_asof"),
]
