"""The semantic model as a process runs it (`memory.search.encoder`): its graph exported once from
the package and checked, run through ONNX Runtime with the package's tokenizer, giving the
embeddings sentence-transformers gives, in a process that never imports torch."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from memory.search import encoder, semantic
from tests.processes import ROOT, database_url_for_subprocesses

TEXTS = [
    "how does acme want to be contacted",
    "Prefers email over phone for routine updates.",
    "",
    "   ",
    "Maya: I've been working as a veterinary nurse at the animal clinic on Elm Street, mostly dogs.",
    "Ünïcödé, emoji 🙂, 中文 and العربية, with punctuation!?",
    "A turn well past the model's length: " + " ".join(f"word{i}" for i in range(400)),
    *(f"Speaker {i}: short turn number {i}" + " and more" * (i % 7) for i in range(70)),  # more than a batch, lengths mixed
]


def test_the_model_gives_the_embeddings_sentence_transformers_gives():
    from sentence_transformers import SentenceTransformer

    reference = SentenceTransformer(str(encoder.model_dir()), device="cpu")
    expected = reference.encode(TEXTS, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)
    found = semantic.embed(TEXTS)
    assert found.dtype == np.float32 and found.shape == (len(TEXTS), semantic.DIMS)
    assert float(np.abs(found - expected).max()) < 1e-5  # every text in its own row, truncated and padded alike
    assert np.allclose(np.linalg.norm(found, axis=1), 1.0, atol=1e-5)
    alone = semantic.embed([TEXTS[6]])[0]  # in a batch or alone, the same vector
    assert float(np.abs(alone - found[6]).max()) < 1e-5


SERVING = """
import sys
import django
django.setup()
from memory.search import semantic
assert semantic.warm_up()
vector = semantic.embed(["how does acme want to be contacted"])[0]
print("embedded", vector.shape[0], "torch" in sys.modules, "sentence_transformers" in sys.modules, flush=True)
"""


def test_a_process_that_serves_runs_the_model_without_torch(tmp_path):
    env = {**os.environ, "APP_VAR_DIR": str(tmp_path), "DATABASE_URL": database_url_for_subprocesses()}
    env.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(SERVING)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"embedded {semantic.DIMS} False False" in done.stdout, done.stdout


def test_a_graph_that_does_not_load_is_exported_again_and_checked(tmp_path):
    path = tmp_path / "models" / "model.onnx"
    path.parent.mkdir()
    path.write_bytes(b"half a file")  # not a graph ONNX Runtime can load
    (path.parent / "model.onnx.x1y2.part").write_bytes(b"an export killed mid-way")
    loaded = encoder.load(path)
    assert path.stat().st_size > 10_000_000 and path.stat().st_mode & 0o444 == 0o444
    assert sorted(p.name for p in path.parent.iterdir()) == ["model.onnx", "model.onnx.lock"]  # nothing half-written left
    found = loaded(["how does acme want to be contacted"])
    assert float(np.abs(found[0] - semantic.embed(["how does acme want to be contacted"])[0]).max()) < 1e-5


@pytest.mark.django_db
def test_a_graph_that_cannot_be_written_leaves_recall_lexical_and_says_why(tmp_path, settings, monkeypatch):
    (tmp_path / "a-file").write_text("")
    settings.SEMANTIC_MODEL_DIR = str(tmp_path / "a-file" / "models")  # no directory can be made there
    for name, value in (("error", None), ("encoder", None), ("ran", False)):  # a process that has not loaded it
        monkeypatch.setattr(semantic._model, name, value)
    monkeypatch.setattr(semantic.gc, "freeze", lambda: None)  # not this test process's objects
    assert semantic.load_model() is False
    assert semantic.unavailable_reason() is not None and "failed to load" in semantic.unavailable_reason()
    # a process forked from this one (a web worker, a pool process) does not try the export again
    settings.SEMANTIC_MODEL_DIR = str(tmp_path / "models")
    assert semantic.warm_up() is False
    assert not (tmp_path / "models").exists()
