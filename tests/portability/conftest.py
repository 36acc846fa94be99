"""Fixtures for portability: a forget ledger of the test's own (never the shared one under
APP_VAR_DIR), and helpers to read an export back with nothing but a YAML parser."""

from pathlib import Path

import pytest
import yaml


@pytest.fixture(autouse=True)
def forget_ledger(settings, tmp_path) -> Path:
    path = tmp_path / "forget-ledger.jsonl"
    settings.FORGET_LEDGER_PATH = str(path)
    return path


def read_plain(path: Path) -> tuple[dict, str]:
    """A note read the way any tool would: split at the front matter's '---' lines, PyYAML's plain
    SafeLoader (no code of the app), the rest is the Markdown body."""
    text = path.read_text(encoding="utf-8")
    assert text.startswith("---\n"), path
    front, body = text[4:].split("\n---\n", 1)
    meta = yaml.load(front, Loader=yaml.SafeLoader)
    assert isinstance(meta, dict), path
    return meta, body


def notes_under(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.md") if p.name != "index.md")


def database_files(scope: str = "schema") -> list[Path]:
    """The files a forget's bytes could be left in. SQLite: the database file and its WAL.
    PostgreSQL (read as root from the server's data directory, on this host): `schema`: every
    relation of the app's schema (tables, indexes, sequences) with each table's TOAST table and
    TOAST index, every fork and segment; `database`: every file of the database's directory."""
    from django.db import connection

    from memory.engine.postgres.ops import schema_relation_files

    if connection.vendor == "sqlite":
        path = Path(connection.settings_dict["NAME"])
        return [Path(f"{path}{suffix}") for suffix in ("", "-wal") if Path(f"{path}{suffix}").exists()]
    with connection.cursor() as cursor:
        cursor.execute("SHOW data_directory")
        data = Path(cursor.fetchone()[0])
        if scope == "database":
            cursor.execute("SELECT oid FROM pg_database WHERE datname = current_database()")
            return sorted(p for p in (data / "base" / str(cursor.fetchone()[0])).iterdir() if p.is_file())
        return schema_relation_files(cursor)


def bytes_on_disk(needle: str, *, scope: str = "schema") -> int:
    """Occurrences of `needle` in the bytes of `database_files(scope)`; on PostgreSQL after a
    CHECKPOINT, so what is in shared buffers is in the files too."""
    from django.db import connection

    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("CHECKPOINT")
    raw = needle.encode()
    return sum(path.read_bytes().count(raw) for path in database_files(scope) if path.exists())
