"""The TypeScript client (clients/typescript, npm package `governed-memory-client`) from here:

- installed from its lock file with `npm ci` (the npm registry) and built with `tsc`, once per session,
  in a copy of its sources (two test runs in one checkout never share its node_modules), its
  declarations compiled as a strict consumer uses them (`tests/types.check.ts`);
- its request and response types, generated from the app's OpenAPI schema by openapi-typescript,
  must equal what the schema generates now (a stale `src/api-types.ts` fails);
- its own tests (Node's test runner, `clients/typescript/tests/`) run against live servers: one as
  configured, one with a tiny rate limit (429 and Retry-After); node's output is the failure message;
- `signResult` gives the RFC 8785 canonical bytes Python's `rfc8785` gives, signed so that
  `cryptography` verifies the signature;
- the README's quick start runs as written from the packed package, installed into an empty folder.
"""

import base64
import difflib
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command

from memory.models import MemoryRecord
from tests.processes import ROOT, GunicornServer, database_url_for_subprocesses

PACKAGE = ROOT / "clients" / "typescript"
GENERATED = PACKAGE / "src" / "api-types.ts"
README = PACKAGE / "README.md"
ROOT_README = ROOT / "README.md"
REGENERATE = (
    ".venv/bin/python manage.py spectacular --file clients/typescript/openapi.yaml && (cd clients/typescript && npm run generate)"
)
NODE_TESTS = 18  # at least this many tests in clients/typescript/tests/


def run(command: list[str], *, cwd: Path, timeout: float = 600, **kwargs) -> subprocess.CompletedProcess:
    """A command that must succeed; its output is the failure message."""
    result = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=timeout, **kwargs)
    assert result.returncode == 0, (
        f"{' '.join(map(str, command))} failed ({result.returncode}):\n{result.stdout[-8000:]}\n{result.stderr[-8000:]}"
    )
    return result


@pytest.fixture(scope="session")
def typescript_package(tmp_path_factory) -> Path:
    """A copy of the package's sources installed from package-lock.json (dev dependencies only:
    typescript, openapi-typescript, @types/node), built into dist/ and its declarations
    type-checked; the checkout's own folder is only read."""
    assert shutil.which("node") and shutil.which("npm"), "Node (20 or later) and npm are needed for the TypeScript client"
    package = tmp_path_factory.mktemp("typescript") / "package"
    shutil.copytree(PACKAGE, package, ignore=shutil.ignore_patterns("node_modules", "dist"))
    run(["npm", "ci", "--no-audit", "--no-fund"], cwd=package)
    run(["npm", "run", "build"], cwd=package)
    run(["npm", "run", "check"], cwd=package)  # the declarations as a strict consumer sees them (tests/types.check.ts)
    return package


@pytest.fixture(scope="module")
def limited_server(django_db_setup, tmp_path_factory):
    server = GunicornServer(tmp_path_factory.mktemp("gunicorn") / "gunicorn.log", API_THROTTLE_RATE="3/s")
    server.start()
    yield server
    server.stop()


@pytest.mark.django_db
def test_the_generated_types_are_what_the_apps_openapi_schema_gives_now(typescript_package, tmp_path):
    schema, fresh = tmp_path / "openapi.yaml", tmp_path / "api-types.ts"
    call_command("spectacular", "--file", str(schema))
    run(
        [str(typescript_package / "node_modules" / ".bin" / "openapi-typescript"), str(schema), "--output", str(fresh)],
        cwd=typescript_package,
    )
    committed, now = GENERATED.read_text(), fresh.read_text()
    diff = "".join(
        list(difflib.unified_diff(committed.splitlines(True), now.splitlines(True), "committed", "generated now"))[:80]
    )
    assert committed == now, f"clients/typescript/src/api-types.ts is stale; regenerate it:\n  {REGENERATE}\n{diff}"


@pytest.mark.django_db(transaction=True)
def test_the_node_suite_passes_against_a_live_server(
    typescript_package, api_server, limited_server, token, make_credential, tenant
):
    reader = make_credential(tenant, agent_slug="reader")  # no forget capability
    burst = make_credential(tenant, agent_slug="burst-bot")  # the rate-limited server's caller
    env = {
        **os.environ,
        "GOVERNED_MEMORY_URL": api_server.base,
        "GOVERNED_MEMORY_TOKEN": token,
        "GM_TEST_READER_TOKEN": reader.raw_token,
        "GM_TEST_LIMITED_URL": limited_server.base,
        "GM_TEST_LIMITED_TOKEN": burst.raw_token,
        # `manage.py run_job propagate_forgets` against the test database, as beat would run it
        "GM_TEST_PROPAGATE_COMMAND": json.dumps([sys.executable, str(ROOT / "manage.py"), "run_job", "propagate_forgets"]),
        "DATABASE_URL": database_url_for_subprocesses(),
        "APP_VAR_DIR": str(settings.VAR_DIR),
    }
    result = subprocess.run(
        ["node", "--test", "tests/"], cwd=typescript_package, env=env, capture_output=True, text=True, timeout=600
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, (
        f"node --test failed ({result.returncode}):\n{failures(result.stdout)}\n{result.stderr[-4000:]}"
    )
    counts = {name: int(n) for name, n in re.findall(r"^# (tests|pass|fail|skipped|todo|cancelled) (\d+)$", result.stdout, re.M)}
    assert counts.get("tests", 0) >= NODE_TESTS and counts["pass"] == counts["tests"], output[-4000:]
    assert counts["skipped"] == counts["todo"] == counts["cancelled"] == 0, output[-4000:]
    # What the node tests saw through the API, in the database itself: a write whose answer was
    # lost, and a batch chunk sent twice, are each stored once.
    assert MemoryRecord.objects.filter(content="Acme's renewal is in March.").count() == 1
    assert MemoryRecord.objects.filter(content="Acme office fact 0.").count() == 1
    assert MemoryRecord.objects.filter(content__startswith="Acme office fact ").count() == 103


def failures(tap: str) -> str:
    """The `not ok` blocks of node's TAP output (each with its error and stack), then its summary."""
    blocks = re.findall(r"^( *not ok .*?^ *\.\.\.$)", tap, re.M | re.S)
    return "\n".join(blocks)[-16000:] + "\n" + "\n".join(tap.splitlines()[-9:])


def test_sign_result_gives_rfc8785_bytes_and_a_signature_cryptography_verifies(typescript_package, tmp_path):
    import rfc8785
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = Ed25519PrivateKey.generate()
    raw = key.private_bytes(serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption())
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    tricky = 'quote " backslash \\ slash / tab \t newline \n \x01\x1f\x7f é ü 中文 😀 \u2028\u2029 \ufeff'
    cases = [
        {
            "source": "crm",
            "sourceVersion": "contact-42@v7",
            "content": "Acme's renewal is in March.",
            "subject": "customer/acme",
            "observedAt": "2026-11-29T10:00:00Z",
            "privateKey": base64.b64encode(raw).decode(),
        },
        {
            "source": "crm é",
            "sourceVersion": tricky,
            "content": tricky + "\x00",
            "subject": tricky,
            "observedAt": "2026-11-29T12:00:00.123456+02:00",
            "privateKey": pem.decode(),
        },
        {"source": "docs", "sourceVersion": "v1", "content": "", "subject": "customer/😀", "privateKey": pem.decode()},
    ]
    script = tmp_path / "sign.mjs"
    script.write_text(
        f'import {{ canonicalJson, signResult, signedClaim }} from "{(typescript_package / "dist" / "signing.js").as_uri()}";\n'
        'let input = "";\nfor await (const chunk of process.stdin) input += chunk;\n'
        "const out = JSON.parse(input).map((c) => { const signed = signResult(c);\n"
        "  return { signed, canonical: canonicalJson(signedClaim({ ...c, observedAt: signed.observed_at })) }; });\n"
        "process.stdout.write(JSON.stringify(out));\n"
    )
    signed_cases = json.loads(run(["node", str(script)], cwd=typescript_package, input=json.dumps(cases)).stdout)

    public = key.public_key()
    for case, result in zip(cases, signed_cases, strict=True):
        signed = result["signed"]
        observed_at = case.get("observedAt") or signed["observed_at"]  # sent exactly as given; else now, in UTC
        assert "observedAt" in case or re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", observed_at)
        claim = {
            "source": case["source"],
            "source_version": case["sourceVersion"],
            "content_sha256": hashlib.sha256(case["content"].encode()).hexdigest(),
            "subject": case["subject"],
            "observed_at": observed_at,
        }
        canonical = rfc8785.dumps(claim)
        assert result["canonical"].encode() == canonical
        assert (signed["source"], signed["source_version"], signed["observed_at"]) == (
            claim["source"],
            claim["source_version"],
            claim["observed_at"],
        )
        assert signed["content_sha256"] == claim["content_sha256"]
        public.verify(base64.b64decode(signed["signature"]), canonical)  # raises InvalidSignature if not
        with pytest.raises(InvalidSignature):  # the same signature does not cover another subject
            public.verify(base64.b64decode(signed["signature"]), rfc8785.dumps({**claim, "subject": "customer/other"}))


def quick_start(readme: Path, after: str = "") -> str:
    """The first ```js block of a README (after the heading `after`, when given)."""
    text = readme.read_text()
    if after:
        assert after in text, f"{readme.name} has no {after!r}"
        text = text[text.index(after) :]
    match = re.search(r"^```js\n(.*?)^```", text, re.M | re.S)
    assert match, f"no ```js block in {readme.name}"
    return match.group(1)


@pytest.mark.django_db(transaction=True)
def test_the_readme_quick_start_runs_as_written_from_the_packed_package(typescript_package, api_server, token, tmp_path):
    snippet = quick_start(README)
    assert quick_start(ROOT_README, after="## TypeScript client") == snippet, "the root README's quick start differs"
    assert len(snippet.strip().splitlines()) <= 12

    packed = run(["npm", "pack", "--pack-destination", str(tmp_path)], cwd=typescript_package).stdout.strip().splitlines()[-1]
    with tarfile.open(tmp_path / packed) as tarball:
        shipped = set(tarball.getnames())
    assert {"package/dist/index.js", "package/dist/index.d.ts", "package/dist/signing.d.ts", "package/README.md"} <= shipped
    assert not [name for name in shipped if name.startswith(("package/src/", "package/tests/", "package/node_modules/"))]

    app = tmp_path / "app"
    app.mkdir()
    run(["npm", "install", "--no-audit", "--no-fund", str(tmp_path / packed)], cwd=app)
    (app / "quickstart.mjs").write_text(snippet)
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "GOVERNED_MEMORY_URL": api_server.base,
        "GOVERNED_MEMORY_TOKEN": token,
    }
    output = run(["node", "quickstart.mjs"], cwd=app, env=env, timeout=60).stdout

    written = MemoryRecord.objects.get()
    assert (written.status, written.subject, written.content) == ("active", "customer/acme", "Prefers email over phone.")
    assert str(written.id) in output and "] Prefers email over phone." in output
