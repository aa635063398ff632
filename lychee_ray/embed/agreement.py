"""Does the int8 query model agree with fp32 on this machine? Checked once per CPU and model file.

Why: int8 kernels differ by CPU (without int8 dot-product instructions ONNX Runtime's u8s8 path can
saturate), so the quantized model proves itself on the machine that runs it. The check is
deterministic for a given model file, CPU and ONNX Runtime version, so its verdict (the lowest
cosine) is kept next to the int8 file: later loads skip the fp32 model they would otherwise open
only for the check.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import platform
import tempfile
from pathlib import Path
from typing import Any
from collections.abc import Callable

import numpy as np

from lychee_ray.embed.base import normalise_rows

log = logging.getLogger(__name__)

# questions of assorted length and content: the quantized model is checked against fp32 on them at load
PROBE_TEXTS = (
    "When did Caroline go to the LGBTQ support group?",
    "What did Melanie paint?",
    "How many times has the user mentioned running a marathon since March 2023?",
    "Which restaurant did I say had the best ramen, and who was I with?",
    "Wo habe ich meinen Urlaub im Sommer verbracht?",
    "What is my dog's name?",
)
# /proc/cpuinfo fields that decide which int8 kernels ONNX Runtime picks
_CPU_FIELDS = ("vendor_id", "model name", "flags", "Features", "CPU implementer", "CPU part")


def quantized_agreement(quantized: Any, reference: Any, batch_size: int) -> float:
    """Lowest cosine between two encoders' vectors of :data:`PROBE_TEXTS` (1.0 = identical)."""
    a = normalise_rows(np.asarray(quantized.encode(list(PROBE_TEXTS), batch_size), dtype=np.float32))
    b = normalise_rows(np.asarray(reference.encode(list(PROBE_TEXTS), batch_size), dtype=np.float32))
    return float((a * b).sum(axis=1).min())


def cpu_identity() -> str:
    """A short hash of what selects the CPU kernels: the CPU's model and instruction-set flags, the
    architecture and the ONNX Runtime version."""
    parts = [platform.machine()]
    try:
        import onnxruntime

        parts.append(onnxruntime.__version__)
    except ImportError:
        pass
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            seen: set[str] = set()
            for line in f:
                name, _, value = line.partition(":")
                name = name.strip()
                if name in _CPU_FIELDS and name not in seen:  # the first processor describes them all
                    seen.add(name)
                    parts.append(f"{name}={value.strip()}")
    except OSError:
        parts.append(platform.processor())
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]


def _verdict_path(model_path: Path) -> Path:
    return model_path.with_name(f"{model_path.stem}.agreement.json")


def _read_verdicts(path: Path) -> dict[str, float]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {k: float(v) for k, v in data.items() if isinstance(v, (int, float))} if isinstance(data, dict) else {}


def _write_verdict(path: Path, cpu: str, worst: float) -> None:
    """Add this CPU's verdict (atomic replace: concurrent loaders race safely; a lost write is redone later)."""
    verdicts = _read_verdicts(path)
    verdicts[cpu] = worst
    try:
        fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(verdicts, f, sort_keys=True)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except OSError as e:  # a read-only cache only costs the next load the check
        log.debug("could not keep the int8 agreement verdict in %s: %s", path, e)


def checked_agreement(quantized: Any, model_path: Path, reference: Callable[[], Any], batch_size: int) -> float:
    """:func:`quantized_agreement` of ``quantized`` (run from ``model_path``) against the encoder
    ``reference()`` builds, or this CPU's verdict kept from an earlier load."""
    path, cpu = _verdict_path(model_path), cpu_identity()
    kept = _read_verdicts(path).get(cpu)
    if kept is not None:
        return kept
    worst = quantized_agreement(quantized, reference(), batch_size)
    _write_verdict(path, cpu, worst)
    return worst


__all__ = ["PROBE_TEXTS", "checked_agreement", "cpu_identity", "quantized_agreement"]
