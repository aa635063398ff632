"""The memory stores an eval reads: reuse a matching store or build the missing conversations.

For each distinct build (see :mod:`lychee_ray.eval.setup.variants`) a store whose commit markers carry the
expected fingerprint for every selected conversation is reused — the run's own ``stores/<key>`` or
any ``--reuse-store`` directory; otherwise the executor's builder (the in-process build or the Ray
build job) builds the missing conversations into ``stores/<key>`` (finished ones are skipped, so an
interrupted build resumes).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol
from collections.abc import Iterable, Sequence

from lychee_ray.ingest.segment import resolve_exchange_mode
from lychee_ray.config import LycheeConfig
from lychee_ray.eval.runners.resume import RunState
from lychee_ray.eval.setup.datasets import Dataset
from lychee_ray.eval.setup.layout import RunLayout
from lychee_ray.eval.setup.variants import Variant, build_config, build_key, expected_fingerprint, fixed_window_for
from lychee_ray.io.store import CommitMarker, StoreLayout, conversation_key, iter_markers
from lychee_ray.io.store.fs import AnyPath
from lychee_ray.names import LLMBackend, RULES_BACKEND

if TYPE_CHECKING:  # the build runner is heavy; only its summary type is named here
    from lychee_ray.ingest.runner import BuildSummary

log = logging.getLogger(__name__)


class StoreBuilder(Protocol):
    """Builds (or resumes) a store from a canonical JSONL input; an executor provides one."""

    def __call__(self, cfg: LycheeConfig, input_path: Path, out: Path, backend: LLMBackend, progress: bool) -> BuildSummary: ...


@dataclass
class StoreInfo:
    """One distinct build: its configuration, where its store is, and how it got there."""

    key: str
    label: str
    backend: LLMBackend
    cfg: LycheeConfig
    fingerprint: str
    path: AnyPath | None = None  # a reused store may be remote (s3://)
    reused_from: str | None = None
    built_now: bool = False
    build_wall_s: float = 0.0  # this run's build wall time
    build_wall_s_total: float = 0.0  # all runs' build wall time of this run's own store (state.json)
    failed: list[str] = field(default_factory=list)


def store_has(path: AnyPath, conversation_ids: Iterable[str], fingerprint: str) -> bool:
    """Every conversation is committed in ``path`` with ``fingerprint``."""
    layout = StoreLayout(path)
    if not layout.is_store():
        return False
    for cid in conversation_ids:
        m = layout.read_marker(conversation_key(cid))
        if m is None or m.fingerprint != fingerprint:
            return False
    return True


def markers_for(path: AnyPath, conversation_ids: Iterable[str]) -> dict[str, CommitMarker]:
    """Commit markers of the given conversations that ``path`` holds, by conversation id."""
    wanted = set(conversation_ids)
    return {m.conversation_id: m for m in iter_markers(path) if m.conversation_id in wanted}


def ensure_store(info: StoreInfo, ds: Dataset, input_path: Path, run_dir: Path, state: RunState,
                 reuse: Sequence[AnyPath], builder: StoreBuilder, progress: bool = True) -> StoreInfo:
    """Find a matching store or build the missing conversations with ``builder``."""
    cids = ds.conversation_ids
    own = RunLayout(run_dir).store_dir(info.key)
    for cand in [own, *reuse]:
        if store_has(cand, cids, info.fingerprint):
            info.path = cand
            info.reused_from = None if cand == own else str(cand)
            st = state.store(info.key)
            st.update({"path": str(cand), "fingerprint": info.fingerprint, "reused_from": info.reused_from})
            state.save()
            log.info("store %s: reusing %s (fingerprint %s matches for %d conversation(s))", info.key, cand,
                     info.fingerprint, len(cids))
            return info
    log.info("store %s: building %d conversation(s) (%s backend) into %s", info.key, len(cids), info.backend, own)
    t0 = time.perf_counter()
    summary = builder(info.cfg, input_path, own, info.backend, progress)
    wall = time.perf_counter() - t0
    info.path, info.built_now = own, True
    info.failed = [e.get("conversation_id") or "?" for e in summary.errors]
    if summary.failed:
        log.warning("store %s: %d conversation(s) failed to build: %s", info.key, summary.failed, info.failed[:5])
    st = state.store(info.key)
    st["build_wall_s"] = round(float(st.get("build_wall_s", 0.0)) + wall, 3)
    st.update({"path": str(own), "fingerprint": info.fingerprint, "reused_from": None,
               "last_build": {"built": summary.built, "skipped": summary.skipped, "failed": summary.failed}})
    state.save()
    info.build_wall_s = wall
    return info


def turns_per_exchange(ds: Dataset, cfg: LycheeConfig) -> float:
    """Mean turns per segmenter exchange for ``segmenter.exchange_mode`` on these conversations."""
    turns = users = 0
    modes = set()
    for c in ds.conversations:
        roles = [t.role for *_, t in c.iter_turns()]
        modes.add(resolve_exchange_mode(cfg.segmenter.exchange_mode, roles, cfg.segmenter.auto_without_roles))
        turns += len(roles)
        users += sum(r == "user" for r in roles)
    if modes == {"turn"}:
        return 1.0
    if modes == {"pair"}:
        return 2.0
    return turns / max(1, users)


def mean_turns_per_segment(path: AnyPath, conversation_ids: Iterable[str]) -> float | None:
    """Mean turns per segment over the given conversations' commit markers (None without segments)."""
    ms = markers_for(path, conversation_ids).values()
    turns = sum(m.counts.turns for m in ms)
    segs = sum(m.counts.segments for m in ms)
    return turns / segs if segs else None


class VariantStores:
    """The store of every variant; variants with the same build share one (DESIGN §5)."""

    def __init__(self, cfg: LycheeConfig, ds: Dataset, backend: LLMBackend, run_dir: Path, input_path: Path, state: RunState,
                 reuse: Sequence[AnyPath], builder: StoreBuilder, progress: bool = True) -> None:
        self.cfg, self.ds, self.backend = cfg, ds, backend
        self.run_dir, self.input_path, self.state = run_dir, input_path, state
        self.reuse, self.builder, self.progress = list(reuse), builder, progress
        self.stores: dict[str, StoreInfo] = {}  # by build key
        self.default_key = build_key("default", cfg, backend)
        self.default_fp = expected_fingerprint(cfg, backend)

    def store_for(self, label: str, bcfg: LycheeConfig, backend: LLMBackend) -> StoreInfo:
        """The (reused or built) store of one build, once per build key."""
        key = build_key(label, bcfg, backend)
        if key not in self.stores:
            info = StoreInfo(key=key, label=label, backend=backend, cfg=bcfg, fingerprint=expected_fingerprint(bcfg, backend))
            self.stores[key] = ensure_store(info, self.ds, self.input_path, self.run_dir, self.state, self.reuse,
                                            self.builder, self.progress)
        return self.stores[key]

    def complete_default(self) -> AnyPath | None:
        """A store of the default build (this backend) holding every selected conversation, if any."""
        known = self.stores.get(self.default_key)
        if known is not None and known.path is not None:
            return known.path
        cands = [RunLayout(self.run_dir).store_dir(self.default_key), *self.reuse]
        return next((p for p in cands if store_has(p, self.ds.conversation_ids, self.default_fp)), None)

    def resolve(self, variants: Sequence[Variant]) -> dict[str, StoreInfo]:
        """Variant name → its store, building what is missing."""
        cfg, cids = self.cfg, self.ds.conversation_ids
        need_default = any(not v.turns_only and not v.build_sets for v in variants)
        by_variant: dict[str, StoreInfo] = {}
        for v in variants:  # canonical order: lychee's store exists before fixed_window reads its segment length
            if v.turns_only:
                continue
            fw = None
            if v.base_name == "fixed_window":
                src = self.complete_default()
                mtps = mean_turns_per_segment(src, cids) if src is not None else None
                fw = fixed_window_for(mtps, turns_per_exchange(self.ds, cfg), cfg.segmenter.fixed_window)
                log.info("fixed_window: %s exchanges per segment (lychee mean %s turns/segment)", fw,
                         f"{mtps:.2f}" if mtps else "unknown: default window")
            by_variant[v.name] = self.store_for(v.build_label, build_config(v, cfg, fw), self.backend)
        for v in variants:
            if not v.turns_only:
                continue
            if self.backend == RULES_BACKEND or need_default or self.complete_default() is not None:
                by_variant[v.name] = self.store_for("default", cfg, self.backend)
            else:  # only raw turns + turn vectors are read: a rules store costs no LLM call
                by_variant[v.name] = self.store_for("default", cfg, RULES_BACKEND)
        for info in self.stores.values():
            info.build_wall_s_total = float(self.state.store(info.key).get("build_wall_s", 0.0))
        return by_variant


__all__ = ["StoreBuilder", "StoreInfo", "VariantStores", "ensure_store", "markers_for", "mean_turns_per_segment",
           "store_has", "turns_per_exchange"]
