"""Where an embedding stage runs: the torch model on CUDA when the stage was given GPUs and one is
visible, else the configured CPU model (a Ray node can offer a GPU resource without a CUDA device:
a logical GPU in tests, a driver problem in production; the job must still finish)."""

from __future__ import annotations

import logging

from lychee_ray.config import EmbeddingConfig
from lychee_ray.names import LOCAL_EMBEDDING

log = logging.getLogger(__name__)


def cuda_available() -> bool:
    """True when torch is installed and sees a CUDA device (imports torch: only GPU stages call it)."""
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def stage_embedding_config(cfg: EmbeddingConfig, num_gpus: float) -> tuple[EmbeddingConfig, str]:
    """The embedding config of a stage given ``num_gpus`` GPUs, and the device it will use
    (``cuda``, or ``cpu`` with the reason it is not on the GPU)."""
    if num_gpus <= 0:
        return cfg, cfg.device
    if cfg.backend != LOCAL_EMBEDDING:
        log.warning("embedding stage given %s GPU(s), but embedding.backend=%s embeds remotely", num_gpus, cfg.backend)
        return cfg, f"{cfg.device} (embedding.backend={cfg.backend}: remote)"
    if not cuda_available():
        log.warning("embedding stage given %s GPU(s), but no CUDA device is visible here; embedding on the CPU", num_gpus)
        return cfg, "cpu (GPU requested, no CUDA device visible)"
    return cfg.model_copy(update={"device": "cuda", "runtime": "torch"}), "cuda"


__all__ = ["cuda_available", "stage_embedding_config"]
