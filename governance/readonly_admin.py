"""The admin mixin for audit trails: rows the admin shows and never adds, edits or deletes.

A leaf module, so the feature admins (`governance.jobs.admin`, ...) can use it while
`governance.admin` imports them to register their models: no import cycle.
"""

from django.http import HttpRequest


class ReadOnlyAdminMixin:
    def has_add_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        return False
