"""What keeps forgetting true when the database itself is copied, restored or rewritten:

- `ledger`: the forget ledger, an append-only file outside the database (fingerprints only) that a
  restore cannot roll back;
- `backups`: consistent backups with a manifest, and the restore that re-applies every forget the
  backup does not contain before it returns;
- `disk`: forgetting that reaches the disk (SQLite secure delete; PostgreSQL tables rewritten
  online by pg_repack in a batched, scheduled job), with the `disk` forget artifact whose receipt
  says when that happened and what remains;
- `imports`: the import guard that refuses notes about a subject forgotten here;
- `jobs`: `disk_rewrite`, the scheduled job that rewrites and verifies the disk for every forget
  completed before it.

What each database does for the backup and the disk is its engine's (`memory.engine.*.ops`).
"""
