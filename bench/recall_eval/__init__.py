"""Our own conversational recall evaluation set and the harness that runs it through the API
(docs/recall-eval.md)."""
