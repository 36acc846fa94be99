"""Forgetting a subject: the request, its propagation into every derived store, and its receipts.

- `models`: `ForgetRequest`, `PropagationReceipt`, `ForgetTombstone`;
- `services`: `forget_request_create`, the synchronous logical forget that opens a request;
- `selectors`: forget requests as each caller may read them;
- `artifacts`: the registry of stores that hold copies of content, the built-in ones, and the
  coverage check; `search_indexes`: the search indexes' artifact;
- `propagation`: purging a request's records from every artifact, chunk by chunk, with receipts;
- `jobs`: `propagate_forgets`, the scheduled job that completes open requests;
- `admin`: read-only requests, receipts and tombstones.

Other features register their own artifacts from GovernanceConfig.ready() (golden questions,
revocations, dedup proposals, the pruned-record trace, the forget ledger, the disk).
"""
