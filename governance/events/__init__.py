"""Events out: webhook subscriptions per tenant, their signed deliveries (Standard Webhooks, by
Celery, with backoff, in order per record, dead-lettered after about a day), safe outbound
requests, the event feed's retention, and forget requests that wait for copy-keeping subscribers
to acknowledge. The events themselves are memory's outbox (memory.outbox)."""
