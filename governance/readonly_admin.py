"""The admin mixin for audit trails: rows the admin shows and never adds, edits or deletes.

A leaf module, so every feature's admin (`governance.jobs.admin`, `governance.forget.admin`, ...)
uses this one definition while `governance.admin` gathers them: no import cycle.
"""

from django.http import HttpRequest


class ReadOnlyAdminMixin:
    def has_add_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        return False
