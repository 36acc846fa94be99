from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.core.management.base import BaseCommand
from django.db import transaction

from memory.actors import REVIEWERS_GROUP
from memory.models import ReviewerToken, Tenant

WEBHOOK_PERMISSIONS = {"content_type__app_label": "governance", "content_type__model": "webhooksubscription"}


class Command(BaseCommand):
    help = "Create (or update) a reviewer for a tenant and print a personal API token as the last line."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--tenant", required=True, action="append", help="May be given more than once.")
        parser.add_argument("--password", default=None)
        parser.add_argument(
            "--can-manage-webhooks",
            action="store_true",
            help="May subscribe, list, rotate and delete webhooks of its tenants (the API's /webhooks/).",
        )

    def handle(self, *args, **options):
        User = get_user_model()
        with transaction.atomic():
            user, created = User.objects.get_or_create(username=options["username"])
            if options["password"]:
                user.set_password(options["password"])
            elif created:
                user.set_unusable_password()
            user.save()
            user.groups.add(Group.objects.get_or_create(name=REVIEWERS_GROUP)[0])
            if options["can_manage_webhooks"]:
                # named by app label: memory does not import governance
                user.user_permissions.add(*Permission.objects.filter(**WEBHOOK_PERMISSIONS))
            for slug in options["tenant"]:
                tenant, _ = Tenant.objects.get_or_create(slug=slug, defaults={"name": slug})
                tenant.reviewers.add(user)
            _, raw = ReviewerToken.issue(user=user)
        self.stdout.write(f"Reviewer {user.username} ({'created' if created else 'updated'}) for {', '.join(options['tenant'])}")
        self.stdout.write(raw)
