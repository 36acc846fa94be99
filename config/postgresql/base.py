"""Django's PostgreSQL backend, loading timestamps with psycopg's compiled loader.

Django registers its own timestamptz loader (to set the connection's time zone on every value),
subclassed from psycopg's pure-Python loader, so with psycopg[binary] every timestamp read still
goes through a regular expression in Python (Django ticket #36960; the cost is in
docs/benchmarks.md). Ten records as recall loads them hold some forty timestamps, a review page
hundreds. This backend registers a loader that Django's
cursors accept as their own (same `timezone` attribute) and that parses with the loader psycopg
itself registers, the compiled one when psycopg[binary] is installed; the value is then given the
connection's time zone exactly as Django's loader gives it."""

from django.db.backends.postgresql import base
from psycopg import adapters
from psycopg.pq import Format
from psycopg.types.datetime import TimestamptzLoader

_PARSER = adapters.get_loader(adapters.types["timestamptz"].oid, Format.TEXT)  # psycopg's own: compiled if available


def register_tzloader(tz, context) -> None:
    """Django's `register_tzloader` with psycopg's own parser: values of `tz` (None: naive)."""

    class TzLoader(TimestamptzLoader):
        timezone = tz

        def __init__(self, oid, context=None):
            super().__init__(oid, context)
            self._parse = _PARSER(oid, context).load

        def load(self, data):
            return self._parse(data).replace(tzinfo=self.timezone)

    context.adapters.register_loader("timestamptz", TzLoader)


class DatabaseWrapper(base.DatabaseWrapper):
    def get_connection_params(self):
        params = super().get_connection_params()
        register_tzloader(self.timezone, params["context"])
        return params
