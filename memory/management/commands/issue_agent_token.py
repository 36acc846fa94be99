from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from memory.models import Agent, AgentCredential, Tenant


class Command(BaseCommand):
    help = "Issue a bearer token for an agent (creating tenant and agent if missing). The token is the last line."

    def add_arguments(self, parser):
        parser.add_argument("--tenant", required=True)
        parser.add_argument("--agent", required=True)
        parser.add_argument("--purposes", required=True, help="Comma-separated purposes, e.g. support,billing")
        parser.add_argument("--can-forget", action="store_true")
        parser.add_argument("--can-confirm", action="store_true")
        parser.add_argument("--can-assert-operator", action="store_true")
        parser.add_argument(
            "--can-import-trusted",
            action="store_true",
            help="Document and import claims with user or operator authority skip review (a trusted migration).",
        )
        parser.add_argument("--label", default="")

    def handle(self, *args, **options):
        purposes = [p.strip() for p in options["purposes"].split(",") if p.strip()]
        if not purposes:
            raise CommandError("--purposes needs at least one purpose.")
        with transaction.atomic():
            tenant, _ = Tenant.objects.get_or_create(slug=options["tenant"], defaults={"name": options["tenant"]})
            agent, _ = Agent.objects.get_or_create(tenant=tenant, slug=options["agent"], defaults={"name": options["agent"]})
            credential, raw = AgentCredential.issue(
                agent=agent,
                purposes=purposes,
                label=options["label"],
                can_forget=options["can_forget"],
                can_confirm=options["can_confirm"],
                can_assert_operator=options["can_assert_operator"],
                can_import_trusted=options["can_import_trusted"],
            )
        self.stdout.write(f"Issued token {credential.token_hint}… for {agent} (purposes: {', '.join(credential.purposes)})")
        self.stdout.write(raw)
