"""Every README code block that calls the API runs as written against a live demo started by
`bin/run`, in README order in one shell (as a reader pastes them after bin/run's `export` line):
each HTTP call must succeed (2xx), and the demo's own data must survive the examples.

The blocks are parsed from README.md itself, so a new example is tested without touching this file.
A block is an API example when it runs `curl`; other blocks (install, manage.py, cron, Python,
JSON, YAML) are not. An API block that must not run says so on the line before it:
`<!-- readme-example: not run, <why> -->`.
"""

import json
import re
import subprocess
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.demo_run import DemoRun
from tests.processes import ROOT

README = ROOT / "README.md"
NOT_RUN = re.compile(r"<!--\s*readme-example:\s*not run\b")

# Each call of the examples goes through this `curl`: the real one, whose HTTP status is logged per block.
CURL_WRAPPER = r"""
curl() {
  local body status
  body="$(mktemp)"
  status="$(command curl --silent --show-error --output "$body" --write-out '%{http_code}' "$@")" || status="000"
  cat "$body"; echo
  rm -f "$body"
  printf '%s %s\n' "$README_BLOCK" "$status" >> "$README_STATUS_LOG"
}
"""


@dataclass
class Block:
    line: int  # 1-based line of its first code line in README.md
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
    text = ("Intro\n\n    curl -s $API/x/ \\\n      -H 'A: b'\n\n    # same block\n\nText\n<!-- readme-example: not run, a sketch -->\n"
            "```sh\ncurl -s $API/y/\n```\n\n```python\nprint('no')\n```\n- a list item\n  continued\n")
    blocks = code_blocks(text)
    assert [(block.line, block.code) for block in blocks] == [
        (3, "curl -s $API/x/ \\\n  -H 'A: b'\n\n# same block"), (11, "curl -s $API/y/"), (15, "print('no')"),
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


@pytest.mark.worker
def test_every_readme_api_example_runs_as_written_against_the_demo(tmp_path):
    blocks = [block for block in code_blocks(README.read_text()) if block.calls_api]
    to_run = [block for block in blocks if not NOT_RUN.search(block.marker)]
    assert to_run, "no API example found in README.md"

    demo = DemoRun(tmp_path)
    try:
        demo.start()
        acme_before = active_acme_ids(demo)
        assert acme_before

        status_log = tmp_path / "statuses"
        script = [CURL_WRAPPER]
        for block in to_run:
            script += [f"README_BLOCK={block.line}", f"echo '=== README.md line {block.line}'", block.code, ""]
        result = subprocess.run(
            ["bash", "-c", "\n".join(script)], cwd=tmp_path, capture_output=True, text=True, timeout=300,
            env={"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(tmp_path), "README_STATUS_LOG": str(status_log),
                 **demo.exports},
        )
        transcript = result.stdout + result.stderr

        calls: dict[int, list[str]] = {}
        for row in status_log.read_text().splitlines() if status_log.exists() else []:
            line, status = row.split()
            calls.setdefault(int(line), []).append(status)
        failed = {line: statuses for line, statuses in calls.items() if any(not s.startswith("2") for s in statuses)}
        silent = [block.line for block in to_run if block.line not in calls]
        assert not failed and not silent and "Traceback" not in transcript and not result.stderr.strip(), (
            f"README examples that failed (README.md line: HTTP statuses): {failed}; made no call: {silent}\n"
            f"{transcript[-12000:]}"
        )

        # The demo survives its README: no record of its main subject was forgotten, retired or
        # superseded, recall still finds them, and the agent's token still works.
        assert acme_before <= active_acme_ids(demo)
        recall = urllib.request.Request(
            demo.exports["API"] + "/recall/", method="POST",
            data=json.dumps({"query": "how does acme want to be contacted", "purpose": "support",
                             "subject": "customer/acme"}).encode(),
            headers={"Authorization": f"Bearer {demo.exports['TOKEN']}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(recall, timeout=30) as response:
            items = json.load(response)["items"]
        assert {item["id"] for item in items} & acme_before
    finally:
        demo.kill()
