"""Evaluation variants: the method, its baselines and the paper's ablations (DESIGN §1, §5).

A variant is configuration overrides on the build side (which store it needs), overrides on the
query side, and a query *kind*:

==================  ==============================================================================
``lychee``          the method: semantic segments, atomic records, all channels, RRF, MMR selection
``eager``           one encode call per turn (A-Mem/Mem0-style construction): ``segmenter.method=fixed``,
                    ``fixed_window=1``, ``exchange_mode=turn`` — every turn is its own segment
``fixed_window``    segments of the same mean length as lychee's but without semantic boundaries:
                    ``segmenter.method=fixed``; the window (in exchanges) comes from the lychee store's
                    mean turns per segment when that store exists, else ``segmenter.fixed_window``
``summary``         ONE summary record per segment instead of atomic records (``encoder.mode=summary``)
``record_vector_only`` recall channel (a) only: record vectors (other channel depths 0); planner routes,
                    RRF across routes and MMR selection unchanged
``no_fusion``       one channel, one route, no RRF across lists and no diversity selection: the top
                    records by vector similarity, in order, until the token budget is full
                    (``max_routes=1``, channel (a) only, ``mmr_lambda=1``, rerank off)
``turn_rag``        (a) the question's top raw turns by cosine until the budget (no planner call)
``sentence_rag``    (b) the top sentences of the turns by cosine (same embedding model) until the budget
``hybrid_rag``      (c) BM25 + dense turn rankings fused with RRF, top turns until the budget
``passage_rag``     (e) BM25 + dense over role-labelled passages (paragraphs, at most
                    ``eval.passage_rag_max_tokens`` tokens) of the messages, fused with RRF, until the budget
``full_context``    (d) the ceiling: the whole conversation in the answer prompt when it fits
                    ``eval.full_context_max_tokens`` (else its most recent turns that fit); the rules
                    backend answers extractively over all turns
==================  ==============================================================================

The baselines (:mod:`lychee_ray.eval.baselines.retrieval`) show plain ``Speaker: text`` lines — no ids, no
session headers — and are budgeted on those lines.

**Ablation fairness.** A query-time rule that only makes sense for some builds is reported both
ways: ``eval.ablation_rule_twins`` (default ``query.select.window_within_segment=false``, which
confines raw-turn windows to the centre turn's segment and so collapses eager's one-turn segments)
adds, in a run that selects a variant with its own build, a twin of every selected memory variant
with the override (named ``<variant>+<key>=<value>``, see :func:`with_rule_twins`).

Variants whose build overrides are equal share one store (``RUN_DIR/stores/<build key>``); the
build key is the label of the build plus a hash of everything that decides stored content (the
config sections in the store fingerprint, the backend and the models). The baselines
read only raw turns and turn vectors, which every store has: they use the
backend's default store when another selected variant needs it (or it already exists), otherwise a
``rules`` default store (no LLM calls), and their construction tokens are 0.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from lychee_ray.ingest.encode.rules import RulesEncoder
from lychee_ray.ingest.pipeline import build_fingerprint
from lychee_ray.config import LycheeConfig, deep_merge, parse_set
from lychee_ray.query.channels import RECALL_CHANNELS
from lychee_ray.names import LOCAL_EMBEDDING, OPENAI_BACKEND

QueryKind = Literal["memory", "turn_rag", "sentence_rag", "hybrid_rag", "passage_rag", "full_context"]

# Every channel depth the recall step has, by channel name (DESIGN §1 step 5; the channel registry).
CHANNEL_DEPTHS: dict[str, tuple[str, ...]] = {c.name: c.depth_keys for c in RECALL_CHANNELS}


def only_channels(*keep: str) -> tuple[str, ...]:
    """``--set`` items that switch every recall channel but ``keep`` off (depth 0)."""
    return tuple(f"query.recall.{d}=0" for ch, depths in CHANNEL_DEPTHS.items() if ch not in keep for d in depths)


@dataclass(frozen=True)
class Variant:
    name: str
    description: str
    kind: QueryKind = "memory"
    build_label: str = "default"
    build_sets: tuple[str, ...] = ()
    query_sets: tuple[str, ...] = ()
    # Only reads raw turns/turn vectors: any store of the conversations will do (see module docstring).
    turns_only: bool = False
    # The paper's LoCoMo figures (GPT-4.1-mini) for the report; "derived" ones come from a reported delta.
    paper: dict[str, Any] = field(default_factory=dict)
    # A rule twin's original variant (same build; see with_rule_twins); None for the variants themselves.
    twin_of: str | None = None

    @property
    def base_name(self) -> str:
        """The variant this one is (itself, or the original of a rule twin)."""
        return self.twin_of or self.name


PAPER_LYCHEE_ACC = 89.22
PAPER_LYCHEE_CONSTRUCTION = 204.1e3

VARIANTS: dict[str, Variant] = {v.name: v for v in (
    Variant("lychee", "LycheeMemory V2: semantic segments, atomic records, 5 channels, RRF, MMR selection",
            paper={"accuracy": PAPER_LYCHEE_ACC, "construction_tokens": PAPER_LYCHEE_CONSTRUCTION, "query_tokens": 4.01e3}),
    Variant("eager", "one encode call per turn (eager construction, as Mem0/A-Mem)", build_label="eager",
            build_sets=("segmenter.method=fixed", "segmenter.fixed_window=1", "segmenter.exchange_mode=turn"),
            paper={"accuracy": round(PAPER_LYCHEE_ACC - 7.34, 2), "construction_tokens": round(PAPER_LYCHEE_CONSTRUCTION * 4.16, -2),
                   "derived": "-7.34pp and +316% construction tokens vs lychee"}),
    Variant("fixed_window", "fixed windows of lychee's mean segment length (no semantic boundaries)",
            build_label="fixed", build_sets=("segmenter.method=fixed",),
            paper={"accuracy": 82.40, "construction_tokens": 174.7e3}),
    Variant("summary", "one summary record per segment instead of atomic records", build_label="summary",
            build_sets=("encoder.mode=summary",),
            paper={"accuracy": round(PAPER_LYCHEE_ACC - 8.44, 2), "derived": "-8.44pp vs lychee"}),
    Variant("record_vector_only", "recall channel (a) only: record vectors", query_sets=only_channels("records"),
            paper={"accuracy": round(PAPER_LYCHEE_ACC - 7.47, 2), "derived": "-7.47pp vs lychee"}),
    Variant("no_fusion", "single channel and route, no RRF/selection: top records by vector until the budget",
            query_sets=(*only_channels("records"), "query.planner.max_routes=1", "query.planner.max_entity_routes=0",
                        "query.select.mmr_lambda=1.0", "query.rerank.enabled=false"),
            paper={"accuracy": 66.62}),
    Variant("turn_rag", "turn RAG: top raw turns by cosine until the budget (plain lines)", kind="turn_rag",
            turns_only=True),
    Variant("sentence_rag", "sentence-chunk RAG: top sentences by cosine until the budget (plain lines)",
            kind="sentence_rag", turns_only=True),
    Variant("hybrid_rag", "hybrid RAG: BM25 + dense over turns fused with RRF until the budget (plain lines)",
            kind="hybrid_rag", turns_only=True),
    Variant("passage_rag", "hybrid passage RAG: BM25 + dense over role-labelled message passages fused with RRF "
                           "until the budget (plain lines)", kind="passage_rag", turns_only=True),
    Variant("full_context", "the whole conversation in the answer prompt (when it fits; plain lines)",
            kind="full_context", turns_only=True, paper={"accuracy": 84.80}),
)}

# Other systems the paper reports on LoCoMo (GPT-4.1-mini), for the report's reference table.
PAPER_OTHERS = {"A-Mem": {"accuracy": 68.83, "construction_tokens": 1459.9e3}}

DEFAULT_VARIANTS = ("lychee", "turn_rag", "full_context")


class UnknownVariant(ValueError):
    pass


def select_variants(names: list[str] | tuple[str, ...] | None) -> list[Variant]:
    """Variants by name in the canonical order (``all`` = every variant; None/empty = the defaults).

    Names may be given space- or comma-separated; duplicates are dropped; an unknown name raises
    :class:`UnknownVariant` listing the known ones.
    """
    raw = [n for item in (names or DEFAULT_VARIANTS) for n in str(item).replace(",", " ").split()]
    if "all" in raw:
        return list(VARIANTS.values())
    bad = [n for n in raw if n not in VARIANTS]
    if bad:
        raise UnknownVariant(f"unknown variant(s) {', '.join(bad)}; known: {', '.join(VARIANTS)} (or 'all')")
    wanted = set(raw)
    # canonical order: lychee first so fixed_window can read its segment length
    return [v for v in VARIANTS.values() if v.name in wanted]


def twin_name(variant: str, override: str) -> str:
    """``eager+window_within_segment=false`` for ``query.select.window_within_segment=false``."""
    key, _, value = override.partition("=")
    return f"{variant}+{key.rsplit('.', 1)[-1]}={value}"


def with_rule_twins(variants: list[Variant], overrides: list[str] | tuple[str, ...]) -> list[Variant]:
    """``variants`` plus, when one of them has its own build (an ablation run), a twin of every
    memory variant per query-rule override, right after it (the rule reported both ways)."""
    if not overrides or not any(v.build_sets for v in variants):
        return list(variants)
    out: list[Variant] = []
    for v in variants:
        out.append(v)
        if v.kind == "memory":
            for o in overrides:
                out.append(replace(v, name=twin_name(v.name, o), description=f"{v.description}; with {o}",
                                   query_sets=(*v.query_sets, o), paper={}, twin_of=v.name))
    return out


def apply_sets(cfg: LycheeConfig, sets: tuple[str, ...] | list[str]) -> LycheeConfig:
    """``cfg`` with ``--set``-style overrides applied (validated)."""
    if not sets:
        return cfg
    data = cfg.model_dump(mode="python")
    for s in sets:
        data = deep_merge(data, parse_set(s))
    return LycheeConfig.model_validate(data)


def fixed_window_for(mean_turns_per_segment: float | None, turns_per_exchange: float, default: int) -> int:
    """Exchanges per fixed window giving ``mean_turns_per_segment`` turns (the default when unknown)."""
    if not mean_turns_per_segment or turns_per_exchange <= 0:
        return default
    return max(1, int(round(mean_turns_per_segment / turns_per_exchange)))


def build_config(variant: Variant, cfg: LycheeConfig, fixed_window: int | None = None) -> LycheeConfig:
    """The configuration the variant's store is built with."""
    out = apply_sets(cfg, variant.build_sets)
    if variant.base_name == "fixed_window" and fixed_window is not None:
        out = apply_sets(out, (f"segmenter.fixed_window={fixed_window}",))
    return out


def query_config(variant: Variant, cfg: LycheeConfig) -> LycheeConfig:
    """The configuration the variant's questions are answered with."""
    return apply_sets(cfg, variant.query_sets)


def embedder_name(cfg: LycheeConfig) -> str:
    """The embedder name a build records (without loading the model; mirrors :mod:`lychee_ray.embed.local`
    and :mod:`lychee_ray.embed.openai`)."""
    e = cfg.embedding
    if e.backend == LOCAL_EMBEDDING:
        return e.model or "sentence-transformers/all-MiniLM-L6-v2"
    return e.openai_model


def encoder_model(cfg: LycheeConfig, backend: str) -> str:
    """The encoder model a build records (``rules-v2`` for the rules backend)."""
    if backend == OPENAI_BACKEND:
        return cfg.llm.model
    return RulesEncoder.model


def expected_fingerprint(cfg: LycheeConfig, backend: str) -> str:
    """The store fingerprint a build of ``cfg`` with ``backend`` writes into its commit markers."""
    return build_fingerprint(cfg, backend, encoder_model(cfg, backend), embedder_name(cfg))


def build_key(label: str, cfg: LycheeConfig, backend: str) -> str:
    """Directory name of a store under ``RUN_DIR/stores``: label + hash of its fingerprint."""
    digest = hashlib.sha256(expected_fingerprint(cfg, backend).encode()).hexdigest()[:10]
    return f"{label}-{backend}-{digest}"


def variant_key(variant: Variant, qcfg: LycheeConfig, store_fingerprint: str, backend: str, judge_model: str | None,
                extra: dict[str, Any] | None = None) -> str:
    """What a finished answer depends on; answers with another key are redone on resume."""
    blob = {
        "variant": variant.name, "kind": variant.kind, "query": qcfg.query.model_dump(mode="json"),
        "eval": {"full_context_max_tokens": qcfg.eval.full_context_max_tokens},
        "store": store_fingerprint, "backend": backend, "judge": judge_model, "llm": qcfg.llm.model if backend == OPENAI_BACKEND else None,
        **(extra or {}),
    }
    return hashlib.sha256(json.dumps(blob, sort_keys=True, default=str).encode()).hexdigest()[:16]


__all__ = [
    "CHANNEL_DEPTHS",
    "DEFAULT_VARIANTS",
    "PAPER_OTHERS",
    "VARIANTS",
    "UnknownVariant",
    "Variant",
    "apply_sets",
    "build_config",
    "build_key",
    "embedder_name",
    "encoder_model",
    "expected_fingerprint",
    "fixed_window_for",
    "only_channels",
    "query_config",
    "select_variants",
    "twin_name",
    "variant_key",
    "with_rule_twins",
]
