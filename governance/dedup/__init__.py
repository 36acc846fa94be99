"""Deduplication and contradiction proposals.

- `detect`: pure detection within one scope (grouping, blocking, the kept record), built on
  `text` (a text's profile: normalisation, stems, values, names), `contrast` (which alternatives a
  text sets against each other), `comparison` (similarity and contradictions of two texts) and
  `stems` (stemming and the lexicon's word classes);
- `lexicon`: the English word lists detection relies on;
- `jobs`: `propose_duplicates`, the scheduled job that files `DedupProposal`s (`models`);
- `services`: a reviewer's accept / reject / rollback, and the regret rate;
- `selectors`: the proposal queue, members side by side, word diff, lineage of derived records;
- `forgetting`: proposals as a forget artifact; `admin`: proposals, read-only.
"""
