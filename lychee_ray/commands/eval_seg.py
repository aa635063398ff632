"""``lychee-ray eval-seg``: boundary quality of the segmenter on a gold topic-segmentation corpus.

Corpus format (TIAGE-style JSON): a list of ``{"dial_id", "utterances": [...], "segments": [4, 6, ...]}``
where ``segments`` are consecutive utterance counts. Each utterance is one unit (exchange mode
``turn``: no pairing, no sessions). All utterances are embedded in one batched call.

Protocol (docs/segmenter.md): the dialogues are fed to ONE segmenter in file order, calling
:meth:`~lychee_ray.segment.BaseSegmenter.new_stream` between them, so segments never cross dialogues
but the background statistics (the surprise history behind phi's robust z-score and the centering
mean) carry over, as they do inside a long conversation. ``--reset-background`` instead starts every
dialogue cold (a fresh segmenter), which shows the cold-start behaviour on very short streams.

The fixed-window baseline uses the same protocol with a window of round(lychee's mean segment length).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..config import SegmenterConfig
from ..seg_metrics import evaluate_corpus
from ..segment import Segment, TurnInput, TurnRef, make_segmenter
from ..tokens import DEFAULT_ENCODING, count_tokens

log = logging.getLogger(__name__)

METRIC_KEYS = ("pk", "windowdiff", "f1", "f1_tol1", "mean_segment_len")
EXTRA_KEYS = ("precision", "recall", "pk_se", "windowdiff_se")


@dataclass(frozen=True)
class SegDialogue:
    """One dialogue with its gold segmentation (segment lengths in utterances)."""

    dial_id: str
    utterances: list[str]
    segments: list[int]
    subset: str | None = None  # the corpus' own split label ("set"), if any


def load_seg_corpus(path: str | Path, subset: str | None = None) -> list[SegDialogue]:
    """Read a TIAGE-format corpus; ``subset`` keeps dialogues whose ``set`` equals it."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(data, list):
        raise ValueError(f"{path}: expected a JSON list of dialogues")
    out = []
    for i, d in enumerate(data):
        utts = [str(u) for u in d["utterances"]]
        segs = [int(n) for n in d["segments"]]
        if not utts or sum(segs) != len(utts) or any(n <= 0 for n in segs):
            raise ValueError(f"{path}: dialogue {d.get('dial_id', i)}: segments {segs} do not cover {len(utts)} utterances")
        if subset is not None and d.get("set") != subset:
            continue
        out.append(SegDialogue(str(d.get("dial_id", i)), utts, segs, d.get("set")))
    if not out:
        raise ValueError(f"{path}: no dialogues" + (f" in subset {subset!r}" if subset else ""))
    return out


def dialogue_turn_inputs(
    dialogues: Sequence[SegDialogue], vectors: np.ndarray, encoding: str = DEFAULT_ENCODING
) -> list[list[TurnInput]]:
    """Per dialogue, its utterances as turns of one session (rows of ``vectors`` in corpus order)."""
    out, row = [], 0
    for d in dialogues:
        turns = []
        for i, u in enumerate(d.utterances):
            ref = TurnRef(session_index=0, turn_index=i, turn_id=f"{d.dial_id}:{i}", session_id=d.dial_id)
            turns.append(TurnInput(ref, "user", u, count_tokens(u, encoding), vectors[row]))
            row += 1
        out.append(turns)
    if row != len(vectors):
        raise ValueError(f"{len(vectors)} vectors for {row} utterances")
    return out


def segment_dialogues(
    turns: Sequence[Sequence[TurnInput]],
    cfg: SegmenterConfig,
    *,
    reset_background: bool = False,
    encoding: str = DEFAULT_ENCODING,
) -> list[list[int]]:
    """Segment lengths (in utterances) per dialogue, under the protocol in the module docstring."""
    out: list[list[int]] = []
    seg = make_segmenter(cfg, mode="turn", encoding=encoding)
    for dialogue in turns:
        if reset_background:
            seg = make_segmenter(cfg, mode="turn", encoding=encoding)
        closed: list[Segment] = seg.push_turns(dialogue)
        closed += seg.new_stream()
        out.append([s.num_turns for s in closed])
    return out


def evaluate_dialogues(
    dialogues: Sequence[SegDialogue],
    vectors: np.ndarray,
    cfg: SegmenterConfig,
    *,
    reset_background: bool = False,
    encoding: str = DEFAULT_ENCODING,
) -> dict[str, Any]:
    """The eval-seg report for precomputed utterance vectors (rows in corpus order)."""
    turns = dialogue_turn_inputs(dialogues, vectors, encoding)
    gold = [d.segments for d in dialogues]
    t0 = time.perf_counter()
    hyp = segment_dialogues(turns, cfg, reset_background=reset_background, encoding=encoding)
    seg_s = time.perf_counter() - t0
    lychee = evaluate_corpus(gold, hyp)
    window = max(1, round(lychee["mean_segment_len"]))
    fixed_cfg = cfg.model_copy(update={"method": "fixed", "fixed_window": window})
    fixed = evaluate_corpus(gold, segment_dialogues(turns, fixed_cfg, reset_background=reset_background, encoding=encoding))
    units = sum(len(d.utterances) for d in dialogues)
    return {
        "dialogues": len(dialogues),
        "utterances": units,
        "lychee": {k: round(lychee[k], 4) for k in (*METRIC_KEYS, *EXTRA_KEYS)},
        "fixed_window": {"window": window, **{k: round(fixed[k], 4) for k in (*METRIC_KEYS, *EXTRA_KEYS)}},
        "gold_mean_segment_len": round(units / sum(len(g) for g in gold), 4),
        "protocol": "cold start per dialogue" if reset_background else "one stream, new_stream() per dialogue",
        "segmenter_seconds": round(seg_s, 3),
    }


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("eval-seg", help="Pk / WindowDiff / boundary F1 of the segmenter on a gold segmentation corpus")
    p.add_argument("--data", required=True, help="TIAGE-format JSON: [{dial_id, utterances[], segments[]}]")
    p.add_argument("--out", help="also write the JSON report here")
    p.add_argument("--subset", help="only dialogues whose 'set' field equals this (e.g. test)")
    p.add_argument("--reset-background", action="store_true", help="cold-start every dialogue (no carried statistics)")
    from ..cli import add_config_args

    add_config_args(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..cli import config_from_args
    from ..embed import get_embedder

    cfg = config_from_args(args)
    try:
        dialogues = load_seg_corpus(args.data, args.subset)
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"lychee-ray eval-seg: {e}", file=sys.stderr)
        return 2
    embedder = get_embedder(cfg.embedding, cfg.llm)
    t0 = time.perf_counter()
    vectors = embedder.encode([u for d in dialogues for u in d.utterances])  # one batched call
    embed_s = time.perf_counter() - t0
    report = evaluate_dialogues(
        dialogues, vectors, cfg.segmenter, reset_background=args.reset_background, encoding=cfg.tokenizer.encoding
    )
    report.update(
        data=str(args.data),
        subset=args.subset,
        embedding_model=getattr(embedder, "name", "?"),
        embed_seconds=round(embed_s, 3),
        segmenter_config=cfg.segmenter.model_dump(mode="json"),
    )
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text + "\n", encoding="utf-8")
    return 0
