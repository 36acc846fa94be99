"""The transactional outbox: one `Event` row per lifecycle change, written in the transaction that
makes the change (by the lifecycle services and, for bulk moves, by the engine's statements), and
a sequencer that gives committed events their place in the feed.

Events carry ids and metadata (type, time, tenant, record id, version, status, authority, kind),
never content or provenance. Governance delivers them to webhooks (governance.events) and the API
serves them as a feed (`GET /api/v1/events/`)."""
