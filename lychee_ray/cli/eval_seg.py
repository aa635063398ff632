"""``lychee-ray eval-seg``: boundary quality of the segmenter on a gold topic-segmentation corpus.

Thin command: reading the corpus, the protocol, the metrics and the reference points (matched fixed
window, no boundary, oracle-count TextTiling) live in :mod:`lychee_ray.eval.runners.segmentation`.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from lychee_ray.cli.args import add_config_args, config_from_args
from lychee_ray.embed import get_embedder
from lychee_ray.names import EXCHANGE_MODE_CHOICES
from lychee_ray.eval.runners.segmentation import (
    SegCorpusError,
    eval_exchange_mode,
    evaluate_dialogues,
    format_report,
    load_seg_corpus,
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The ``eval-seg`` arguments."""
    p.add_argument("--data", required=True, help="TIAGE-format JSON: [{dial_id, utterances[], segments[], roles[] (optional)}]")
    p.add_argument("--out", help="also write the JSON report here")
    p.add_argument("--subset", help="only dialogues whose 'set' field equals this (e.g. test)")
    p.add_argument("--reset-background", action="store_true", help="cold-start every dialogue (no carried statistics)")
    p.add_argument("--exchange-mode", default="auto", choices=EXCHANGE_MODE_CHOICES,
                   help="decision units: auto = role when the corpus has user/agent roles, else turn (each utterance)")
    add_config_args(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Embed the corpus once, evaluate under the library protocol, print (and write) the JSON report."""
    cfg = config_from_args(args)
    try:
        dialogues = load_seg_corpus(args.data, args.subset)
        # refuse a mode the corpus cannot use before embedding it
        eval_exchange_mode(dialogues, args.exchange_mode, cfg.segmenter.auto_without_roles)
    except (SegCorpusError, ValueError) as e:
        print(f"lychee-ray eval-seg: {e}", file=sys.stderr)
        return 2
    embedder = get_embedder(cfg.embedding, cfg.llm)
    t0 = time.perf_counter()
    vectors = embedder.encode([u for d in dialogues for u in d.utterances])  # one batched call
    embed_s = time.perf_counter() - t0
    report = evaluate_dialogues(
        dialogues, vectors, cfg.segmenter, reset_background=args.reset_background, encoding=cfg.tokenizer.encoding,
        exchange_mode=args.exchange_mode,
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
    print(format_report(report), file=sys.stderr)  # the summary a reader looks for, after the full JSON
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text + "\n", encoding="utf-8")
    return 0
