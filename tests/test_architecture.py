"""The structure issue 28 promises, held by tests: one engine boundary, no cycles, small modules.

These read the source tree (AST and the import graph), not a database, so they run the same on
both backends.
"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import grimp
import pytest

from memory.engine import ENGINES

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("memory", "governance", "config")
ENGINE = ROOT / "memory" / "engine"
DISPATCH = ENGINE / "__init__.py"
MAX_LINES = 600
# A string holding a statement or a clause of one, in capitals as the code writes SQL: what "SQL"
# means for the boundary check (docstrings are left out; prose rarely shouts these words).
SQL = re.compile(
    r"\b(SELECT\s|INSERT\s+INTO\b|UPDATE\s+\S+\s+SET\b|DELETE\s+FROM\b|(CREATE|DROP|ALTER)\s+(TEMP\s+|VIRTUAL\s+|UNIQUE\s+)?"
    r"(TABLE|INDEX|TRIGGER|FUNCTION|VIEW)\b|PRAGMA\s|VACUUM\b|REINDEX\b|pg_\w+\()"
)
# Calls that hand SQL to the database.
SQL_CALLS = {"execute", "executemany", "executescript", "raw", "extra", "RawSQL"}


def product_files(*, migrations: bool = False) -> list[Path]:
    files = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if not migrations and "migrations" in path.parts:
                continue
            files.append(path)
    return files


def outside_engine(path: Path) -> bool:
    return ENGINE not in path.parents and path != DISPATCH


def _name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return None


def test_the_vendor_is_read_only_by_the_engine_dispatch():
    readers = []
    for path in product_files():
        if path == DISPATCH:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Attribute) and node.attr == "vendor":
                readers.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert readers == []


def test_no_sql_outside_the_engines_and_migrations():
    found = []
    for path in filter(outside_engine, product_files()):
        tree = ast.parse(path.read_text(), str(path))
        docstrings = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and node.body
            and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and _name(node.func) in SQL_CALLS:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} calls {_name(node.func)}()")
            elif (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and id(node) not in docstrings
                and SQL.search(node.value)
            ):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.value[:40]!r}")
    assert found == []


def test_the_check_for_sql_would_see_a_statement():
    assert SQL.search("SELECT id FROM memory_memoryrecord")
    assert SQL.search("EXISTS (SELECT 1 FROM json_each(counts))")
    assert SQL.search("\n  DELETE FROM x")
    assert SQL.search("CREATE VIRTUAL TABLE t USING fts5(body)")
    assert not SQL.search("Select a kind to review")
    assert not SQL.search("Delete from the queue")


def _public(module) -> set[str]:
    return {
        name
        for name, value in vars(module).items()
        if not name.startswith("_") and getattr(value, "__module__", module.__name__) == module.__name__
    }


def _concerns() -> list[str]:
    found = set()
    for package in ENGINES.values():
        directory = ROOT / Path(*package.split("."))
        found |= {path.stem for path in directory.glob("*.py") if not path.stem.startswith("_")}
    return sorted(found)


@pytest.mark.parametrize("concern", _concerns())
def test_every_engine_offers_the_same_interface(concern):
    """Each concern module exists in every engine with the same public functions and classes."""
    interfaces = {}
    for vendor, package in ENGINES.items():
        module = importlib.import_module(f"{package}.{concern}")
        interfaces[vendor] = {name for name in _public(module) if callable(getattr(module, name))}
    first, *others = interfaces.values()
    assert all(other == first for other in others), interfaces


def test_there_are_engine_concerns_to_compare():
    assert {"search", "vectors", "ranking", "lifecycle", "ops"} <= set(_concerns())


def _cycles(graph) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph.modules):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.find_modules_directly_imported_by(start))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            for target in edges:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph.find_modules_directly_imported_by(target)))))
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def test_no_import_cycles():
    """Imports inside functions count: a cycle hidden in a function is still a cycle."""
    graph = grimp.build_graph(*PACKAGES, cache_dir=None)
    assert _cycles(graph) == []


def test_the_cycle_check_finds_a_cycle():
    graph = grimp.ImportGraph()
    for module in ("a", "a.x", "a.y", "a.z"):
        graph.add_module(module)
    graph.add_import(importer="a.x", imported="a.y")
    graph.add_import(importer="a.y", imported="a.x")
    graph.add_import(importer="a.y", imported="a.z")
    assert _cycles(graph) == [["a.x", "a.y"]]


@pytest.mark.parametrize("package", [*PACKAGES, "clients"])
def test_no_module_is_over_600_lines(package):
    long = {
        str(path.relative_to(ROOT)): lines
        for path in sorted((ROOT / package).rglob("*.py"))
        if "migrations" not in path.parts and (lines := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert long == {}
