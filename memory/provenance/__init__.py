"""Provenance that proves itself: sources registered per tenant (a tool, a system of record, a
document store) with their Ed25519 verification keys, and the checks a signed write passes before
anything is stored.

- `models`: `RegisteredSource` and `SourceKey` (imported by `memory.models`, so a leaf: it imports
  no other model module);
- `keys`: reading a public key (PEM or raw base64) and its fingerprint;
- `registry`: registering a source, changing its policy and rotating its key (revoking a key is a
  revocation: `memory.services.revoke`);
- `verify`: the canonical signed statement, verifying a write's signature, and the immutable
  source versions;
- `failures`: the metric and the tally of refused signatures that the alerts read;
- `admin`: sources and their keys in the admin (registered by `memory.admin`).
"""
