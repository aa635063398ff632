"""Where ``lychee-ray build`` runs when the command does not say (no ``--local``, no ``--ray``).

Ray's start-up (the runtime, then an actor pool per stage, each embedding stage loading the model)
costs tens of seconds on a small machine; a build that has nothing to do, or only a few small
conversations, is done in-process before Ray would be ready. So, without ``RAY_ADDRESS`` (a cluster
is already running: nothing to start) and for input on local disk, the driver reads the input once
and asks each conversation's commit marker whether it needs building — the decide step's own
skip test (``built_as_is``), without its claims — and runs in-process when nothing needs it, or when at most
``build.local_max_conversations`` conversations with at most ``build.local_max_turns`` turns do.
Reading stops at the first conversation past those bounds: a large build pays one partial read.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from lychee_ray.config import LycheeConfig, ray_address
from lychee_ray.ingest.pipeline import planned_fingerprint
from lychee_ray.ingest.decide import built_as_is
from lychee_ray.io.adapters import read_input
from lychee_ray.io.adapters.base import is_uri
from lychee_ray.io.store import StoreReader, StoreLayout
from lychee_ray.names import LLMBackend, LOCAL_RUNNER, RAY_RUNNER, Runner


@dataclass(frozen=True)
class RunnerChoice:
    """The runner, and why (``reason``: a few words for the command's notice)."""

    runner: Runner
    reason: str = ""
    to_build: int = 0  # conversations that need building (counted up to the bounds)
    turns: int = 0  # their turns


def choose_runner(cfg: LycheeConfig, fmt: str, input_path: str | Path, out: str | Path, backend: LLMBackend,
                  retry_failed: bool = False) -> RunnerChoice:
    """In-process for nothing to build or a small build (see the module docstring), else Ray."""
    if ray_address() is not None:
        return RunnerChoice(RAY_RUNNER, "RAY_ADDRESS is set")
    if is_uri(input_path) or is_uri(out):
        return RunnerChoice(RAY_RUNNER, "input or store on object storage")
    bc = cfg.build
    layout = StoreLayout(out, cfg.store)
    markers = StoreReader(layout).markers if layout.is_store() else {}
    fingerprint = planned_fingerprint(cfg, backend)
    seen: set[str] = set()
    to_build = turns = 0
    for item in read_input(fmt, input_path):
        conv = item.conversation
        if conv is not None and conv.conversation_id in seen:
            continue  # a repeated id: skipped with a warning, whichever runner
        if conv is not None:
            seen.add(conv.conversation_id)
            if built_as_is(conv, markers.get(conv.conversation_id), fingerprint, retry_failed):
                continue  # skipped by the decide step
        to_build += 1
        turns += conv.num_turns if conv is not None else 0
        if to_build > bc.local_max_conversations or turns > bc.local_max_turns:
            return RunnerChoice(RAY_RUNNER, f"more than {bc.local_max_conversations} conversation(s) or "
                                            f"{bc.local_max_turns:,} turn(s) to build", to_build, turns)
    if not to_build:
        return RunnerChoice(LOCAL_RUNNER, "nothing to build")
    return RunnerChoice(LOCAL_RUNNER, f"small build: {to_build} conversation(s), {turns} turn(s)", to_build, turns)


__all__ = ["Runner", "RunnerChoice", "choose_runner"]
