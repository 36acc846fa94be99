"""Golden recall sets: per tenant, questions with the records they must find, and the runs that
score an index against them (hit@k and MRR, per question and overall).

- `models`: `GoldenQuestion`, `GoldenRun` (gathered by `governance.models` so Django finds them).
- `services`: creating a question (the rule that its expected records lie in its scope).
- `runner`: runs a tenant's questions through `memory.recall.recall_for_agent` with a given index
  and stores a `GoldenRun`.
- `gate`: the promotion gate registered with `memory.search`: a candidate index becomes active
  only if it scores at least as well as the active one on every tenant's set.
- `jobs`: the nightly `golden_recall` job; `forgetting`: the forget artifact for questions;
  `admin`: questions curated, runs read-only;
  `selectors`: scoped reads for the API, the reviewer page and the dashboard; `demo`: the demo
  tenant's ten questions.
"""
