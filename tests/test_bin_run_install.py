"""`bin/run`'s install (bin/install-app): the semantic extra by default, without it when
SEMANTIC_INSTALL is false, without it when it cannot be installed (and tried again at the next start),
and only when pyproject.toml or that choice changed. Run in a copy of the scripts and pyproject.toml
whose `.venv/bin/python` is a fake that records its arguments: what is tested is the scripts' choices,
not pip's work (a real install of the extra takes minutes; tests/test_bin_run.py starts the real demo)."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.processes import ROOT

# Records each call's arguments; `-m venv DIR` makes DIR/bin/python (itself), as a fresh clone's first
# start does; the install of the extra fails when FAKE_FAIL_SEMANTIC is set, every install when
# FAKE_FAIL_ALL is.
FAKE_PYTHON = r"""#!/usr/bin/env bash
echo "$*" >>"$FAKE_CALLS"
case "$*" in
  "-m venv "*) mkdir -p "$3/bin" && cp "$0" "$3/bin/python" ;;
  *"install -q -e .[semantic]")
    if [ -n "${FAKE_FAIL_SEMANTIC:-}${FAKE_FAIL_ALL:-}" ]; then
      echo "ERROR: No matching distribution found for torch==2.13.0" >&2; exit 1
    fi ;;
  *"install -q -e .")
    if [ -n "${FAKE_FAIL_ALL:-}" ]; then echo "ERROR: the app could not be built" >&2; exit 1; fi ;;
esac
echo "pip chatter"
"""

PIP = "-m pip install -q --upgrade pip"
SEMANTIC = "-m pip install -q -e .[semantic]"
LEXICAL = "-m pip install -q -e ."
FALLBACK = "The semantic extra could not be installed (see var/install.log); recall will be lexical."


class Checkout:
    """bin/run, bin/install-app and pyproject.toml in a folder of their own, with the fake python as
    its `.venv/bin/python` (none with venv=False) and as PYTHON (what makes `.venv`)."""

    def __init__(self, directory: Path, venv: bool = True):
        self.root = directory / "checkout"
        (self.root / "bin").mkdir(parents=True)
        for name in ("bin/run", "bin/install-app", "pyproject.toml"):
            shutil.copy2(ROOT / name, self.root / name)
        self.fake = directory / "fake-python"
        self.fake.write_text(FAKE_PYTHON)
        self.fake.chmod(0o755)
        if venv:
            (self.root / ".venv" / "bin").mkdir(parents=True)
            shutil.copy2(self.fake, self.root / ".venv" / "bin" / "python")
        self.calls_path = directory / "calls"
        self.marker = self.root / ".venv" / ".bin-run-installed"
        self.log = self.root / "var" / "install.log"

    def run(self, script: str = "bin/install-app", *args: str, **env: str) -> subprocess.CompletedProcess:
        """Run `script` as a user would, with `env` added; the fake's calls of this run only."""
        self.calls_path.unlink(missing_ok=True)
        inherited = {
            key: value
            for key, value in os.environ.items()
            if key not in {"SEMANTIC_INSTALL", "BIN_RUN_SKIP_INSTALL", "APP_VAR_DIR", "DATABASE_URL", "REDIS_URL"}
            and key not in {"PROMETHEUS_MULTIPROC_DIR", "DJANGO_SETTINGS_MODULE", "PYTHON"}
        }
        return subprocess.run(
            [str(self.root / script), *args],
            cwd=self.root,
            env={**inherited, "FAKE_CALLS": str(self.calls_path), "PYTHON": str(self.fake), **env},
            capture_output=True,
            text=True,
            timeout=60,
        )

    def calls(self) -> list[str]:
        return self.calls_path.read_text().splitlines() if self.calls_path.exists() else []


def test_a_fresh_clone_gets_a_venv_and_the_app_with_the_semantic_extra(tmp_path):
    checkout = Checkout(tmp_path, venv=False)
    result = checkout.run()
    assert result.returncode == 0, result.stderr
    assert checkout.calls() == ["-m venv .venv", PIP, SEMANTIC]
    assert "semantic extra into .venv (log: var/install.log): a few minutes the first time" in result.stdout
    assert result.stderr == ""
    assert checkout.marker.read_text().endswith(" semantic\n")


@pytest.mark.parametrize("value", ["false", "0", "no", "off", "FALSE", " Off ", ""])
def test_semantic_install_false_installs_the_app_without_the_extra(tmp_path, value):
    checkout = Checkout(tmp_path)
    result = checkout.run(SEMANTIC_INSTALL=value)
    assert result.returncode == 0, result.stderr
    assert checkout.calls() == [PIP, LEXICAL]
    assert "Installing the app into .venv (log: var/install.log)" in result.stdout
    assert "semantic" not in result.stdout + result.stderr


@pytest.mark.parametrize("value", ["true", "1", "yes", "on", "TRUE", " Yes "])
def test_semantic_install_true_installs_the_extra(tmp_path, value):
    checkout = Checkout(tmp_path)
    result = checkout.run(SEMANTIC_INSTALL=value)
    assert result.returncode == 0, result.stderr
    assert checkout.calls() == [PIP, SEMANTIC]


@pytest.mark.parametrize("value", ["flase", "2", "yes please", "none"])
def test_an_unknown_semantic_install_is_refused_before_anything_is_installed(tmp_path, value):
    checkout = Checkout(tmp_path)
    result = checkout.run(SEMANTIC_INSTALL=value)
    assert result.returncode == 2
    assert f"SEMANTIC_INSTALL must be a boolean (true/false, 1/0, yes/no, on/off), got '{value}'" in result.stderr
    assert checkout.calls() == [] and not checkout.marker.exists()


def test_when_the_extra_cannot_be_installed_the_app_is_installed_without_it_and_the_extra_retried_next_start(tmp_path):
    checkout = Checkout(tmp_path)
    result = checkout.run(FAKE_FAIL_SEMANTIC="1")
    assert result.returncode == 0, result.stderr
    assert checkout.calls() == [PIP, SEMANTIC, LEXICAL]
    said = result.stderr.splitlines()
    assert len(said) == 1 and said[0].startswith(FALLBACK), result.stderr  # one line, not pip's log
    assert "SEMANTIC_INSTALL=false bin/run installs without it" in said[0]
    assert "No matching distribution found for torch" in checkout.log.read_text()
    assert checkout.marker.read_text().endswith(" lexical\n")

    # The next start tries the extra again; once it installs, the start after installs nothing.
    retried = checkout.run()
    assert retried.returncode == 0 and checkout.calls() == [PIP, SEMANTIC], retried.stderr
    assert retried.stderr == "" and checkout.marker.read_text().endswith(" semantic\n")
    assert checkout.run().returncode == 0 and checkout.calls() == []


def test_a_fallback_is_enough_for_a_start_that_wants_no_extra(tmp_path):
    checkout = Checkout(tmp_path)
    assert checkout.run(FAKE_FAIL_SEMANTIC="1").returncode == 0
    assert checkout.run(SEMANTIC_INSTALL="false").returncode == 0 and checkout.calls() == []


def test_when_the_app_cannot_be_installed_at_all_the_log_is_shown_and_the_start_fails(tmp_path):
    checkout = Checkout(tmp_path)
    checkout.marker.write_text("an older install\n")
    result = checkout.run(FAKE_FAIL_ALL="1")
    assert result.returncode == 1
    assert checkout.calls() == [PIP, SEMANTIC, LEXICAL]
    assert FALLBACK in result.stderr
    # the log, shown whole: both tries and their errors
    assert "No matching distribution found for torch" in result.stderr and "the app could not be built" in result.stderr
    assert checkout.marker.read_text() == "an older install\n"  # the next start tries again


def test_without_the_extra_a_failed_install_shows_the_log_with_no_fallback(tmp_path):
    checkout = Checkout(tmp_path)
    result = checkout.run(SEMANTIC_INSTALL="false", FAKE_FAIL_ALL="1")
    assert result.returncode == 1 and checkout.calls() == [PIP, LEXICAL]
    assert "the app could not be built" in result.stderr and FALLBACK not in result.stderr
    assert not checkout.marker.exists()


def test_the_install_is_repeated_only_when_pyproject_or_the_choice_changed(tmp_path):
    checkout = Checkout(tmp_path)
    # The marker of a bin/run from before the choice (the hash alone) installs the extra once.
    checkout.marker.write_text(subprocess.check_output(["sha256sum", "pyproject.toml"], cwd=checkout.root, text=True))
    assert checkout.run().returncode == 0 and checkout.calls() == [PIP, SEMANTIC]
    assert checkout.run().returncode == 0 and checkout.calls() == []
    assert checkout.run(SEMANTIC_INSTALL="true").returncode == 0 and checkout.calls() == []
    assert checkout.run(SEMANTIC_INSTALL="false").returncode == 0 and checkout.calls() == [PIP, LEXICAL]
    assert checkout.run(SEMANTIC_INSTALL="off").returncode == 0 and checkout.calls() == []
    assert checkout.run().returncode == 0 and checkout.calls() == [PIP, SEMANTIC]
    with (checkout.root / "pyproject.toml").open("a") as pyproject:
        pyproject.write("# a changed dependency\n")
    assert checkout.run().returncode == 0 and checkout.calls() == [PIP, SEMANTIC]
    assert checkout.run().returncode == 0 and checkout.calls() == []


def test_bin_run_installs_before_it_prepares_and_starts_the_demo_unless_told_to_skip(tmp_path):
    checkout = Checkout(tmp_path)
    started = checkout.run("bin/run", APP_PORT="8123")
    assert started.returncode == 0, started.stderr
    assert checkout.calls() == [
        PIP,
        SEMANTIC,
        "manage.py prepare_demo --base-url http://127.0.0.1:8123",
        "bin/procfile.py Procfile",
    ]
    skipped = checkout.run("bin/run", SEMANTIC_INSTALL="false", BIN_RUN_SKIP_INSTALL="1")
    assert skipped.returncode == 0, skipped.stderr
    assert [call for call in checkout.calls() if "pip" in call] == []
    refused = checkout.run("bin/run", SEMANTIC_INSTALL="maybe")
    assert refused.returncode == 2 and "SEMANTIC_INSTALL must be a boolean" in refused.stderr
    assert checkout.calls() == []  # neither installed nor started
