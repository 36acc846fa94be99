"""The PostgreSQL backend (`config.postgresql`): Django's, with timestamps parsed by psycopg's own
loader (the compiled one with psycopg[binary]) and given the connection's time zone, so every value
equals what Django's own loader returns."""

import pytest
from django.db import connection
from django.db.backends.postgresql.psycopg_any import register_tzloader as django_register_tzloader

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.postgresql(reason="the PostgreSQL backend (SQLite stores text)"),
]

VALUES = (
    "SELECT '2026-12-02 01:02:03.456789+00'::timestamptz, '2020-02-29 23:59:59.999999+05:30'::timestamptz, "
    "'1999-12-31 23:00:00-08'::timestamptz, '0099-01-01 00:00:00+00'::timestamptz, now(), NULL::timestamptz"
)


def _fetch(register=None) -> tuple:
    connection.ensure_connection()
    with connection.connection.cursor() as cursor:
        if register is not None:
            register(connection.timezone, cursor)
        cursor.execute(VALUES)
        return cursor.fetchone()


def test_timestamps_are_the_values_and_zone_djangos_loader_gives():
    ours, djangos = _fetch(), _fetch(django_register_tzloader)
    assert ours[:4] == djangos[:4] and [v.tzinfo for v in ours[:4]] == [v.tzinfo for v in djangos[:4]]
    assert ours[5] is None and ours[4].tzinfo is connection.timezone
    assert ours[1].isoformat() == "2020-02-29T18:29:59.999999+00:00"


def test_django_cursors_parse_with_psycopgs_compiled_loader():
    from psycopg import adapters, pq
    from psycopg.pq import Format

    oid = adapters.types["timestamptz"].oid
    with connection.cursor() as cursor:
        loader = cursor.cursor.adapters.get_loader(oid, Format.TEXT)
        assert loader.timezone == connection.timezone  # what keeps Django's create_cursor from replacing it
        parser = type(loader(oid, cursor.cursor)._parse.__self__)
    assert parser is adapters.get_loader(oid, Format.TEXT)  # psycopg's own
    assert pq.__impl__ == "binary" and parser.__module__.startswith(
        "psycopg_binary"
    )  # the compiled one (pyproject: psycopg[binary])
