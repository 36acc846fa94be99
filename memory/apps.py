from django.apps import AppConfig


class MemoryConfig(AppConfig):
    name = "memory"
    verbose_name = "Memory"

    def ready(self) -> None:
        from simple_history.signals import pre_create_historical_record

        pre_create_historical_record.connect(_copy_actor_to_history, dispatch_uid="memory-history-actor")

        # Search indexes follow the records through triggers, which a migration may drop (SQLite).
        from django.db.models.signals import post_migrate

        post_migrate.connect(_repair_search_indexes, sender=self, dispatch_uid="memory-search-repair")


def _copy_actor_to_history(sender, instance, history_instance, **kwargs) -> None:
    # Audit columns are a side concern, so a signal is the right tool here.
    from memory.models import HistoryActor

    if isinstance(history_instance, HistoryActor):
        history_instance.history_actor = getattr(instance, "_history_actor", "") or history_instance.history_actor or ""
        history_instance.history_note = getattr(instance, "_history_note", "") or history_instance.history_note or ""


def _repair_search_indexes(sender, using, **kwargs) -> None:
    from django.db import connections

    from memory.search.build import repair_storage

    if "memory_searchindex" in connections[using].introspection.table_names():
        repair_storage()
