"""Retention: what happens to records past their time, as scheduled jobs.

- `expire`: the `expire` job, every record past `expires_at` gets the explicit `expired` transition;
- `sweep_indexes`: the `sweep_indexes` job, search-index entries of records expired in time;
- `prune`: the `prune` job, records retention no longer keeps deleted with their history, and old
  job runs, idempotency keys and traces trimmed;
- `history`: the records' history past HISTORY_RETENTION_DAYS dropped a month at a time (on
  PostgreSQL a partition each, made ahead by the same run), called by `prune`;
- `pruned_trace`: the content-free trace (`models.PrunedRecord`) a pruned record leaves, which
  as-of reads report (registered with `memory.asof` from GovernanceConfig.ready());
- `admin`: the traces, read-only.
"""
