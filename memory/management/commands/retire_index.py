"""`manage.py retire_index NAME`

Retires a candidate index, or the active semantic index (recall is lexical again from the next
request), and drops its storage. The active lexical index cannot be retired: rebuild it instead.
The last line of output is the index as JSON."""

import json

from django.core.management.base import BaseCommand, CommandError

from memory.errors import DomainError
from memory.search.build import index_summary, retire_index


class Command(BaseCommand):
    help = "Retire a search index (a candidate, or the active semantic index) and drop its storage."

    def add_arguments(self, parser):
        parser.add_argument("name", help="Index name.")

    def handle(self, *args, name, **options):
        try:
            index = retire_index(name, actor="command:retire_index")
        except DomainError as exc:
            raise CommandError(exc.detail) from None
        self.stdout.write(f"Retired {index.name}.")
        self.stdout.write(json.dumps(index_summary(index), default=str))
