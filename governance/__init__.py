"""The processes around records, one subpackage per feature:

- `forget`: forget requests, their propagation into every derived store, receipts, tombstones;
- `retention`: the expire, sweep and prune jobs, and the trace a pruned record leaves;
- `dedup`: duplicate and contradiction proposals, and a reviewer's decisions on them;
- `golden`: golden recall sets and the runs that score an index against them;
- `revocations`: revoking a source (a token, an agent, a session, a URI prefix);
- `alerts`: queue thresholds, alert emails and reviewers' daily digests;
- `portability`: the forget ledger, backups and restores, forgetting on disk;
- `jobs`: the machinery every scheduled job runs through (registry, lock, runs, schedule);
- `review`, `api`, `ops`: the reviewer UI, the governance API, /health/ and /metrics.

At the root, only what Django and Celery look for: `apps` (the features' hooks into `memory`,
registered in `ready()`), `models` and `admin` (each gathering the features'), `tasks` (one task
per registered job), and `readonly_admin`, the mixin the features' admins share.
"""
