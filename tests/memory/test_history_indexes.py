"""The history table's indexes serve the as-of lookups (memory.asof): each record's newest row at or
before a moment is one probe of (id, history_date, history_id)."""

import pytest
from django.db import connection

from memory.models import MemoryRecord

pytestmark = pytest.mark.django_db


def test_history_is_indexed_by_record_then_time_in_place_of_record_alone():
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, MemoryRecord.history.model._meta.db_table)
    indexed = [info["columns"] for info in constraints.values() if info["index"] and not info["primary_key"]]
    assert ["id", "history_date", "history_id"] in indexed
    assert ["id"] not in indexed  # the composite index serves lookups by id alone: no second index to maintain
