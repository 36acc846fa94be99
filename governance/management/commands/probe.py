"""`manage.py probe ROLE [--live] [--node NAME]`: the liveness or readiness of a web, worker or beat
process on this host (`governance.ops.probes`), for systemd or an orchestrator's exec probe. Prints
the result as one JSON object; exits 0 when it passes, 1 when it does not."""

import json
import socket

from django.core.management.base import BaseCommand, CommandError, CommandParser

from governance.ops.probes import ROLES, probe


class Command(BaseCommand):
    help = "Probe a web, worker or beat process on this host: liveness (--live) or readiness; exit 1 when it fails."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("role", choices=ROLES)
        parser.add_argument("--live", action="store_true", help="Liveness only (is it running), not readiness.")
        parser.add_argument(
            "--node",
            default=None,
            help="A worker's Celery node name (its -n; default celery@<this host's name>).",
        )

    def handle(self, *args, role: str, live: bool, node: str | None, **options) -> None:
        if node is not None and role != "worker":
            raise CommandError("--node names a worker.")
        if role == "worker" and node is None:
            node = f"celery@{socket.gethostname()}"
        ok, body = probe(role, live=live, node=node or "")
        self.stdout.write(json.dumps(body))
        if not ok:
            raise CommandError(f"{role} is not {'alive' if live else 'ready'}", returncode=1)
