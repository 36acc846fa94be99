"""The `propagate_forgets` job: completes every open forget request across every registered
artifact (governance.forget.artifacts), with one receipt per artifact. A request that fails is
reported and retried by the next run; the others still complete. With read replicas, it also
closes the replica fences that every replica has replayed past."""

from collections import Counter
from datetime import datetime

from governance.forget.artifacts import registered_artifacts
from governance.forget.propagation import PropagationResult, propagate_open_forget_requests
from governance.jobs.runner import JobIncomplete, describe_error
from memory import replicas


def propagate_forgets(*, now: datetime, batch_size: int) -> dict[str, int]:
    counts = Counter({"requests_completed": 0, "requests_failed": 0, "records": 0})
    counts.update({f"removed_{artifact.name}": 0 for artifact in registered_artifacts()})
    errors = []
    for request, result in propagate_open_forget_requests(batch_size=batch_size, now=now):
        if isinstance(result, PropagationResult):
            counts["requests_completed"] += int(result.completed)
            counts["records"] += result.records
            counts.update({f"removed_{name}": removed for name, removed in result.removed.items()})
        else:
            counts["requests_failed"] += 1
            errors.append(f"forget request {request.pk}: {describe_error(result)}")
    if replicas.aliases():  # fences every replica has replayed past are closed here (memory.replicas)
        counts["replica_fences_closed"] = replicas.close_fences()
    if errors:
        raise JobIncomplete(dict(counts), errors)
    return dict(counts)
