"""Segmentation evaluation on gold topic-segmentation corpora (what ``lychee-ray eval-seg`` runs).

Corpus format (TIAGE-style JSON): a list of ``{"dial_id", "utterances": [...], "segments": [4, 6, ...]}``
where ``segments`` are consecutive utterance counts; an optional ``roles`` list (``user`` / ``agent`` /
``assistant`` per utterance, as in SuperDialseg) and an optional ``set`` split label.

Protocol (docs/segmenter.md): the dialogues are fed to ONE segmenter in file order, calling
:meth:`~lychee_ray.ingest.segment.BaseSegmenter.new_stream` between them, so segments never cross dialogues
but the background statistics carry over, as they do inside a long conversation. ``reset_background``
starts every dialogue cold instead (a fresh segmenter). Without roles each utterance is one unit
(exchange mode ``turn``); with user/agent roles the exchanges are role-aware (a user turn plus the
replies after it), so boundaries can only fall where the user speaks.

Every report places lychee among reference points computed under the same protocol:

* ``fixed_window``: a segment every round(lychee's mean segment length) utterances (matched granularity);
* ``no_boundary``: one segment per dialogue (WindowDiff rewards under-segmentation on short dialogues);
* ``texttiling``: standard embedding TextTiling (Hearst's cut-off; offline, two-sided, not told the count);
* ``texttiling_oracle``: embedding TextTiling told the TRUE number of boundaries of every dialogue
  (an oracle ceiling for unsupervised methods; see :func:`lychee_ray.eval.baselines.texttiling.texttiling_oracle`).

``paired`` gives, against each reference, the mean per-dialogue difference (lychee minus reference) of
WindowDiff and Pk with its paired standard error and 95 % interval: lychee is ahead of a reference by
more than noise when the whole interval lies below 0.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from lychee_ray.ingest.segment import (
    ANSWER_ROLES,
    Segment,
    TurnInput,
    TurnRef,
    make_segmenter,
)
from lychee_ray.names import AUTO, EXCHANGE_MODES, EXCHANGE_MODE_CHOICES, ExchangeMode, ROLE_MODE, UnitWithoutRoles
from lychee_ray.config import SegmenterConfig
from lychee_ray.eval.baselines.texttiling import texttiling_hearst, texttiling_oracle
from lychee_ray.eval.metrics.segmentation import (
    DEFAULT_RESAMPLES,
    evaluate_corpus,
    paired_bootstrap,
    paired_difference,
    per_dialogue_scores,
)
from lychee_ray.text.tokens import DEFAULT_ENCODING, count_tokens

METRIC_KEYS = ("pk", "windowdiff", "f1", "f1_tol1", "mean_segment_len")
REFERENCES = ("fixed_window", "no_boundary", "texttiling", "texttiling_oracle")
EXTRA_KEYS = ("precision", "recall", "pk_se", "windowdiff_se")


class SegCorpusError(ValueError):
    """A segmentation corpus that cannot be read; ``path`` and ``dialogue`` say where."""

    def __init__(self, path: str, message: str, dialogue: str | None = None) -> None:
        self.path, self.dialogue = path, dialogue
        where = f"{path}: dialogue {dialogue}: " if dialogue is not None else f"{path}: "
        super().__init__(where + message)


@dataclass(frozen=True)
class SegDialogue:
    """One dialogue with its gold segmentation (segment lengths in utterances)."""

    dial_id: str
    utterances: list[str]
    segments: list[int]
    subset: str | None = None  # the corpus' own split label ("set"), if any
    roles: list[str] | None = None  # speaker role per utterance, if the corpus has them


def load_seg_corpus(path: str | Path, subset: str | None = None) -> list[SegDialogue]:
    """Read a TIAGE-format corpus; ``subset`` keeps dialogues whose ``set`` equals it."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise SegCorpusError(str(path), str(e)) from e
    if not isinstance(data, list):
        raise SegCorpusError(str(path), "expected a JSON list of dialogues")
    out = []
    for i, d in enumerate(data):
        did = str(d.get("dial_id", i)) if isinstance(d, dict) else str(i)
        try:
            utts = [str(u) for u in d["utterances"]]
            segs = [int(n) for n in d["segments"]]
            roles = [str(r) for r in d["roles"]] if d.get("roles") is not None else None
        except (KeyError, TypeError, ValueError) as e:
            raise SegCorpusError(str(path), f"bad record ({e!r})", did) from e
        if not utts or sum(segs) != len(utts) or any(n <= 0 for n in segs):
            raise SegCorpusError(str(path), f"segments {segs} do not cover {len(utts)} utterances", did)
        if roles is not None and len(roles) != len(utts):
            raise SegCorpusError(str(path), f"{len(roles)} roles for {len(utts)} utterances", did)
        if subset is not None and d.get("set") != subset:
            continue
        out.append(SegDialogue(did, utts, segs, d.get("set"), roles))
    if not out:
        raise SegCorpusError(str(path), "no dialogues" + (f" in subset {subset!r}" if subset else ""))
    return out


def eval_exchange_mode(
    dialogues: Sequence[SegDialogue], requested: str = "auto", without_roles: UnitWithoutRoles = "turn"
) -> ExchangeMode:
    """The units eval-seg decides on: ``requested`` unless ``auto``; for ``auto``, ``role`` when the corpus has
    user/agent roles (topic shifts come with the user's turn), else ``without_roles`` (the build's
    ``segmenter.auto_without_roles``, so that eval-seg scores the units the build decides on).

    ``role`` on a corpus without user/agent roles is refused (every utterance would be one user request).
    """
    roles = {r for d in dialogues for r in (d.roles or ())}
    has_roles = "user" in roles and bool(roles & ANSWER_ROLES)
    if requested == AUTO:
        return ROLE_MODE if has_roles else without_roles
    if requested == ROLE_MODE and not has_roles:
        raise ValueError("exchange mode 'role' needs a corpus with user and agent/assistant roles")
    modes: dict[str, ExchangeMode] = {m: m for m in EXCHANGE_MODES}
    if requested not in modes:
        raise ValueError(f"unknown exchange mode {requested!r} (one of {', '.join(EXCHANGE_MODE_CHOICES)})")
    return modes[requested]


def dialogue_turn_inputs(
    dialogues: Sequence[SegDialogue], vectors: np.ndarray, encoding: str = DEFAULT_ENCODING
) -> list[list[TurnInput]]:
    """Per dialogue, its utterances as turns of one session (rows of ``vectors`` in corpus order)."""
    out, row = [], 0
    for d in dialogues:
        turns = []
        for i, u in enumerate(d.utterances):
            ref = TurnRef(session_index=0, turn_index=i, turn_id=f"{d.dial_id}:{i}", session_id=d.dial_id)
            role = d.roles[i] if d.roles else "user"
            turns.append(TurnInput(ref, role, u, count_tokens(u, encoding), vectors[row]))
            row += 1
        out.append(turns)
    if row != len(vectors):
        raise ValueError(f"{len(vectors)} vectors for {row} utterances")
    return out


def segment_dialogues(
    turns: Sequence[Sequence[TurnInput]],
    cfg: SegmenterConfig,
    *,
    mode: ExchangeMode = "turn",
    reset_background: bool = False,
    encoding: str = DEFAULT_ENCODING,
) -> list[list[int]]:
    """Segment lengths (in utterances) per dialogue, under the protocol in the module docstring."""
    out: list[list[int]] = []
    seg = make_segmenter(cfg, mode=mode, encoding=encoding)
    for dialogue in turns:
        if reset_background:
            seg = make_segmenter(cfg, mode=mode, encoding=encoding)
        closed: list[Segment] = seg.push_turns(dialogue)
        closed += seg.new_stream()
        out.append([s.num_turns for s in closed])
    return out


def _rounded(m: dict[str, float]) -> dict[str, float]:
    return {k: round(m[k], 4) for k in (*METRIC_KEYS, *EXTRA_KEYS)}


def paired_report(
    gold: Sequence[Sequence[int]], hyp: Sequence[Sequence[int]], refs: dict[str, list[list[int]]]
) -> dict[str, dict[str, dict[str, float]]]:
    """Per reference: lychee minus reference, per dialogue, for WindowDiff and Pk (mean, paired SE, 95 % CI)."""
    own = per_dialogue_scores(gold, hyp)
    out: dict[str, dict[str, dict[str, float]]] = {}
    for name, ref_hyp in refs.items():
        theirs = per_dialogue_scores(gold, ref_hyp)
        out[name] = {}
        for m in ("windowdiff", "pk"):
            d = paired_difference(own[m], theirs[m])
            boot = paired_bootstrap(own[m], theirs[m], resamples=DEFAULT_RESAMPLES)
            out[name][m] = {k: round(v, 4) for k, v in {**d, "boot95_low": boot["boot_low"], "boot95_high": boot["boot_high"]}.items()}
    return out


def format_report(report: dict[str, Any]) -> str:
    """A short text table of an eval-seg report: WindowDiff per system and lychee's paired margins."""
    lines = [
        f"{report['dialogues']} dialogues, {report['utterances']} utterances, units: {report['exchange_mode']}",
        f"{'system':<20} {'WD':>6} {'Pk':>6} {'len':>6}   lychee - system: WD [95% CI]",
    ]
    for name in ("lychee", *REFERENCES):
        if name not in report:
            continue
        r = report[name]
        label = f"fixed_window ({r['window']})" if name == "fixed_window" else name
        row = f"{label:<20} {r['windowdiff']:6.3f} {r['pk']:6.3f} {r['mean_segment_len']:6.2f}"
        if name in report.get("paired", {}):
            d = report["paired"][name]["windowdiff"]
            row += f"   {d['mean']:+.3f} [{d['ci95_low']:+.3f}, {d['ci95_high']:+.3f}]"
        lines.append(row)
    return "\n".join(lines)


def evaluate_dialogues(
    dialogues: Sequence[SegDialogue],
    vectors: np.ndarray,
    cfg: SegmenterConfig,
    *,
    reset_background: bool = False,
    encoding: str = DEFAULT_ENCODING,
    baselines: bool = True,
    exchange_mode: str = "auto",
) -> dict[str, Any]:
    """The eval-seg report for precomputed utterance vectors (rows in corpus order).

    ``baselines=False`` skips no-boundary and both TextTilings (for sweeps; the matched fixed
    window is always computed). ``exchange_mode``: the units (:func:`eval_exchange_mode`); ``pair``
    decides on two utterances at a time, as the build does for two-person chat (LoCoMo).
    """
    turns = dialogue_turn_inputs(dialogues, vectors, encoding)
    gold = [d.segments for d in dialogues]
    mode = eval_exchange_mode(dialogues, exchange_mode, cfg.auto_without_roles)
    t0 = time.perf_counter()
    hyp = segment_dialogues(turns, cfg, mode=mode, reset_background=reset_background, encoding=encoding)
    seg_s = time.perf_counter() - t0
    lychee = evaluate_corpus(gold, hyp)
    window = max(1, round(lychee["mean_segment_len"]))
    # The matched baseline counts utterances (mode turn) whatever lychee's exchange mode.
    fixed_cfg = cfg.model_copy(update={"method": "fixed", "fixed_window": window})
    fixed_hyp = segment_dialogues(turns, fixed_cfg, mode="turn", reset_background=reset_background, encoding=encoding)
    units = sum(len(d.utterances) for d in dialogues)
    report: dict[str, Any] = {
        "dialogues": len(dialogues),
        "utterances": units,
        "exchange_mode": mode,
        "lychee": _rounded(lychee),
        "fixed_window": {"window": window, **_rounded(evaluate_corpus(gold, fixed_hyp))},
    }
    refs: dict[str, list[list[int]]] = {"fixed_window": fixed_hyp}
    if baselines:
        starts = np.cumsum([0] + [len(d.utterances) for d in dialogues])
        vs = [vectors[starts[i] : starts[i + 1]] for i in range(len(gold))]
        refs["no_boundary"] = [[sum(g)] for g in gold]
        refs["texttiling"] = [texttiling_hearst(v) for v in vs]
        refs["texttiling_oracle"] = [texttiling_oracle(v, len(g) - 1) for v, g in zip(vs, gold, strict=False)]
        for name in REFERENCES[1:]:
            report[name] = _rounded(evaluate_corpus(gold, refs[name]))
    report["paired"] = paired_report(gold, hyp, refs)
    report.update(
        gold_mean_segment_len=round(units / sum(len(g) for g in gold), 4),
        protocol="cold start per dialogue" if reset_background else "one stream, new_stream() per dialogue",
        segmenter_seconds=round(seg_s, 3),
    )
    return report
