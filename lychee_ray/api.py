"""The library's entry points: build a memory store (conversations or input files → a store),
evaluate, and the store object with its append types and errors.

This module sits on top of the stages like the CLI does: it chooses the runner, the local one
(:mod:`lychee_ray.ingest.runner`, no Ray) or the Ray Data job (:mod:`lychee_ray.ray.build_job`,
imported only when asked for). :class:`~lychee_ray.memory.MemoryStore` queries a store and appends
to it; an append takes :class:`AppendTurn` s, returns an :class:`AppendResult`, and refuses with one
of the typed errors (``kind`` says which; :class:`IncrementError` is their base).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any
from collections.abc import Iterable

from lychee_ray.ingest.increment.errors import (
    AppendErrorKind,
    ConfigMismatch,
    ConversationBusy,
    HistoryConflict,
    IncrementError,
    InvalidTurns,
    OwnerMismatch,
    UnknownConversationError,
    UserIdRequired,
)
from lychee_ray.ingest.increment.models import AppendResult, AppendTurn
from lychee_ray.ingest.runner import BuildSummary, run_local_build_items
from lychee_ray.config import LycheeConfig, load_config
from lychee_ray.core.conversation import Conversation
from lychee_ray.io.adapters import AdapterItem, read_input, read_objects, survey_input
from lychee_ray.io.store.locks import ConversationDeleting
from lychee_ray.memory import MemoryStore
from lychee_ray.names import LLMBackend, LOCAL_RUNNER, OnConflict, RAY_RUNNER, RUNNERS, Runner

if TYPE_CHECKING:  # the eval package is loaded only when an evaluation runs (its metrics load nltk: seconds)
    from lychee_ray.eval.runners.run import EvalOptions

Conversations = Iterable[Conversation | dict[str, Any]]


def _format(path: str | Path, fmt: str | None) -> str:
    """``fmt``, or the format the input's content shows (:func:`survey_input`: an input that cannot
    be built raises :class:`~lychee_ray.io.adapters.InputError` with its kind)."""
    return fmt if fmt is not None else survey_input(path).format


def _items(conversations: Conversations | str | Path, fmt: str | None) -> Iterable[AdapterItem]:
    if isinstance(conversations, (str, Path)):
        return read_input(_format(conversations, fmt), conversations)
    if fmt is not None:
        raise ValueError("format applies to an input path, not to conversation objects")
    return read_objects(conversations)


def build_memory(
    conversations: Conversations | str | Path,
    out: str | Path,
    config: LycheeConfig | None = None,
    llm: LLMBackend | None = None,
    *,
    format: str | None = None,
    runner: Runner = "local",
    retry_failed: bool = False,
    on_conflict: OnConflict | None = None,
) -> BuildSummary:
    """Build (or extend a resumed build of) the memory store at ``out`` and return its summary.

    ``conversations`` is an iterable of :class:`~lychee_ray.core.conversation.Conversation` objects
    or canonical dicts (``docs``: the JSONL schema), or a path/URI of input files read in ``format``
    (detected from the content when not given: one of the registered formats,
    ``lychee_ray.io.adapters.registry.format_names()``; docs/data-format.md). ``llm`` picks the
    encoder backend (default: ``openai`` when an endpoint is configured, else the offline
    ``rules``). ``runner="ray"`` runs the Ray Data job (local Ray, or ``RAY_ADDRESS``).
    Conversations already committed with the same configuration are skipped when unchanged; a
    stored conversation that arrives with more turns gains them as an increment (only its new
    segments are encoded; ``summary.appended`` counts them; docs/incremental.md), and an older copy
    of one that grew since (turns appended after the input's last) is skipped with a warning; one
    whose stored turns changed, went missing or moved fails with stage ``conflict``, unless
    ``on_conflict="rebuild"`` (default: ``build.on_conflict``). Every input ends as built, skipped,
    failed or duplicate in the summary (failures and warnings also in the store's ``errors/``).
    """
    cfg = config or load_config()
    if runner == LOCAL_RUNNER:
        return run_local_build_items(cfg, _items(conversations, format), out, backend=llm, retry_failed=retry_failed,
                                     on_conflict=on_conflict)
    if runner != RAY_RUNNER:
        raise ValueError(f"unknown runner {runner!r}; expected one of {', '.join(RUNNERS)}")
    from lychee_ray.ray.build_job import run_ray_build  # Ray itself: imported only when a Ray run is asked for

    if isinstance(conversations, (str, Path)):
        return run_ray_build(cfg, _format(conversations, format), conversations, out, backend=llm, retry_failed=retry_failed,
                             on_conflict=on_conflict)
    return run_ray_build(cfg, "jsonl", "", out, backend=llm, retry_failed=retry_failed,
                         items=list(_items(conversations, format)), on_conflict=on_conflict)


def evaluate(config: LycheeConfig | None, options: EvalOptions) -> dict[str, Any]:
    """Run a benchmark evaluation (``lychee-ray eval``) on the executor ``options.local`` asks for:
    in this process, or on Ray (builds with the Ray Data job, questions on Ray actors)."""
    from lychee_ray.eval.runners.run import run_eval  # heavy (nltk, seconds): only when an evaluation runs

    cfg = config or load_config()
    if options.local:
        return run_eval(cfg, options)
    from lychee_ray.ray.eval_job import RayExecutor  # Ray itself: imported only when a Ray run is asked for

    return run_eval(cfg, options, executor_factory=RayExecutor)


__all__ = [
    "AppendErrorKind", "AppendResult", "AppendTurn", "BuildSummary", "ConfigMismatch", "ConversationBusy",
    "ConversationDeleting", "HistoryConflict", "IncrementError", "InvalidTurns", "MemoryStore", "OwnerMismatch",
    "UnknownConversationError", "UserIdRequired", "build_memory", "evaluate",
]
