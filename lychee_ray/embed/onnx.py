"""ONNX Runtime inference for a local sentence-transformers model (``embedding.runtime: onnx``).

Why: on CPU, PyTorch eager spends most of a short text's embedding time in per-operator overhead;
ONNX Runtime runs the same weights as one fused graph, about 3× less CPU for a query-length text
(``benchmarks/serve_load.py`` reports the per-request CPU). The vectors are the same to ~1e-7
(a test asserts it), so stores built with either runtime are interchangeable.

The model is exported once from its local weights (``torch.onnx.export``; nothing is downloaded)
into ``cache_dir``, keyed by the weights' path, size and mtime and the torch/onnxruntime versions
(:func:`weights_key`, computable without torch: :mod:`lychee_ray.embed.onnx_cache` runs a cached
export with neither torch nor sentence-transformers), and written atomically so concurrent
processes (Ray actors, Serve replicas) can race safely.
Only the Transformer → mean Pooling → (Normalize) pipeline of sentence-transformers is exported;
anything else reports why and the caller keeps the torch runtime.

``quantize="int8"`` runs a copy of the exported model whose MatMul weights are int8, one scale per
output channel (ONNX Runtime dynamic quantization; activations are quantized on the fly). On a CPU
with int8 dot-product instructions it needs less CPU per text; the vectors are close to fp32's but
not identical (docs/serving.md, "Switches"), which is why only query embeddings use it by default
(``embedding.query_quantization``) and stored vectors stay fp32.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import tempfile
import threading
from pathlib import Path
from typing import Any
from collections.abc import Callable, Iterator, Mapping, Sequence

import numpy as np

log = logging.getLogger(__name__)

_EXPORT_LOCK = threading.Lock()


def default_cache_dir() -> Path:
    """``$LYCHEE_CACHE_DIR/onnx`` or ``~/.cache/lychee_ray/onnx``."""
    base = os.environ.get("LYCHEE_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "lychee_ray")
    return Path(base) / "onnx"


def unsupported_reason(model: Any) -> str | None:
    """Why ``model`` (a SentenceTransformer) cannot run on ONNX here, or None when it can."""
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        return "onnxruntime is not installed"
    mods = list(model)
    names = [type(m).__name__ for m in mods]
    if not names or names[0] != "Transformer" or names[1:2] != ["Pooling"] or any(n != "Normalize" for n in names[2:]):
        return f"only Transformer → Pooling → Normalize pipelines are exported, this one is {names}"
    mode = getattr(mods[1], "pooling_mode", None)
    if mode is None and getattr(mods[1], "pooling_mode_mean_tokens", False):
        mode = "mean"
    if mode != "mean":
        return f"only mean pooling is exported, this model pools with {mode!r}"
    if not hasattr(mods[0], "auto_model"):
        return "the Transformer module exposes no auto_model"
    return None


def weights_key(arch: str, name_or_path: str, max_seq_length: int, torch_version: str, ort_version: str) -> str | None:
    """Identity of a model's weights and of the export toolchain (the ONNX cache file's key), from
    plain values, so the torch-free loader (:mod:`lychee_ray.embed.onnx_cache`) finds the file the
    export wrote. None when no weight files lie under ``name_or_path``."""
    parts = [arch, name_or_path, torch_version, ort_version, str(max_seq_length)]
    root = Path(name_or_path)
    files = sorted(root.glob("*.safetensors")) + sorted(root.glob("*.bin")) if root.is_dir() else []
    for f in files:
        st = f.stat()
        parts.append(f"{f.name}:{st.st_size}:{int(st.st_mtime)}")
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16] if files else None


def _weights_key(model: Any) -> str:
    """:func:`weights_key` of a loaded SentenceTransformer (its parameters hashed when no weight
    files are found on disk)."""
    import onnxruntime
    import torch

    hf = model[0].auto_model
    name = str(getattr(hf.config, "_name_or_path", ""))
    key = weights_key(type(hf).__name__, name, model[0].max_seq_length, torch.__version__, onnxruntime.__version__)
    if key is not None:
        return key
    h = hashlib.sha256()
    for t in hf.state_dict().values():
        h.update(t.detach().cpu().numpy().tobytes())
    parts = [type(hf).__name__, name, torch.__version__, onnxruntime.__version__, str(model[0].max_seq_length),
             h.hexdigest()]
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]


def onnx_paths(cache_dir: str | Path | None, arch: str, key: str, quantize: str) -> tuple[Path, Path]:
    """The fp32 export's path and the path of the model to run (the int8 copy's for ``quantize="int8"``);
    the file name carries the quantization scheme, so a change of settings gets a new file."""
    if quantize not in ("none", "int8"):
        raise ValueError(f"unknown ONNX quantization {quantize!r} (none | int8)")
    fp32 = Path(cache_dir or default_cache_dir()) / f"{arch}-{key}.onnx"
    return fp32, (fp32 if quantize == "none" else fp32.with_name(f"{fp32.stem}-{INT8_SCHEME}.onnx"))


def _export(model: Any, path: Path, input_names: list[str]) -> None:
    import torch

    hf = model[0].auto_model

    class _MeanPooled(torch.nn.Module):
        """Transformer + attention-masked mean pooling + L2 normalisation, as sentence-transformers does."""

        def __init__(self, m: Any) -> None:
            super().__init__()
            self.m = m

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any = None) -> Any:
            kw = {"input_ids": input_ids, "attention_mask": attention_mask}
            if token_type_ids is not None:
                kw["token_type_ids"] = token_type_ids
            out = self.m(**kw).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(out.dtype)
            pooled = (out * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(pooled, p=2.0, dim=-1)

    wrapper = _MeanPooled(hf).eval()
    sample = model.preprocess(["an example sentence for the export", "short"])
    args = tuple(sample[n] for n in input_names)
    axes = {n: {0: "batch", 1: "tokens"} for n in input_names}
    axes["embedding"] = {0: "batch"}
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        with torch.no_grad():
            # the TorchScript exporter: deterministic and needs no extra packages beyond onnx
            torch.onnx.export(wrapper, args, tmp, input_names=input_names, output_names=["embedding"],
                              dynamic_axes=axes, opset_version=17, dynamo=False)
        os.chmod(tmp, 0o644)  # mkstemp makes it private; it is a cache other processes read
        os.replace(tmp, path)  # atomic: a concurrent reader sees the old file or the whole new one
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


# packages whose log records below ERROR are dropped while the model is prepared: ONNX Runtime's
# quantizer logs every tensor it skips through the root logger (~40 INFO lines and an advice WARNING)
_NOISY_PACKAGES = ("onnxruntime", "onnx", "torch")


class _DropThirdParty(logging.Filter):
    """Drops records below ERROR emitted by code of :data:`_NOISY_PACKAGES` (by the emitting file)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.ERROR:
            return True
        path = record.pathname.replace(os.sep, "/")
        return not any(f"/{p}/" in path for p in _NOISY_PACKAGES) and not record.name.startswith(_NOISY_PACKAGES)


@contextlib.contextmanager
def quiet_third_party_logs() -> Iterator[None]:
    """Mute the export and quantization tools' own log records (errors still show) for the block:
    on the root logger (the quantizer logs through ``logging.info``) and on every root handler
    (records of named loggers reach those without passing the root logger's filters)."""
    root = logging.getLogger()
    f = _DropThirdParty()
    targets: list[Any] = [root, *root.handlers]
    for t in targets:
        t.addFilter(f)
    try:
        yield
    finally:
        for t in targets:
            t.removeFilter(f)


# per-channel signed int8 weights of MatMul nodes only (see _quantize_int8)
INT8_SCHEME = "int8pc-matmul"


def _quantize_int8(src: Path, path: Path) -> None:
    """Per-channel signed int8 MatMul weights of ``src`` into ``path`` (atomic, like the export)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        # per channel: one scale per output column keeps the sentence vectors closer to fp32 than one
        # per-tensor scale does (docs/serving.md); MatMul only: the embedding tables stay fp32 lookups
        quantize_dynamic(str(src), tmp, per_channel=True, weight_type=QuantType.QInt8,
                         op_types_to_quantize=["MatMul"])
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


# Token arrays of a batch of texts, by ONNX input name (int64, padded to the batch's longest text).
Tokenize = Callable[[list[str]], Mapping[str, np.ndarray]]


def open_session(path: Path, threads: int, spinning: bool = True) -> Any:
    """An ONNX Runtime CPU session of the model at ``path`` (``threads`` 0 = ORT's default);
    ``spinning`` False: idle worker threads sleep instead of spin-waiting (``embedding.allow_spinning``)."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    if threads > 0:
        so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    if not spinning:
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.log_severity_level = 3
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


class OnnxEncoder:
    """Runs an exported mean-pooled sentence model (fp32 or int8) on texts tokenized by ``tokenize``."""

    def __init__(self, path: Path, tokenize: Tokenize, quantize: str = "none", threads: int = 0,
                 spinning: bool = True, length_sort_window: int = 1024) -> None:
        """``length_sort_window``: texts tokenized together and then batched by token length (see
        :meth:`encode`; ``embedding.length_sort_window``)."""
        self.path = path
        self.quantize = quantize
        self._tokenize = tokenize
        self._session = open_session(path, threads, spinning)
        self.input_names = [i.name for i in self._session.get_inputs()]
        self.length_sort_window = max(1, length_sort_window)
        self.padded_tokens = 0  # tokens of every batch run, padding included (benchmarks, tests)

    def _run(self, feats: Mapping[str, np.ndarray]) -> np.ndarray:
        feed = {n: np.asarray(feats[n]).astype(np.int64, copy=False) for n in self.input_names}
        self.padded_tokens += int(np.asarray(feats["attention_mask"]).size)
        return np.asarray(self._session.run(None, feed)[0])

    def encode(self, texts: Sequence[str], batch_size: int) -> np.ndarray:
        """Vectors of ``texts`` (mean-pooled, not normalised), in order.

        Batches hold texts of the same token length, so little of a batch is padding. Character
        length is a poor proxy for it (JSON, numbers and ids in agent logs take far more tokens per
        character than prose: sorted by characters, 22 % of the tokens run on agent logs were padding,
        and turn embedding cost 1.2x the CPU). So the texts, roughly ordered by characters, are tokenized
        ``length_sort_window`` at a time, re-sorted by their token counts, and each batch takes its
        rows of the tokenizer's output cut to its longest text: with right padding that is exactly
        what tokenizing the batch alone gives. A tokenizer that pads on the left is tokenized per batch.

        The int8 model runs one text at a time: dynamic quantization scales activations per run, so in a
        batch a text's vector would depend on its companions and their padding (and so would search results)."""
        if self.quantize != "none":
            batch_size = 1
        order = np.argsort([-len(t) for t in texts], kind="stable")
        out: list[np.ndarray] = [np.empty(0)] * len(texts)
        if batch_size == 1:  # no padding to avoid: one tokenizer call per text
            for j in order:
                out[j] = self._run(self._tokenize([texts[j]]))[0]
            return np.asarray(out, dtype=np.float32)
        for w in range(0, len(order), self.length_sort_window):
            window = order[w: w + self.length_sort_window]
            feats = {n: np.asarray(a) for n, a in self._tokenize([texts[j] for j in window]).items()}
            mask = feats["attention_mask"]
            lengths = mask.sum(axis=1)
            if not np.array_equal(mask != 0, np.arange(mask.shape[1])[None, :] < lengths[:, None]):
                self._encode_tokenizing_batches(texts, window, batch_size, out)  # not right-padded
                continue
            by_tokens = np.argsort(-lengths, kind="stable")
            for i in range(0, len(by_tokens), batch_size):
                rows = by_tokens[i: i + batch_size]
                width = int(lengths[rows[0]])  # the longest of the batch: sorted by tokens
                vecs = self._run({n: a[rows, :width] for n, a in feats.items()})
                for r, v in zip(rows, vecs, strict=False):
                    out[window[r]] = v
        return np.asarray(out, dtype=np.float32)

    def _encode_tokenizing_batches(self, texts: Sequence[str], idx: np.ndarray, batch_size: int,
                                   out: list[np.ndarray]) -> None:
        """Vectors of ``texts[idx]`` into ``out``, tokenizing each batch of ``batch_size`` alone."""
        for i in range(0, len(idx), batch_size):
            part = idx[i: i + batch_size]
            for j, v in zip(part, self._run(self._tokenize([texts[j] for j in part])), strict=False):
                out[j] = v


class OnnxSentenceEncoder(OnnxEncoder):
    """An :class:`OnnxEncoder` of a loaded sentence-transformers model, exported (and quantized) into
    the cache on first use; tokenized by the model itself."""

    def __init__(self, model: Any, cache_dir: str | Path | None = None, threads: int = 0,
                 quantize: str = "none", spinning: bool = True, length_sort_window: int = 1024) -> None:
        import warnings

        reason = unsupported_reason(model)
        if reason:
            raise ValueError(reason)
        probe = model.preprocess(["probe"])
        input_names = [n for n in ("input_ids", "attention_mask", "token_type_ids") if n in probe]
        fp32, path = onnx_paths(cache_dir, type(model[0].auto_model).__name__, _weights_key(model), quantize)
        with _EXPORT_LOCK:
            steps = (["ONNX export"] if not fp32.exists() else []) + (
                [f"{quantize} quantisation"] if not path.exists() else [])
            if steps:  # one line says what the one-time wait is; the tools' own chatter is muted
                log.info("preparing the embedding model once (%s, a few seconds) into %s; later runs load it from there",
                         " and ".join(steps), path.parent)
            # (the exporter's deprecation warnings and the quantizer's ~40 INFO lines are not actionable)
            with warnings.catch_warnings(), quiet_third_party_logs():
                warnings.simplefilter("ignore")
                if not fp32.exists():
                    _export(model, fp32, input_names)
                if not path.exists():
                    _quantize_int8(fp32, path)

        def tokenize(texts: list[str]) -> dict[str, np.ndarray]:
            feats = model.preprocess(texts)
            return {n: feats[n].cpu().numpy() for n in input_names}

        super().__init__(path, tokenize, quantize, threads, spinning, length_sort_window)


__all__ = ["INT8_SCHEME", "OnnxEncoder", "OnnxSentenceEncoder", "Tokenize", "default_cache_dir", "onnx_paths",
           "open_session", "quiet_third_party_logs", "unsupported_reason", "weights_key"]
