from django.apps import AppConfig


class GovernanceConfig(AppConfig):
    name = "governance"
    verbose_name = "Governance"

    def ready(self) -> None:
        # Golden recall sets: their questions are a forget artifact.
        from governance.forgetting import register_artifact
        from governance.golden.forgetting import GoldenQuestionsArtifact

        register_artifact(GoldenQuestionsArtifact(), before="external_backups")
