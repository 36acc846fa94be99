"""Authority classes: whose authority a claim carries. A leaf module (it imports only Django), so
that models outside `memory.models` (the registered sources of `memory.provenance.models`, which
`memory.models` imports to register them) can name the choices without an import cycle.
`memory.models` re-exports it; import it from there."""

from django.db import models


class Authority(models.TextChoices):
    OPERATOR = "operator"
    USER = "user"
    THIRD_PARTY = "third_party"
    AGENT = "agent"
