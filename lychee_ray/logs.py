"""Process-wide logging set-up shared by the CLI, the Ray actors and the evaluation runner.

Also the process's *quiet* switch: the CLI turns it on unless ``--verbose``; the Ray runtime
(:mod:`lychee_ray.ray.runtime`) reads it to keep Ray's own logs, progress UI and worker output off
the console. Library callers keep Ray's defaults unless they call :func:`set_quiet`.
"""

from __future__ import annotations

import logging
import os
import sys

# Libraries that log every HTTP request or their own loading at INFO.
NOISY_LOGGERS = ("httpx", "httpx2", "httpcore", "openai", "faiss.loader", "sentence_transformers", "urllib3")
# Environment of this process in quiet mode (read when Hugging Face libraries load): no model-loading
# or download progress bars. Already-set variables win.
QUIET_ENV = {"HF_HUB_DISABLE_PROGRESS_BARS": "1", "TRANSFORMERS_VERBOSITY": "error"}
# Environment of worker processes in quiet mode: the same, and no tqdm bar at all (nobody sees them).
QUIET_WORKER_ENV = {**QUIET_ENV, "TQDM_DISABLE": "1"}

_quiet = False


def set_quiet(quiet: bool) -> None:
    """Keep third-party runtimes (Ray, model loading) off the console in this process (see module docstring)."""
    global _quiet
    _quiet = quiet
    if quiet:
        for k, v in QUIET_ENV.items():
            os.environ.setdefault(k, v)


def is_quiet() -> bool:
    """Whether :func:`set_quiet` turned quiet mode on."""
    return _quiet


# A console line in the default mode: a command's output is its results, and a warning is a short
# notice (``lychee-ray: LLM backend: rules ...``); ``--verbose`` adds times, levels and loggers.
QUIET_FORMAT = "lychee-ray: %(message)s"
VERBOSE_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def configure_logging(verbose: bool = False) -> None:
    """Warnings and errors as short lines (DEBUG everywhere, with times and loggers, with ``-v``):
    what a command logs at INFO (models loaded, stores reused) is for ``--verbose``."""
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.WARNING,
        format=VERBOSE_FORMAT if verbose else QUIET_FORMAT,
        stream=sys.stderr,
    )
    if not verbose:
        for name in NOISY_LOGGERS:
            logging.getLogger(name).setLevel(logging.WARNING)
