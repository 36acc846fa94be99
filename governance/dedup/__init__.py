"""Deduplication and contradiction proposals.

- `detect`: pure detection within one scope (normalisation, similarity, contradictions, blocking);
- `lexicon`: the English word lists detection relies on;
- `jobs`: `propose_duplicates`, the scheduled job that files `DedupProposal`s;
- `services`: a reviewer's accept / reject / rollback, and the regret rate;
- `selectors`: the proposal queue, members side by side, word diff, lineage of derived records.
"""
