"""`manage.py rebuild_index NAME [--recipe JSON] [--kind lexical|semantic] [--wait]`

Builds index NAME from its recipe (or the given one) as a candidate beside the active index, then
promotes it only if every promotion gate (the golden recall sets) passes. NAME may be new, an
existing candidate or retired index (rebuilt in place), or the active index (a successor
`NAME-r<time>` is built beside it and replaces it when it passes). Without --wait the build is
queued for the worker; with it the build runs here. The last line of output is the index as JSON.

`--kind semantic` builds the optional semantic index (needs the `semantic` extra where it is built
and where recall runs): every active record is embedded, then recall fuses it with the lexical
index once it is active.
"""

import json

from django.core.management.base import BaseCommand, CommandError

from memory.errors import DomainError
from memory.search.build import build_and_promote, index_summary, request_rebuild
from memory.search.models import IndexKind


class Command(BaseCommand):
    help = "Build a search index as a candidate and promote it if the golden recall gates pass."

    def add_arguments(self, parser):
        parser.add_argument("name", help="Index name (letters, digits, '-' and '_').")
        parser.add_argument(
            "--recipe",
            help='Recipe as JSON, e.g. \'{"k1": 1.5, "b": 0.6}\'; missing keys keep '
            "the index's (or the active index's) values.",
        )
        parser.add_argument("--kind", default=IndexKind.LEXICAL, choices=IndexKind.values)
        parser.add_argument("--wait", action="store_true", help="Build and promote here instead of in the worker.")

    def handle(self, *args, name, recipe, kind, wait, **options):
        try:
            given = json.loads(recipe) if recipe is not None else None
        except json.JSONDecodeError as exc:
            raise CommandError(f"--recipe is not valid JSON: {exc.msg}.") from None
        if given is not None and not isinstance(given, dict):
            raise CommandError("--recipe must be a JSON object.")
        actor = "command:rebuild_index"
        try:
            index = request_rebuild(name=name, recipe=given, kind=kind, actor=actor)
        except DomainError as exc:
            details = "; ".join(f"{field}: {' '.join(messages)}" for field, messages in exc.errors.items())
            raise CommandError(f"{exc.detail} {details}".strip()) from None
        if wait:
            index = build_and_promote(index.pk, actor=actor)
            verdict = "active" if index.status == "active" else f"kept as {index.status} (a gate failed)"
            self.stdout.write(f"Built {index.name}: {verdict}.")
        else:
            from memory.tasks import build_search_index

            build_search_index.delay_on_commit(index.pk)
            self.stdout.write(f"Queued the build of {index.name}; the active index serves until it passes the gates.")
        self.stdout.write(json.dumps(index_summary(index), default=str))
