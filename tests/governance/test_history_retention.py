"""History retention: the prune job drops the records' history older than HISTORY_RETENTION_DAYS
a calendar month at a time (on PostgreSQL a partition each, detached and dropped; on SQLite the
rows deleted), keeping each surviving record's state row from before the horizon; forget
propagation still scrubs a subject's history in every partition, and the disk step rewrites every
partition's files."""

import io
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from django.db import connection, connections

from governance.forget.services import forget_request_create
from governance.jobs import run_job
from governance.models import JobRun
from governance.retention.prune import prune
from memory.asof import record_as_of
from memory.engine import current
from memory.errors import ValidationFailed
from memory.fingerprints import subject_fingerprint
from memory.history import history_horizon
from memory.models import MemoryRecord
from memory.services import memory_confirm
from tests.governance.test_forget_propagation import canary
from tests.portability.conftest import bytes_on_disk

History = MemoryRecord.history.model
DAY = timedelta(days=1)
PG = "postgresql"


def month(now: datetime, back: int) -> datetime:
    """The start of the month `back` months before `now`'s (UTC)."""
    index = now.year * 12 + now.month - 1 - back
    return datetime(index // 12, index % 12 + 1, 1, tzinfo=UTC)


def date_rows(pairs: list[tuple[int, datetime]]) -> None:
    """Test setup: put history rows at past moments (on PostgreSQL the rows move partition)."""
    for history_id, moment in pairs:
        History.objects.filter(history_id=history_id).update(history_date=moment)


def rows_of(record: MemoryRecord) -> list:
    return list(History.objects.filter(id=record.pk).order_by("history_date", "history_id"))


def partition_tables() -> set[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT relname FROM pg_class WHERE relname LIKE 'memory\\_historicalmemoryrecord\\_p%%'")
        return {row[0] for row in cursor.fetchall()}


@pytest.mark.django_db
def test_history_past_retention_goes_a_month_at_a_time_and_each_record_keeps_its_state_there(settings, write, reviewer_actor):
    now = datetime.now(UTC)
    settings.HISTORY_RETENTION_DAYS = 130
    horizon = history_horizon(now, settings.HISTORY_RETENTION_DAYS)
    assert horizon == month(now - 130 * DAY, 0)
    history = current().history
    history.ensure_history_partitions(now=month(now, 8), months_ahead=8)  # months of old rows get their partitions

    # A record confirmed twice long ago and once again now; a record written long ago and left alone.
    busy = write(subject="customer/anna", content="Anna prefers tea.")
    for version in (1, 2, 3):
        memory_confirm(record_id=busy.pk, expected_version=version, actor=reviewer_actor, note=f"check {version}")
    created, first, second, recent = rows_of(busy)
    date_rows(
        [
            (created.history_id, month(now, 8) + 2 * DAY),
            (first.history_id, month(now, 7) + 3 * DAY),
            (second.history_id, horizon - 5 * DAY),  # the newest before the horizon: its state there
        ]
    )
    quiet = write(subject="customer/ben", content="Ben's birthday is in May.")
    (quiet_row,) = rows_of(quiet)
    date_rows([(quiet_row.history_id, month(now, 7) + 1 * DAY)])
    on_horizon = write(subject="customer/cleo", content="Cleo's order shipped.")
    memory_confirm(record_id=on_horizon.pk, expected_version=1, actor=reviewer_actor, note="shipped")
    cleo_created, cleo_confirmed = rows_of(on_horizon)
    date_rows([(cleo_created.history_id, month(now, 7)), (cleo_confirmed.history_id, horizon + 1 * DAY)])
    older = write(subject="customer/hugo", content="Hugo's favourite colour is green.")
    assert older.status == "active", older.quarantine_reason
    memory_confirm(record_id=older.pk, expected_version=1, actor=reviewer_actor, note="still true")
    dan_created, dan_confirmed = rows_of(older)
    # a row older than every partition (the default partition takes it), then one in a month partition
    date_rows([(dan_created.history_id, month(now, 10)), (dan_confirmed.history_id, month(now, 6) + DAY)])
    old_months = {f"memory_historicalmemoryrecord_p{month(now, back):%Y_%m}" for back in range(9) if month(now, back) < horizon}
    if connection.vendor == PG:
        assert old_months <= partition_tables()

    counts = prune(now=now, batch_size=2)

    assert [(row.history_id, row.history_change_reason) for row in rows_of(busy)] == [
        (second.history_id, second.history_change_reason),
        (recent.history_id, recent.history_change_reason),
    ]
    assert second.history_change_reason and recent.history_change_reason  # why the changes happened, intact
    assert [row.history_id for row in rows_of(quiet)] == [quiet_row.history_id]  # alone: its state row stays
    # its state from the horizon to its confirmation just after it
    assert [row.history_id for row in rows_of(on_horizon)] == [cleo_created.history_id, cleo_confirmed.history_id]
    assert [row.history_id for row in rows_of(older)] == [dan_confirmed.history_id]
    kept = {second.history_id, quiet_row.history_id, cleo_created.history_id, dan_confirmed.history_id}
    assert set(History.objects.filter(history_date__lt=horizon).values_list("history_id", flat=True)) == kept
    assert History.objects.get(history_id=recent.history_id).history_note == "check 3"
    # As-of reads from the horizon on stay whole.
    assert record_as_of(actor=reviewer_actor, record_id=busy.pk, at=horizon + DAY).record.version == 3
    assert record_as_of(actor=reviewer_actor, record_id=on_horizon.pk, at=horizon + DAY / 2).record.version == 1
    assert record_as_of(actor=reviewer_actor, record_id=quiet.pk, at=now).record.version == 1
    with pytest.raises(ValidationFailed, match="before"):  # what was dropped is not guessed at
        record_as_of(actor=reviewer_actor, record_id=busy.pk, at=horizon - DAY)
    if connection.vendor == PG:
        assert partition_tables().isdisjoint(old_months)  # the tables are gone, not emptied
        assert {partition.lower for partition in history.history_partitions() if partition.lower} == {
            month(now, back) for back in range(-settings.HISTORY_PARTITIONS_AHEAD, 9) if month(now, back) >= horizon
        }
        assert counts["history_partitions_dropped"] == len(old_months)
        assert counts["history_rows_dropped"] == 2 and counts["history_rows_kept"] == 4
        assert counts["history_rows_deleted"] == 1  # dan's oldest row, in the default partition
    else:
        assert counts["history_partitions_dropped"] == 0 and counts["history_rows_deleted"] == 3


@pytest.mark.django_db
def test_a_second_run_drops_nothing_more_and_zero_retention_keeps_history(settings, write, reviewer_actor):
    now = datetime.now(UTC)
    record = write(subject="customer/dora", content="Dora uses the beta.")
    memory_confirm(record_id=record.pk, expected_version=1, actor=reviewer_actor, note="still true")
    current().history.ensure_history_partitions(now=month(now, 24), months_ahead=24)
    created, confirmed = rows_of(record)
    date_rows([(created.history_id, month(now, 24) + DAY), (confirmed.history_id, month(now, 23) + DAY)])

    settings.HISTORY_RETENTION_DAYS = 0
    prune(now=now, batch_size=10)
    assert len(rows_of(record)) == 2

    settings.HISTORY_RETENTION_DAYS = 400
    prune(now=now, batch_size=10)
    assert [row.history_id for row in rows_of(record)] == [confirmed.history_id]
    again = prune(now=now, batch_size=10)
    assert again["history_partitions_dropped"] == 0 and again["history_rows_deleted"] == 0
    assert [row.history_id for row in rows_of(record)] == [confirmed.history_id]


@pytest.mark.django_db
def test_the_prune_job_makes_the_months_ahead_and_reports_its_counts(settings):
    run = run_job("prune", trigger="run_job")
    assert run.status == JobRun.Status.SUCCEEDED
    assert {"history_partitions_made", "history_partitions_dropped", "history_rows_deleted"} <= set(run.counts)
    if connection.vendor == PG:
        now = datetime.now(UTC)
        made = {partition.lower for partition in current().history.history_partitions() if partition.lower}
        assert {month(now, -ahead) for ahead in range(settings.HISTORY_PARTITIONS_AHEAD + 1)} <= made
        assert any(partition.lower is None for partition in current().history.history_partitions())


@pytest.mark.postgresql(reason="only PostgreSQL partitions the history table")
@pytest.mark.django_db
def test_a_row_the_default_partition_took_moves_into_the_month_made_for_it(write):
    record = write(subject="customer/emil", content="Emil's plan renews in spring.")
    (row,) = rows_of(record)
    far = datetime(2031, 5, 17, tzinfo=UTC)  # no partition for that month: the default one takes it
    date_rows([(row.history_id, far)])
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT tableoid::regclass::text FROM memory_historicalmemoryrecord WHERE history_id = %s", [row.history_id]
        )
        assert cursor.fetchone()[0] == "memory_historicalmemoryrecord_default"

    made = current().history.ensure_history_partitions(now=far, months_ahead=0)

    assert made == ["memory_historicalmemoryrecord_p2031_05"]
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT tableoid::regclass::text FROM memory_historicalmemoryrecord WHERE history_id = %s", [row.history_id]
        )
        assert cursor.fetchone()[0] == "memory_historicalmemoryrecord_p2031_05"


# --------------------------------------------------------------------------------------------
# forget reaches every partition


def spread_over_three_months(write, reviewer_actor, *, subject: str, secret: str) -> list[MemoryRecord]:
    """The subject's records with history rows in three monthly partitions (this month and the two
    before), each row holding the secret in its content and the subject."""
    now = datetime.now(UTC)
    current().history.ensure_history_partitions(now=month(now, 2), months_ahead=2)
    records = []
    for back in (2, 1):
        record = write(
            subject=subject,
            content=f"Door code {back} is {secret}.",
            provenance={"source_type": "user_turn", "uri": f"https://x.example/{secret}"},
        )
        memory_confirm(record_id=record.pk, expected_version=1, actor=reviewer_actor, note=f"Read back {secret}.")
        created, confirmed = rows_of(record)
        date_rows([(created.history_id, month(now, back) + DAY), (confirmed.history_id, month(now, back - 1) + DAY)])
        records.append(record)
    return records


def history_tables_holding(history_ids: list[int]) -> set[str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT DISTINCT tableoid::regclass::text FROM memory_historicalmemoryrecord WHERE history_id = ANY(%s)",
            [history_ids],
        )
        return {row[0] for row in cursor.fetchall()}


@pytest.mark.django_db
def test_forget_scrubs_the_history_rows_in_every_partition(tenant, write, reviewer_actor):
    secret = canary()
    records = spread_over_three_months(write, reviewer_actor, subject="customer/gina", secret=secret)
    ids = [row.history_id for record in records for row in rows_of(record)]
    if connection.vendor == PG:
        assert len(history_tables_holding(ids)) == 3

    forget_request_create(actor=reviewer_actor, tenant=tenant, subject="customer/gina", reason="erasure")
    run_job("propagate_forgets", trigger="run_job")

    fingerprint = subject_fingerprint(tenant.pk, "customer/gina")
    rows = list(History.objects.filter(history_id__in=ids))
    assert len(rows) == len(ids) + 0 and rows  # scrubbed in place, none lost
    for row in rows:
        assert row.content == "" and row.source_uri == "" and row.history_note == "" and row.subject == fingerprint
    forgotten_rows = History.objects.filter(id__in=[record.pk for record in records]).exclude(history_id__in=ids)
    assert all(row.content == "" and row.subject == fingerprint for row in forgotten_rows)  # the `forget` transition's own rows


@pytest.mark.postgresql(reason="the disk step rewrites PostgreSQL's files per partition")
@pytest.mark.django_db(transaction=True)
def test_after_the_disk_step_no_partition_file_holds_the_forgotten_subject(tenant, write, reviewer_actor):
    secret, control = canary(), canary()
    records = spread_over_three_months(write, reviewer_actor, subject=f"customer/{secret}", secret=secret)
    spread_over_three_months(write, reviewer_actor, subject="customer/kept", secret=control)
    ids = [row.history_id for record in records for row in rows_of(record)]
    partitions = history_tables_holding(ids)
    assert len(partitions) == 3
    forget_request_create(actor=reviewer_actor, tenant=tenant, subject=f"customer/{secret}", reason="erasure")
    run_job("propagate_forgets", trigger="run_job")

    run = run_job("disk_rewrite", trigger="run_job")

    assert run.status == JobRun.Status.SUCCEEDED and run.counts["requests_completed"] == 1
    assert bytes_on_disk(secret) == 0 and bytes_on_disk(control) > 0
    with connection.cursor() as cursor:
        cursor.execute("SHOW data_directory")
        data = cursor.fetchone()[0]
        for partition in partitions:
            cursor.execute(
                "SELECT pg_relation_filepath(oid) FROM pg_class WHERE oid = %s::regclass OR oid = "
                "(SELECT reltoastrelid FROM pg_class WHERE oid = %s::regclass)",
                [partition, partition],
            )
            for (path,) in cursor.fetchall():
                if path:
                    files = [Path(data, path), *Path(data, path).parent.glob(Path(path).name + ".*")]
                    assert all(secret.encode() not in file.read_bytes() for file in files if file.exists()), partition


@pytest.mark.django_db
def test_the_command_lists_the_months_and_the_horizon(settings):
    import json

    from django.core.management import call_command

    out = io.StringIO()
    call_command("history_partitions", "--json", stdout=out)
    assert json.loads(out.getvalue())["horizon"] is None  # the default keeps history as long as its record
    settings.HISTORY_RETENTION_DAYS = 400
    out = io.StringIO()
    call_command("history_partitions", "--json", stdout=out)
    summary = json.loads(out.getvalue())
    assert summary["horizon"] == history_horizon(datetime.now(UTC), 400).isoformat()
    months = [row["month"] for row in summary["partitions"]]
    if connection.vendor == PG:
        assert f"{datetime.now(UTC):%Y-%m}" in months and months[-1] == "default"
    else:
        assert months == []


# --------------------------------------------------------------------------------------------
# a month's drop racing a forget's scrub

RACE_RECORDS = 30
HOLD = 0.6  # seconds a transaction is held open while the other side waits on it


def _forgotten_past_the_horizon(write, reviewer_actor, *, now: datetime, horizon: datetime, subject: str, secret: str) -> list:
    """RACE_RECORDS records of `subject`, each with two rows in the month before the horizon (its
    creation, and its state at the horizon, which is kept: copied out as the month goes) and a row
    of this month; every row holds the secret."""
    records = []
    for n in range(RACE_RECORDS):
        record = write(
            subject=subject, content=f"Locker {n} code is {secret}.", provenance={"uri": f"https://x.example/{secret}"}
        )
        memory_confirm(record_id=record.pk, expected_version=1, actor=reviewer_actor, note=f"Read back {secret}.")
        memory_confirm(record_id=record.pk, expected_version=2, actor=reviewer_actor, note=f"Again {secret}.")
        created, state, _ = rows_of(record)
        date_rows([(created.history_id, horizon - 10 * DAY), (state.history_id, horizon - 3 * DAY)])
        records.append(record)
    return records


def _in_threads(**work) -> tuple[list, dict]:
    """Each of `work`'s callables in a thread of its own (its own connection), started together;
    their errors and their results."""
    errors, results = [], {}

    def run(name: str, call) -> None:
        try:
            results[name] = call()
        except BaseException as exc:  # the caller's assertion names it
            errors.append((name, repr(exc)))
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=item) for item in work.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return errors, results


@pytest.mark.parametrize("order", ["scrub_between", "scrub_holds", "drop_holds"])
@pytest.mark.postgresql(reason="SQLite has one writer at a time: the drop and the scrub cannot overlap")
@pytest.mark.django_db(transaction=True)
def test_a_month_dropped_while_a_forget_scrubs_it_leaves_no_copy_of_the_subject(settings, tenant, write, reviewer_actor, order):
    # The drop chooses the rows to keep (one transaction), then detaches the month, copies them out
    # and drops it (another); the forget's propagation scrubs the subject's history rows wherever
    # they are. Each interleaving is forced: the scrub commits between the drop's two transactions
    # (scrub_between); the scrub has scrubbed and not committed when the drop detaches, which waits
    # for it (scrub_holds); the drop has detached and not committed when the scrub starts, which
    # waits for it (drop_holds). No row anywhere may keep the forgotten subject's words, and a
    # subject not forgotten keeps its state rows whole.
    settings.HISTORY_RETENTION_DAYS = 130
    history = current().history
    now = datetime.now(UTC)
    horizon = history_horizon(now, settings.HISTORY_RETENTION_DAYS)
    history.ensure_history_partitions(now=month(now, 8), months_ahead=8)
    secret, control = canary(), canary()
    forgotten = _forgotten_past_the_horizon(
        write, reviewer_actor, now=now, horizon=horizon, subject="customer/gone", secret=secret
    )
    kept = _forgotten_past_the_horizon(write, reviewer_actor, now=now, horizon=horizon, subject="customer/kept", secret=control)
    forget_request_create(actor=reviewer_actor, tenant=tenant, subject="customer/gone", reason="erasure")
    chosen, scrubbing, scrubbed, detached = (threading.Event() for _ in range(4))
    waited: dict[str, float] = {}
    target = f"memory_historicalmemoryrecord_p{horizon - 3 * DAY:%Y_%m}"  # the month holding the rows
    dropping = [""]  # the month the drop is at (older, empty months go first)

    def drop_hook(execute, sql, params, many, context):
        if sql.startswith("SELECT count(*) FROM memory_historicalmemoryrecord_p"):  # a month's first statement
            dropping[0] = sql.rsplit(" ", 1)[-1]
        if dropping[0] != target:
            return execute(sql, params, many, context)
        if sql.startswith("SET CONSTRAINTS ALL IMMEDIATE"):  # the detaching transaction's first statement
            chosen.set()
            if order in ("scrub_between", "scrub_holds"):
                assert (scrubbed if order == "scrub_between" else scrubbing).wait(30)
        began = time.monotonic()
        result = execute(sql, params, many, context)
        if "DETACH PARTITION" in sql:
            waited["detach"] = max(waited.get("detach", 0.0), time.monotonic() - began)  # one per month dropped
            detached.set()
            if order == "drop_holds":
                time.sleep(HOLD)
        return result

    def scrub_hook(execute, sql, params, many, context):
        began = time.monotonic()
        result = execute(sql, params, many, context)
        if '"memory_historicalmemoryrecord"' in sql:  # the scrub's read of the rows' subjects, or its update
            waited["scrub"] = max(waited.get("scrub", 0.0), time.monotonic() - began)
        if sql.startswith('UPDATE "memory_historicalmemoryrecord"'):
            scrubbing.set()
            if order == "scrub_holds":
                time.sleep(HOLD)
        return result

    def drop():
        with connection.execute_wrapper(drop_hook):
            return history.drop_history_before(horizon=horizon, batch_size=1000)

    def scrub():
        try:
            assert (detached if order == "drop_holds" else chosen).wait(30)
            with connection.execute_wrapper(scrub_hook):
                return run_job("propagate_forgets", trigger="run_job").status
        finally:
            scrubbed.set()

    errors, results = _in_threads(drop=drop, scrub=scrub)

    assert errors == [] and results["scrub"] == JobRun.Status.SUCCEEDED, (errors, results)
    assert results["drop"]["history_partitions_dropped"] >= 1 and results["drop"]["history_rows_kept"] == 2 * RACE_RECORDS
    assert chosen.is_set() and detached.is_set()  # the drop reached the month holding the rows
    if order == "scrub_holds":  # the detach waited for the scrub's commit
        assert waited["detach"] >= HOLD / 2, waited
    if order == "drop_holds":  # the scrub's first read of the history waited for the drop's commit
        assert waited["scrub"] >= HOLD / 2, waited
    fingerprint = subject_fingerprint(tenant.pk, "customer/gone")
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM memory_historicalmemoryrecord WHERE content LIKE %s OR subject LIKE %s "
            "OR source_uri LIKE %s OR history_note LIKE %s",
            [f"%{secret}%"] * 4,
        )
        assert cursor.fetchone()[0] == 0
    for record in forgotten:  # its state at the horizon survived the drop, scrubbed; its creation went with the month
        rows = rows_of(record)
        assert rows[0].history_date == horizon - 3 * DAY and len(rows) >= 2
        assert all(row.content == "" and row.subject == fingerprint for row in rows)
    for record in kept:
        rows = rows_of(record)
        assert rows[0].history_date == horizon - 3 * DAY and control in rows[0].content
    assert target not in partition_tables()
