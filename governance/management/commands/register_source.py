"""`manage.py register_source --tenant T --name NAME --public-key KEY [--authority A]
[--auto-admit-kinds k1,k2]`: register a source whose results are signed (signed provenance), or set
its policy again. `--rotate --public-key NEW [--overlap-hours H]` switches it to a new key, the old
one verifying for the overlap (24 hours unless given). `--revoke [--public-key KEY] --by USER
--reason TEXT` revokes a key (or, without `--public-key`, every key it has): a revocation, so
everything the key verified goes back to quarantine, derived records included, with a receipt.

KEY is an Ed25519 public key, PEM or raw base64; `@PATH` reads it from a file. The last line of the
output is one JSON object: the source, its policy and its keys."""

import json
from datetime import timedelta
from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from governance.revocations.services import resolve_source, revocation_create
from memory.actors import Actor
from memory.errors import DomainError
from memory.models import Authority, RegisteredSource, SourceKey, Tenant
from memory.provenance.keys import InvalidPublicKey, read_public_key
from memory.provenance.registry import ROTATION_OVERLAP, source_register, source_rotate

ACTOR = "command:register_source"


class Command(BaseCommand):
    help = "Register a source whose results are signed (Ed25519), rotate its key, or revoke a key."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--tenant", required=True, help="The tenant's slug.")
        parser.add_argument("--name", required=True, help="The source's name, as writes give it in provenance.source.")
        parser.add_argument("--public-key", help="Ed25519 public key: PEM or raw base64, or @PATH of a file holding it.")
        parser.add_argument(
            "--authority", choices=Authority.values, default=Authority.THIRD_PARTY, help="Authority its verified claims carry."
        )
        parser.add_argument(
            "--auto-admit-kinds", default="", help="Comma-separated kinds whose verified claims are admitted without review."
        )
        action = parser.add_mutually_exclusive_group()
        action.add_argument("--rotate", action="store_true", help="Switch the source to the new --public-key.")
        action.add_argument("--revoke", action="store_true", help="Revoke --public-key (or every key of the source).")
        parser.add_argument(
            "--overlap-hours",
            type=float,
            default=ROTATION_OVERLAP.total_seconds() / 3600,
            help="With --rotate: hours the old key keeps verifying (default %(default)s).",
        )
        parser.add_argument("--by", help="With --revoke: the username of the person revoking (a reviewer of the tenant).")
        parser.add_argument("--reason", help="With --revoke: why, for the audit trail (each record's history note).")

    def handle(self, *args, **options) -> None:
        tenant = Tenant.objects.filter(slug=options["tenant"]).first()
        if tenant is None:
            raise CommandError(f"No tenant '{options['tenant']}' (issue_agent_token creates one).")
        try:
            if options["revoke"]:
                source = self._revoke(tenant, options)
            elif options["rotate"]:
                source = self._source(tenant, options["name"])
                key = source_rotate(
                    source=source,
                    public_key=self._required_key(options),
                    actor_label=ACTOR,
                    overlap=timedelta(hours=options["overlap_hours"]),
                )
                self.stdout.write(f"Rotated {source} of {tenant} to key {key.fingerprint}.")
            else:
                kinds = [kind.strip() for kind in options["auto_admit_kinds"].split(",") if kind.strip()]
                source, key, created = source_register(
                    tenant=tenant,
                    name=options["name"],
                    public_key=self._required_key(options),
                    authority=options["authority"],
                    auto_admit_kinds=kinds,
                    actor_label=ACTOR,
                )
                self.stdout.write(
                    f"{'Registered' if created else 'Updated'} source {source} of {tenant} (key {key.fingerprint})."
                )
        except DomainError as exc:
            details = "; ".join(f"{name}: {' '.join(messages)}" for name, messages in sorted(exc.errors.items()))
            raise CommandError(f"{exc.detail} {details}".strip()) from None
        self.stdout.write(json.dumps(_summary(source)))

    def _required_key(self, options) -> str:
        text = self._key_text(options)
        if text is None:
            raise CommandError("--public-key is required.")
        return text

    def _key_text(self, options) -> str | None:
        text = options["public_key"]
        if text is None:
            return None
        if text.startswith("@"):
            try:
                return Path(text[1:]).read_text()
            except OSError as exc:
                raise CommandError(f"Cannot read {text[1:]}: {exc.strerror}.") from None
        return text

    def _source(self, tenant: Tenant, name: str) -> RegisteredSource:
        source = RegisteredSource.objects.filter(tenant=tenant, name=name).first()
        if source is None:
            raise CommandError(f"No source '{name}' is registered for {tenant}.")
        return source

    def _revoke(self, tenant: Tenant, options) -> RegisteredSource:
        if not options["by"] or not options["reason"]:
            raise CommandError("--revoke needs --by USERNAME and --reason TEXT: a revocation says who and why.")
        user = get_user_model().objects.filter(username=options["by"], is_active=True).first()
        if user is None:
            raise CommandError(f"No active user '{options['by']}'.")
        actor = Actor.for_user(user, channel="admin")
        if not actor.may_access_tenant(tenant.pk):
            raise CommandError(f"{options['by']} is not a reviewer of {tenant}.")
        source = self._source(tenant, options["name"])
        keys = source.keys.filter(revoked_at__isnull=True)
        text = self._key_text(options)
        if text is not None:
            try:
                keys = source.keys.filter(public_key=read_public_key(text))
            except InvalidPublicKey as exc:
                raise CommandError(str(exc)) from None
            if not keys:
                raise CommandError(f"The source {source} has no such key.")
        with transaction.atomic():
            for key in keys.order_by("pk"):
                revocation = revocation_create(
                    actor=actor, source=resolve_source(actor=actor, tenant=tenant, source_key=key), reason=options["reason"]
                )
                self.stdout.write(
                    f"Revoked key {key.fingerprint} of {source}: {revocation.affected} record(s) back in quarantine, "
                    f"{revocation.derived_affected} of them derived."
                )
        return source


def _summary(source: RegisteredSource) -> dict:
    return {
        "tenant": source.tenant.slug,
        "source": source.name,
        "authority": source.authority,
        "auto_admit_kinds": source.auto_admit_kinds,
        "keys": [
            {
                "id": key.pk,
                "fingerprint": key.fingerprint,
                "state": key.state,
                "valid_from": key.valid_from.isoformat(),
                "valid_until": key.valid_until.isoformat() if key.valid_until else None,
                "revoked_at": key.revoked_at.isoformat() if key.revoked_at else None,
            }
            for key in SourceKey.objects.filter(source=source).order_by("valid_from", "pk")
        ],
    }
