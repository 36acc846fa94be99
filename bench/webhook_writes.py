"""Write throughput with webhook subscriptions active, beside the same writes without, in one run.

Every write leaves its outbox event either way; what a subscription adds to the write path is the
wake-up of the delivery job once events commit (an `exists` check and a task message, at most
once a second per process). Rounds alternate (without, with, without, ...) so that drift of the
machine falls on both sides; deliveries themselves run in the worker, not here.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/gm_bench .venv/bin/python -m bench.webhook_writes --writes 2000

The database must be migrated (`manage.py migrate`); the run adds a tenant `bench-webhooks` and
leaves its rows. Prints one JSON object: writes per second without and with, and their ratio.
"""

import argparse
import json
import os
import statistics
import time
import uuid


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--writes", type=int, default=2000, help="writes per side, over all rounds")
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("WEBHOOKS_ALLOW_PRIVATE_NETWORKS", "true")  # the subscription's URL is loopback
    import django

    django.setup()
    from governance.events.models import WebhookSubscription
    from memory.models import Agent, AgentCredential, Tenant
    from memory.services import memory_write

    tenant, _ = Tenant.objects.get_or_create(slug="bench-webhooks", defaults={"name": "Bench webhooks"})
    agent, _ = Agent.objects.get_or_create(tenant=tenant, slug="writer")
    credential, _ = AgentCredential.issue(agent=agent, purposes=["support"])
    subscription = WebhookSubscription.objects.create(tenant=tenant, url="http://127.0.0.1:9/hook", events=["*"], is_active=False)

    def body(n: int) -> dict:
        return {
            "kind": "preference",
            "subject": f"customer/{n % 50}",
            "purpose": "support",
            "content": f"Prefers channel {uuid.uuid4().hex[:8]} ({n}).",
            "authority": "user",
            "confidence": 0.9,
            "provenance": {
                "source_type": "user_turn",
                "uri": f"chat://s/{n}",
                "session_id": "s",
                "turn_id": str(n),
                "observed_at": "2026-11-29T10:00:00Z",
            },
        }

    per_round = max(1, args.writes // args.rounds)
    rates: dict[str, list[float]] = {"without": [], "with": []}
    n = 0
    for _ in range(args.rounds):
        for side in ("without", "with"):
            WebhookSubscription.objects.filter(pk=subscription.pk).update(is_active=side == "with")
            started = time.perf_counter()
            for _ in range(per_round):
                memory_write(credential=credential, data=body(n))
                n += 1
            rates[side].append(per_round / (time.perf_counter() - started))
    without, with_ = statistics.median(rates["without"]), statistics.median(rates["with"])
    WebhookSubscription.objects.filter(pk=subscription.pk).update(is_active=False)
    print(
        json.dumps(
            {
                "writes_per_side": per_round * args.rounds,
                "rounds": args.rounds,
                "writes_per_second_without": round(without, 1),
                "writes_per_second_with": round(with_, 1),
                "ratio": round(with_ / without, 3),
            }
        )
    )


if __name__ == "__main__":
    main()
