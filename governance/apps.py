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
