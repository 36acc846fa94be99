"""Liveness and readiness per role, for a load balancer, systemd or an orchestrator
(docs/deployment.md):

- **web**: alive when the process answers HTTP (`GET /health/live/`, no dependency checked, so a
  database outage never restarts every web process); ready (`GET /health/ready/`) when the database
  answers and, with the semantic extra and an active semantic index, this process holds the model.
  The broker is not part of it: recall and reads work without it, and a load balancer that took
  every web host out when Redis stops would turn a degraded service into none. With read replicas
  (DATABASE_REPLICA_URLS) it reports each one's reachability and replay lag; a replica that is
  down leaves the process ready (its reads fall back to the primary) with the status "degraded".
- **worker**: alive when its heartbeat file is fresh (the worker's timer touches it); ready when it
  is alive and the database and the broker answer.
- **beat**: alive when its heartbeat file is fresh (every scheduler tick touches it); ready when it
  is alive and the database and the broker answer.

`GET /health/` (everything at once, for a person or a monitor) is unchanged.
`manage.py probe ROLE [--live] [--node NAME]` runs the worker and beat probes on their host."""

from __future__ import annotations

from typing import Any

from governance.ops import heartbeat
from governance.ops.checks import check_broker, check_database, check_replicas, recall_serving
from memory import replicas

ROLES = ("web", "worker", "beat")


def check_heartbeat(role: str, node: str = "") -> dict[str, Any]:
    path = heartbeat.path_for(role, node)
    seconds = heartbeat.age(path)
    if seconds is None:
        return {"ok": False, "error": "no heartbeat file", "file": path.name}
    ok = seconds <= heartbeat.stale_after()
    return {"ok": ok, "age_seconds": round(seconds, 1), "stale_after_seconds": heartbeat.stale_after()}


def check_model() -> dict[str, Any]:
    """Ready to answer recall as the indexes say: when a semantic index is active and this process
    could serve it, the model must be loaded here."""
    report = recall_serving()
    if "error" in report:
        return {"ok": False, "error": report["error"]}
    waiting = bool(report.get("semantic_index")) and report.get("model_loaded") is False
    return {"ok": not waiting, "serving": report.get("serving")}


def probe(role: str, *, live: bool = False, node: str = "") -> tuple[bool, dict[str, Any]]:
    """(ok, {"role", "probe", "checks"}) for `role`: its liveness, or its readiness."""
    if role not in ROLES:
        raise ValueError(f"unknown role {role!r}: one of {', '.join(ROLES)}")
    checks: dict[str, dict[str, Any]] = {}
    if role == "web":
        if not live:
            checks = {"database": check_database(), "recall": check_model()}
            if replicas.aliases():
                checks["replicas"] = check_replicas()
    else:
        checks["heartbeat"] = check_heartbeat(role, node)
        if not live:
            checks.update(database=check_database(), broker=check_broker())
    ok = all(result["ok"] for result in checks.values())
    status = "fail" if not ok else "degraded" if any(result.get("degraded") for result in checks.values()) else "ok"
    return ok, {"status": status, "role": role, "probe": "live" if live else "ready", "checks": checks}
