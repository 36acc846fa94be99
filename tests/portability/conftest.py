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
