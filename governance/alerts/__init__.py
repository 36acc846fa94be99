"""Queues that do not rot silently: per-tenant alert thresholds evaluated by the `alerts` job, one
email per alert episode to the tenant's reviewers, and a daily digest per reviewer (with an
opt-out). Emails carry counts, ids and links only: never memory content or subjects."""
