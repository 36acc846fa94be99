"""Revoking a source: a credential, an agent, a session or a source-URI prefix within a tenant.
Everything it wrote that is active, and everything derived from it, goes back to quarantine at once
(through `memory.services.memory_revoke_source`), with a `Revocation` as the receipt."""
