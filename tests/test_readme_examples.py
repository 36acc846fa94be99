"""Every code block of README.md and docs/*.md that calls the API runs as written against a live
demo started by `bin/run`, twice in a row: each page in one shell of its own, in page order (as a
reader pastes them after bin/run's `export` line), README first. Each HTTP call must succeed (2xx)
on both passes; the second pass proves the examples can be replayed against the same demo (their
`Idempotency-Key`s find the first pass's writes: no memory is written twice), and the demo's own
data must survive them.

The blocks are parsed from the pages themselves, so a new example is tested without touching this
file. A block is an API example when it runs `curl`; other blocks (install, manage.py, cron, Python,
JSON, YAML) are not. An API block that must not run says so on the line before it:
`<!-- readme-example: not run, <why> -->`.

The demo is `bin/run` with the `semantic` extra installed (as in this venv), and one start of it serves
this module's tests, in their order (a start costs half a minute: the index built through the gates,
the model loaded in the web and worker processes): first what the start promises, that it builds
its semantic index before it starts, that its web and worker processes load the model at start
(gunicorn's master and Celery's main process load it, their children run it) and that recall is
hybrid from the first request, as /health/ and the index list say; then the examples; then that
Ctrl-C still stops everything cleanly.
"""

import json
import re
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.demo_run import DemoRun
from tests.processes import ROOT
from tests.test_bin_run import assert_stopped_cleanly, call

README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]
NOT_RUN = re.compile(r"<!--\s*readme-example:\s*not run\b")

# Each call of the examples goes through this `curl`: the real one, whose HTTP status is logged per block.
CURL_WRAPPER = r"""
curl() {
  local body status
  body="$(mktemp)"
  status="$(command curl --silent --show-error --output "$body" --write-out '%{http_code}' "$@")" || status="000"
  cat "$body"; echo
  rm -f "$body"
  printf '%s %s\n' "$EXAMPLE_BLOCK" "$status" >> "$EXAMPLE_STATUS_LOG"
}
"""


@dataclass
class Block:
    line: int  # 1-based line of its first code line in its page
    code: str
    marker: str  # the line just before the block (an HTML comment may mark it)

    @property
    def calls_api(self) -> bool:
        return re.search(r"(^|[\s(|;])curl\s", self.code) is not None


def code_blocks(text: str) -> list[Block]:
    """Fenced (```) and indented (4 spaces, after a blank line) code blocks of a Markdown text."""
    lines = text.split("\n")
    blocks, i = [], 0
    previous_text = ""
    while i < len(lines):
        line = lines[i]
        if line.startswith("```"):
            start = i + 1
            i = start
            while i < len(lines) and not lines[i].startswith("```"):
                i += 1
            blocks.append(Block(start + 1, "\n".join(lines[start:i]), previous_text))
        elif line.startswith("    ") and line.strip() and (i == 0 or not lines[i - 1].strip()):
            start = i
            while i < len(lines) and (lines[i].startswith("    ") or not lines[i].strip()):
                i += 1
            while not lines[i - 1].strip():
                i -= 1
            blocks.append(Block(start + 1, "\n".join(row[4:] for row in lines[start:i]), previous_text))
            continue
        if line.strip():
            previous_text = line
        i += 1
    return blocks


def test_the_parser_finds_fenced_and_indented_blocks_and_which_call_the_api():
    text = (
        "Intro\n\n    curl -s $API/x/ \\\n      -H 'A: b'\n\n    # same block\n\nText\n<!-- readme-example: not run, a sketch -->\n"
        "```sh\ncurl -s $API/y/\n```\n\n```python\nprint('no')\n```\n- a list item\n  continued\n"
    )
    blocks = code_blocks(text)
    assert [(block.line, block.code) for block in blocks] == [
        (3, "curl -s $API/x/ \\\n  -H 'A: b'\n\n# same block"),
        (11, "curl -s $API/y/"),
        (15, "print('no')"),
    ]
    assert [block.calls_api for block in blocks] == [True, True, False]
    assert NOT_RUN.search(blocks[1].marker) and not NOT_RUN.search(blocks[0].marker)


def api_get(demo: DemoRun, path: str, token: str) -> dict:
    request = urllib.request.Request(demo.exports["API"] + path, headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.load(response)


def active_acme_ids(demo: DemoRun) -> set[str]:
    page = api_get(demo, "/memories/?subject=customer/acme&status=active&page_size=100", demo.exports["TOKEN"])
    return {record["id"] for record in page["results"]}


def records_in_the_tenant(demo: DemoRun) -> int:
    """Every record of the demo tenant, whatever its status (a reviewer sees them all)."""
    return api_get(demo, "/memories/?page_size=1", demo.exports["REVIEWER"])["count"]


def api_examples() -> dict[Path, list[Block]]:
    return {
        page: [block for block in code_blocks(page.read_text()) if block.calls_api and not NOT_RUN.search(block.marker)]
        for page in PAGES
    }


def run_examples(demo: DemoRun, examples: dict[Path, list[Block]], directory: Path, label: str) -> None:
    """Every page's API blocks, each page in one fresh shell; fails naming each call that did not succeed."""
    status_log = directory / f"statuses-{label.replace(' ', '-')}"
    failures, transcripts = [], []
    for page, blocks in examples.items():
        if not blocks:
            continue
        name = page.relative_to(ROOT).as_posix()
        script = [CURL_WRAPPER]
        for block in blocks:
            script += [f"EXAMPLE_BLOCK={name}:{block.line}", f"echo '=== {name} line {block.line}'", block.code, ""]
        result = subprocess.run(
            ["bash", "-c", "\n".join(script)],
            cwd=directory,
            capture_output=True,
            text=True,
            timeout=300,
            env={
                "PATH": "/usr/local/bin:/usr/bin:/bin",
                "HOME": str(directory),
                "EXAMPLE_STATUS_LOG": str(status_log),
                **demo.exports,
            },
        )
        transcript = result.stdout + result.stderr
        transcripts.append(transcript)
        if "Traceback" in transcript or result.stderr.strip():
            failures.append(f"{name}: errors in the shell:\n{result.stderr[-4000:] or transcript[-4000:]}")
    calls: dict[str, list[str]] = {}
    for row in status_log.read_text().splitlines() if status_log.exists() else []:
        where, status = row.rsplit(" ", 1)
        calls.setdefault(where, []).append(status)
    failed = {where: statuses for where, statuses in calls.items() if any(not s.startswith("2") for s in statuses)}
    silent = [
        f"{page.relative_to(ROOT).as_posix()}:{block.line}"
        for page, blocks in examples.items()
        for block in blocks
        if f"{page.relative_to(ROOT).as_posix()}:{block.line}" not in calls
    ]
    assert not failed and not silent and not failures, (
        f"{label}: examples that failed (page:line: HTTP statuses): {failed}; made no call: {silent}\n"
        + "\n".join(failures)
        + "\n"
        + "\n".join(transcripts)[-12000:]
        + "\n=== the demo's own output (web, worker, beat) ===\n"
        + demo.output()[-6000:]
    )


def test_the_readme_and_the_api_page_have_examples_to_run():
    examples = api_examples()
    assert examples[README], "no API example found in README.md"
    assert examples[ROOT / "docs" / "api.md"], "no API example found in docs/api.md"


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """`bin/run` as a new user starts it (the semantic extra installed), for this module's tests."""
    demo = DemoRun(tmp_path_factory.mktemp("demo"))
    try:
        demo.start()
        yield demo
    finally:
        demo.kill()


@pytest.mark.worker
def test_the_demo_serves_hybrid_recall_from_its_first_request_with_the_model_loaded_at_start(demo):
    output = demo.output()
    assert "Building the semantic index" in output and "Recall is hybrid" in output, output[-6000:]
    # Each web worker says so once it has run the model, which may be a moment after the
    # server answers its first request on a loaded machine.
    deadline = time.monotonic() + 120
    while demo.output().count("semantic model ready") < 2 and time.monotonic() < deadline:
        time.sleep(0.5)
    output = demo.output()
    assert "web    | " in output and output.count("semantic model ready") == 2, output[-6000:]  # each web worker
    assert "semantic model loaded for the processes forked from this one" in output

    status, found, _ = call(
        demo,
        "POST",
        "/recall/",
        demo.exports["TOKEN"],
        {"query": "how does acme want to be contacted", "purpose": "support", "subject": "customer/acme", "min_relevance": 0},
    )
    assert status == 200 and found["items"] and "semantic" in found["items"][0]["score_parts"], found

    with urllib.request.urlopen(f"{demo.base}/health/", timeout=10) as response:
        serving = json.load(response)["recall"]
    assert serving["serving"] == "hybrid" and serving["model_loaded"] is True and serving["reason"] is None
    status, indexes, _ = call(demo, "GET", "/indexes/", demo.exports["REVIEWER"])
    semantic = [entry for entry in indexes if entry["kind"] == "semantic"]
    assert status == 200 and len(semantic) == 1 and semantic[0]["serving"] and semantic[0]["model_loaded"]
    assert semantic[0]["promotion"]["passed"] is True  # through the gates, with the demo's golden questions


@pytest.mark.worker
def test_every_api_example_of_readme_and_docs_runs_as_written_twice_against_one_demo(demo, tmp_path):
    examples = api_examples()
    acme_before = active_acme_ids(demo)
    assert acme_before

    run_examples(demo, examples, tmp_path, "first pass")
    written = records_in_the_tenant(demo)
    run_examples(demo, examples, tmp_path, "second pass")
    # Replayed writes carry the same Idempotency-Key under the same token: nothing is written twice.
    assert records_in_the_tenant(demo) == written

    # The demo survives its examples: no record of its main subject was forgotten, retired or
    # superseded, recall still finds them, and the agent's token still works.
    assert acme_before <= active_acme_ids(demo)
    recall = urllib.request.Request(
        demo.exports["API"] + "/recall/",
        method="POST",
        data=json.dumps(
            {
                "query": "does acme prefer email or phone",
                "purpose": "support",
                "subject": "customer/acme",
                "limit": 10,
                "token_budget": 800,
            }
        ).encode(),
        headers={"Authorization": f"Bearer {demo.exports['TOKEN']}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(recall, timeout=30) as response:
        items = json.load(response)["items"]
    assert {item["id"] for item in items} & acme_before
    # What the README's tour says of this recall (its step 4): the preference its step 1 wrote,
    # then the demo's, both matching the question's words.
    assert [item["content"] for item in items[:2]] == [
        "Prefers email over phone.",
        "Prefers email over phone for routine updates.",
    ]
    assert all(item["score_parts"]["lexical"] > 0 for item in items[:2])


@pytest.mark.worker
def test_ctrl_c_stops_the_semantic_demo_cleanly(demo):
    assert_stopped_cleanly(demo.interrupt(), demo.output())
