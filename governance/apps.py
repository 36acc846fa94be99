from django.apps import AppConfig


class GovernanceConfig(AppConfig):
    name = "governance"
    verbose_name = "Governance"

    def ready(self) -> None:
        # Search indexes hold copies of their records' words: one forget artifact covers them all.
        from governance.forgetting import register_artifact as _register_artifact
        from governance.search_artifacts import SearchIndexesArtifact

        _register_artifact(SearchIndexesArtifact(), before="external_backups")

        # Golden recall sets: their questions are a forget artifact.
        from governance.forgetting import register_artifact
        from governance.golden.forgetting import GoldenQuestionsArtifact

        register_artifact(GoldenQuestionsArtifact(), before="external_backups")

        # ... and `seed_demo` writes the demo tenant's ten golden questions after its memories.
        from governance.golden.demo import seed_demo_golden_questions
        from memory.management.commands.seed_demo import register_demo_extension

        register_demo_extension(seed_demo_golden_questions)

        # A candidate search index becomes active only if it passes every tenant's golden set.
        from governance.golden.gate import golden_promotion_gate
        from memory.search import register_promotion_gate

        register_promotion_gate(golden_promotion_gate, name="golden_recall")

        # Revocations keep a revoked session id or URI prefix only while a record they revoked does.
        from governance.forgetting import register_artifact as register_revocation_artifact
        from governance.revocations.forgetting import RevocationSourcesArtifact

        register_revocation_artifact(RevocationSourcesArtifact(), before="external_backups")

        # Portability: the forget ledger and forgetting on disk are artifacts; imports refuse forgotten subjects.
        from governance.forgetting import register_artifact as register_forget_artifact
        from governance.portability.disk import DiskArtifact
        from governance.portability.imports import forgotten_subjects_guard
        from governance.portability.ledger import ForgetLedgerArtifact

        # The prune job's traces of pruned records: as-of reads report them; forget has nothing to remove there.
        from governance.pruned_trace import PrunedTraceArtifact, PrunedTraceReader
        from memory.asof import register_pruned_trace
        from memory.portable.importer import register_import_guard

        register_pruned_trace(PrunedTraceReader())
        register_forget_artifact(PrunedTraceArtifact(), before="external_backups")
        register_forget_artifact(ForgetLedgerArtifact(), before="external_backups")
        register_forget_artifact(DiskArtifact(), before="external_backups")
        register_import_guard(forgotten_subjects_guard)
