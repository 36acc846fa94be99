"""`manage.py import_memories DIR --tenant T --agent A [--trusted | --token TOKEN]`: every note
under DIR (an export, or notes written by hand in the same format) becomes a write with provenance
`import` through the lifecycle services (memory.portable.importer).

Which credential writes: with `--token`, that agent token (its purposes and capabilities apply);
otherwise the agent's own import credential, which may import trusted memory only with
`--trusted` (user and operator claims are then admitted like the original writes; without it they
wait in quarantine for a reviewer). Tenant and agent are created if missing.

Prints one line per file (imported, already_imported, skipped, refused or error, with the reason)
and a JSON summary on the last line; exits 1 if any file was an error (the others are imported)."""

import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from memory.models import Agent, AgentCredential, Tenant, hash_token
from memory.portable.importer import import_notes, read_directory


class Command(BaseCommand):
    help = "Import Markdown notes (an export) as writes with provenance 'import', through the lifecycle."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("directory", type=Path)
        parser.add_argument("--tenant", required=True, help="Tenant slug (created if missing).")
        parser.add_argument(
            "--agent", required=True, help="Agent slug (created if missing): every note is written as this agent."
        )
        who = parser.add_mutually_exclusive_group()
        who.add_argument(
            "--trusted",
            action="store_true",
            help="Write with the agent's trusted import credential: user and operator claims skip quarantine.",
        )
        who.add_argument(
            "--token", default=None, help="Write with this agent token instead (its purposes and capabilities apply)."
        )

    def handle(self, *args, directory: Path, tenant: str, agent: str, trusted: bool, token: str | None, **options) -> None:
        if not directory.is_dir():
            raise CommandError(f"{directory} is not a directory. Nothing was imported.")
        credential = None
        if token:
            credential = (
                AgentCredential.objects.usable().select_related("agent__tenant").filter(token_hash=hash_token(token)).first()
            )
            if credential is None or (credential.agent.tenant.slug, credential.agent.slug) != (tenant, agent):
                raise CommandError(f"The token is not a usable token of agent {tenant}/{agent}. Nothing was imported.")
            agent_row = credential.agent
        else:
            with transaction.atomic():
                tenant_row, _ = Tenant.objects.get_or_create(slug=tenant, defaults={"name": tenant})
                agent_row, _ = Agent.objects.get_or_create(tenant=tenant_row, slug=agent, defaults={"name": agent})

        report = import_notes(files=read_directory(directory), credential=credential, agent=agent_row, trusted=trusted)
        for result in report.files:
            target = f" -> {result.record_id} ({result.status})" if result.record_id else ""
            reasons = f": {' '.join(result.messages)}" if result.messages else ""
            self.stdout.write(f"{result.outcome:<16} {result.path}{target}{reasons}")
        counts = report.counts()
        self.stdout.write(json.dumps({"directory": str(directory), "tenant": tenant, "agent": agent, **counts}))
        if counts["error"]:
            raise CommandError(
                f"{counts['error']} of {counts['files']} files could not be imported (see above); nothing was written for them.",
                returncode=1,
            )
