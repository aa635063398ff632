"""ONNX Runtime inference for a local sentence-transformers model (``embedding.runtime: onnx``).

Why: on CPU, PyTorch eager spends most of a short text's embedding time in per-operator overhead;
ONNX Runtime runs the same weights as one fused graph, about 3× less CPU for a query-length text
(``benchmarks/serve_load.py`` reports the per-request CPU). The vectors are the same to ~1e-7
(a test asserts it), so stores built with either runtime are interchangeable.

The model is exported once from its local weights (``torch.onnx.export``; nothing is downloaded)
into ``cache_dir``, keyed by the weights' path, size and mtime and the torch/onnxruntime versions,
and written atomically so concurrent processes (Ray actors, Serve replicas) can race safely.
Only the Transformer → mean Pooling → (Normalize) pipeline of sentence-transformers is exported;
anything else reports why and the caller keeps the torch runtime.

``quantize="int8"`` runs a copy of the exported model whose MatMul weights are int8, one scale per
output channel (ONNX Runtime dynamic quantization; activations are quantized on the fly). On a CPU
with int8 dot-product instructions it needs ~2.6x less CPU per query-length text; the vectors are
not identical (cosine to fp32: median 0.995, min 0.986 over the 1,540 LoCoMo questions), which is why only query embeddings
use it by default (``embedding.query_quantization``) and stored vectors stay fp32.
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
import threading
from pathlib import Path
from typing import Any, Sequence

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


def _weights_key(model: Any) -> str:
    """Identity of the model's weights and of the export toolchain."""
    import onnxruntime
    import torch

    hf = model[0].auto_model
    parts = [type(hf).__name__, str(getattr(hf.config, "_name_or_path", "")), torch.__version__, onnxruntime.__version__,
             str(model[0].max_seq_length)]
    root = Path(str(getattr(hf.config, "_name_or_path", "")))
    files = sorted(root.glob("*.safetensors")) + sorted(root.glob("*.bin")) if root.is_dir() else []
    for f in files:
        st = f.stat()
        parts.append(f"{f.name}:{st.st_size}:{int(st.st_mtime)}")
    if not files:  # weights not found on disk: hash the parameters themselves
        h = hashlib.sha256()
        for t in hf.state_dict().values():
            h.update(t.detach().cpu().numpy().tobytes())
        parts.append(h.hexdigest())
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]


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


# per-channel signed int8 weights of MatMul nodes only (see _quantize_int8)
INT8_SCHEME = "int8pc-matmul"


def _quantize_int8(src: Path, path: Path) -> None:
    """Per-channel signed int8 MatMul weights of ``src`` into ``path`` (atomic, like the export)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        # per channel: one scale per output column keeps the sentence vectors at cosine 0.995 (median)
        # to fp32 (a single per-tensor uint8 scale: 0.986); MatMul only: the embedding tables stay fp32 lookups
        quantize_dynamic(str(src), tmp, per_channel=True, weight_type=QuantType.QInt8,
                         op_types_to_quantize=["MatMul"])
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


class OnnxSentenceEncoder:
    """Runs a mean-pooled sentence-transformers model with ONNX Runtime (CPU), fp32 or int8."""

    def __init__(self, model: Any, cache_dir: str | Path | None = None, threads: int = 0,
                 quantize: str = "none") -> None:
        import warnings

        import onnxruntime as ort

        reason = unsupported_reason(model)
        if reason:
            raise ValueError(reason)
        self._st = model
        probe = model.preprocess(["probe"])
        self.input_names = [n for n in ("input_ids", "attention_mask", "token_type_ids") if n in probe]
        if quantize not in ("none", "int8"):
            raise ValueError(f"unknown ONNX quantization {quantize!r} (none | int8)")
        self.quantize = quantize
        key = _weights_key(model)
        fp32 = Path(cache_dir or default_cache_dir()) / f"{type(model[0].auto_model).__name__}-{key}.onnx"
        # the file name carries the scheme: a change of quantization settings gets a new file
        self.path = fp32 if quantize == "none" else fp32.with_name(f"{fp32.stem}-{INT8_SCHEME}.onnx")
        with _EXPORT_LOCK:
            if not fp32.exists():
                log.info("exporting the embedding model to ONNX: %s", fp32)
                with warnings.catch_warnings():  # the exporter's deprecation chatter is not actionable
                    warnings.simplefilter("ignore")
                    _export(model, fp32, self.input_names)
            if not self.path.exists():
                log.info("quantizing the embedding model (%s): %s", quantize, self.path)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    _quantize_int8(fp32, self.path)
        so = ort.SessionOptions()
        if threads > 0:
            so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        so.log_severity_level = 3
        self._session = ort.InferenceSession(str(self.path), so, providers=["CPUExecutionProvider"])

    def encode(self, texts: Sequence[str], batch_size: int) -> np.ndarray:
        """Unit vectors of ``texts``; batches hold texts of similar length (less padding). The int8
        model runs one text at a time: dynamic quantization scales activations per run, so in a batch
        a text's vector would depend on its companions and their padding (and so would search results)."""
        if self.quantize != "none":
            batch_size = 1
        order = np.argsort([-len(t) for t in texts], kind="stable")
        out: list[np.ndarray] = [np.empty(0)] * len(texts)
        for i in range(0, len(order), batch_size):
            idx = order[i: i + batch_size]
            feats = self._st.preprocess([texts[j] for j in idx])
            feed = {n: feats[n].cpu().numpy().astype(np.int64, copy=False) for n in self.input_names}
            vecs = self._session.run(None, feed)[0]
            for j, v in zip(idx, vecs):
                out[j] = v
        return np.asarray(out, dtype=np.float32)


__all__ = ["INT8_SCHEME", "OnnxSentenceEncoder", "default_cache_dir", "unsupported_reason"]
