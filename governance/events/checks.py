"""`manage.py check --deploy`: webhooks reaching private networks is for development only."""

from typing import Any

from django.conf import settings
from django.core import checks


def private_networks_refused_in_production(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    if settings.WEBHOOKS_ALLOW_PRIVATE_NETWORKS:
        return [
            checks.Error(
                "WEBHOOKS_ALLOW_PRIVATE_NETWORKS is on: webhook URLs may reach loopback and private addresses.",
                hint="Unset it in production; it is for development and tests.",
                id="governance.E001",
            )
        ]
    return []
