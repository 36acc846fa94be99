"""Signed provenance in tests: a registered CRM-style source and its results as write bodies,
signed on the source's side with the Python client's `governed_memory.signing` (so every test also
checks that the client signs what the server verifies)."""

from typing import Any

from governed_memory.signing import generate_private_key, public_key_text, sign_result
from memory.models import RegisteredSource, Tenant
from memory.provenance.registry import source_register
from tests.conftest import memory_body

OBSERVED = "2026-11-29T10:00:00+01:00"  # signed as sent: not the UTC form the server stores


def register_crm(tenant: Tenant, key=None, *, name: str = "crm", auto_admit_kinds=("semantic",), **policy) -> RegisteredSource:
    source, _, _ = source_register(
        tenant=tenant,
        name=name,
        public_key=public_key_text(key or generate_private_key()),
        auto_admit_kinds=auto_admit_kinds,
        actor_label="test",
        **policy,
    )
    return source


def crm_claim(
    key=None,
    *,
    content: str = "Acme's billing contact is Dana Reyes.",
    subject: str = "customer/acme",
    version: str | None = "contact/42@v7",
    source: str | None = None,
    signed_over: dict[str, Any] | None = None,
    **overrides: Any,
) -> dict:
    """A CRM lookup's result as a write body (a tool_output fact, third-party authority), signed
    with `key` when given, naming `source` (default: crm when signed). `signed_over` changes what the
    signature covers, not what is sent."""
    provenance = {
        "source_type": "tool_output",
        "tool": "crm_lookup",
        "uri": None,
        "session_id": "s-crm",
        "turn_id": None,
        "source_version": version,
        "observed_at": OBSERVED,
    }
    if key is not None:
        statement = {
            "source": "crm",
            "source_version": version or "",
            "content": content,
            "subject": subject,
            "observed_at": OBSERVED,
        }
        # sign_result refuses an empty version, so a claim without one is signed over a placeholder
        statement = {**statement, "source_version": statement["source_version"] or "none", **(signed_over or {})}
        provenance["signature"] = sign_result(key, **statement)["signature"]
    if source is not None or key is not None:
        provenance["source"] = source or "crm"
    body = memory_body(kind="semantic", subject=subject, content=content, authority="third_party", provenance=provenance)
    for name, value in overrides.items():
        body[name] = {**body[name], **value} if name == "provenance" else value
    return body
