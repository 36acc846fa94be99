"""The `alerts` job: evaluate every tenant's alert thresholds (emailing reviewers once per new
episode) and, once a day, send the reviewers' digests. Safe to run twice: an open episode is not
opened again, a notified one not emailed again, and a reviewer's digest goes out once per day."""

from datetime import datetime

from governance.alerts.digest import send_digests
from governance.alerts.services import evaluate_alerts
from governance.jobs.runner import JobIncomplete


def alerts(*, now: datetime, batch_size: int) -> dict[str, int]:
    """A run whose emails could not all be sent fails (its counts kept), so /health/ notices a mail
    server that stays down; the next run retries what was not sent."""
    counts = evaluate_alerts(now=now)
    digests, digest_errors = send_digests(now=now)
    result = {
        "alerts_opened": counts.opened,
        "alerts_resolved": counts.resolved,
        "alert_emails": counts.emails,
        "alert_email_errors": counts.email_errors,
        "digests": digests,
        "digest_errors": digest_errors,
    }
    if counts.email_errors or digest_errors:
        raise JobIncomplete(
            result,
            [f"{counts.email_errors} alert email(s) and {digest_errors} digest(s) could not be sent; the next run retries them"],
        )
    return result
