from django.apps import AppConfig
from django.core import checks


class GovernanceConfig(AppConfig):
    name = "governance"
    verbose_name = "Governance"

    def ready(self) -> None:
        """Each feature hooks into `memory` and into forgetting here, so neither imports the features
        built on it. The forget artifacts are registered in the order their receipts are written."""
        from governance.dedup.forgetting import DedupProposalsArtifact
        from governance.events.acknowledgements import awaiting_acknowledgement, open_webhook_receipts
        from governance.events.checks import private_networks_refused_in_production
        from governance.events.services import wake_delivery
        from governance.forget.artifacts import register_artifact
        from governance.forget.propagation import holds_completion
        from governance.forget.search_indexes import SearchIndexesArtifact
        from governance.forget.services import after_filing, during_filing
        from governance.golden.demo import seed_demo_golden_questions
        from governance.golden.forgetting import GoldenQuestionsArtifact
        from governance.golden.gate import golden_promotion_gate
        from governance.portability.disk import DiskArtifact
        from governance.portability.imports import forgotten_subjects_guard
        from governance.portability.ledger import ForgetLedgerArtifact, record_forget_request_on_commit
        from governance.retention.pruned_trace import PrunedTraceArtifact, PrunedTraceReader
        from governance.revocations.forgetting import RevocationSourcesArtifact
        from memory.asof import register_pruned_trace
        from memory.management.commands.seed_demo import register_demo_extension
        from memory.outbox.write import after_events
        from memory.portable.importer import register_import_guard
        from memory.search import register_promotion_gate

        # Dedup proposals keep a subject and reviewers' notes: among the built-in artifacts, before the cache.
        register_artifact(DedupProposalsArtifact(), before="cache")
        # Search indexes hold copies of their records' words: one forget artifact covers them all.
        register_artifact(SearchIndexesArtifact(), before="external_backups")
        # Golden recall sets: their questions are a forget artifact.
        register_artifact(GoldenQuestionsArtifact(), before="external_backups")
        # Revocations keep a revoked session id or URI prefix only while a record they revoked does.
        register_artifact(RevocationSourcesArtifact(), before="external_backups")
        # The prune job's traces of pruned records: as-of reads report them; forget has nothing to remove there.
        register_pruned_trace(PrunedTraceReader())
        register_artifact(PrunedTraceArtifact(), before="external_backups")
        # Portability: the forget ledger and forgetting on disk are artifacts; imports refuse forgotten subjects.
        register_artifact(ForgetLedgerArtifact(), before="external_backups")
        register_artifact(DiskArtifact(), before="external_backups")
        register_import_guard(forgotten_subjects_guard)
        # The forget ledger (outside the database) lists a request from its commit, so a restore re-applies it.
        after_filing(record_forget_request_on_commit)

        # Events out: new events wake the webhook delivery; a copy-keeping subscriber is a receipt on
        # every forget request, which stays open until it acknowledges.
        after_events(wake_delivery)
        during_filing(open_webhook_receipts)
        holds_completion(awaiting_acknowledgement)
        checks.register(private_networks_refused_in_production, checks.Tags.security, deploy=True)

        # `seed_demo` writes the demo tenant's ten golden questions after its memories.
        register_demo_extension(seed_demo_golden_questions)
        # A candidate search index becomes active only if it passes every tenant's golden set.
        register_promotion_gate(golden_promotion_gate, name="golden_recall")
