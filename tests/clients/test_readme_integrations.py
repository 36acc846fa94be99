"""README.md's quick starts for LangGraph and the OpenAI Agents SDK, and the client README's
LangGraph example, run as written: each block marked `<!-- quickstart: NAME ... -->`, in a fresh
Python process with only GOVERNED_MEMORY_URL and GOVERNED_MEMORY_TOKEN set for it, against a live
server; the memories they write are then in the database, with the provenance they gave."""

import os
import re
import subprocess
import sys

import pytest

from memory.models import MemoryRecord, Status
from tests.processes import ROOT
from tests.test_readme_examples import README, code_blocks

pytestmark = pytest.mark.django_db(transaction=True)

MARKER = re.compile(r"<!--\s*quickstart:\s*([\w-]+)")


def quick_starts(page=README) -> dict[str, str]:
    return {
        match.group(1): block.code
        for block in code_blocks(page.read_text())
        if (match := MARKER.search(block.marker)) is not None
    }


def run(code: str, api_server, token: str, tmp_path) -> str:
    env = {name: value for name, value in os.environ.items() if not name.startswith(("GOVERNED_MEMORY_", "OPENAI_"))}
    env |= {"GOVERNED_MEMORY_URL": api_server.base, "GOVERNED_MEMORY_TOKEN": token}
    done = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_readme_has_both_quick_starts():
    assert set(quick_starts()) == {"langgraph", "openai-agents"}


def test_the_langgraph_quick_start_writes_a_memory_through_the_store_and_finds_it(api_server, token, tmp_path):
    printed = run(quick_starts()["langgraph"], api_server, token, tmp_path)
    record = MemoryRecord.objects.get(content="Prefers email over phone.")
    assert (record.subject, record.kind.name, record.purpose, record.status) == (
        "customer/acme",
        "preference",
        "support",
        Status.ACTIVE,
    )
    assert (record.source_type, record.session_id, record.turn_id, record.authority) == ("user_turn", "s-1", "12", "user")
    assert printed.strip() == "['Prefers email over phone.']"
    run(quick_starts()["langgraph"], api_server, token, tmp_path)  # run again: the key makes it one memory
    assert MemoryRecord.objects.filter(content="Prefers email over phone.").count() == 1


def test_the_openai_agents_quick_start_builds_an_agent_with_the_memory_tools(api_server, token, tmp_path):
    printed = run(quick_starts()["openai-agents"], api_server, token, tmp_path)
    assert printed.strip() == "['remember', 'recall', 'forget', 'confirm']"


def test_the_client_readmes_store_example_runs_and_shows_quarantine(api_server, token, tmp_path):
    [code] = quick_starts(ROOT / "clients" / "python" / "README.md").values()
    printed = run(code, api_server, token, tmp_path).splitlines()
    said = MemoryRecord.objects.get(content="Prefers email over phone.")
    read = MemoryRecord.objects.get(content="Acme opens an office in Lyon.")
    assert (said.status, read.status, read.source_type) == (Status.ACTIVE, Status.QUARANTINED, "web_page")
    assert printed[0] == f"awaiting review: ['{read.pk}']"
    assert printed[1].startswith(f"{said.pk} ") and printed[1].endswith("] Prefers email over phone.")
    assert len(printed) == 2
