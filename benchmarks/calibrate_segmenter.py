"""Cross-corpus calibration of the segmenter (docs/segmenter.md §3) and every figure, as JSON + a table.

    python benchmarks/calibrate_segmenter.py --out benchmarks/results/segmenter_calibration.json --cache-dir /tmp/segcache

Data: TIAGE (``--tiage``: open-domain, no roles; ``set`` = train/dev/test), SuperDialseg validation
(``--superdialseg``: document-grounded user/agent dialogues with ``roles``) and the LoCoMo conversations
(``--locomo``, read with the project's adapter). Every text is embedded once with the configured
embedder (offline MiniLM by default); ``--cache-dir`` keeps the vectors between runs.

Procedure (fixed before looking at the reported corpus):
1. Grid over the two knobs that set the cut rate: ``bias`` (b) and ``role_bias`` (the structural prior at a
   user's new request in role mode). Everything else stays at the base configuration.
2. Feasible = LoCoMo mean turns/segment in [5, 7] and every conversation in [4, 9] (the paper's cost model).
3. Calibrate on one corpus, report on the other, both directions: among feasible points whose calibration
   WindowDiff is within one standard error of the best, take the one closest to 5.8 LoCoMo turns per
   segment, then the smaller ``role_bias`` (fewer encoder calls). TIAGE has no roles, so calibrating on
   TIAGE cannot choose ``role_bias``: that direction keeps the smallest grid value (0 = no prior).
4. Report both picks on TIAGE test, SuperDialseg and LoCoMo against the matched fixed window, no boundary
   and oracle-count TextTiling, plus a few ablations of the chosen configuration.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import platform
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lychee_ray.build.segment import segment_conversation, turn_embedding_text
from lychee_ray.config import SegmenterConfig, load_config
from lychee_ray.core.conversation import Conversation
from lychee_ray.eval.segmentation import (
    SegDialogue,
    evaluate_dialogues,
    load_seg_corpus,
)

DATA = ROOT.parent / "shared" / "data"
GRID: dict[str, list[Any]] = {"bias": [-1.5, -1.4, -1.3, -1.2, -1.1], "role_bias": [0.0, 1.0, 1.4, 1.8, 2.0]}
LOCOMO_GOAL = 5.8  # paper: ~5.8 turns per segment on LoCoMo
LOCOMO_MEAN_RANGE = (5.0, 7.0)
LOCOMO_PER_CONV = (4.0, 9.0)
ABLATIONS: dict[str, dict[str, Any]] = {
    "no_role_prior": {"role_bias": 0.0},
    "surprise_reference_max": {"surprise.reference": "max"},
    "robust_window_64": {"surprise.robust_window": 64},
    "authors_bias": {"bias": -1.1},
}
REPORT_KEYS = ("windowdiff", "pk", "f1", "f1_tol1", "mean_segment_len", "windowdiff_se")


def with_overrides(base: SegmenterConfig, over: dict[str, Any]) -> SegmenterConfig:
    """A copy of ``base`` with dotted-key overrides applied (validated)."""
    data = base.model_dump()
    for key, value in over.items():
        node = data
        *path, last = key.split(".")
        for p in path:
            node = node[p]
        node[last] = value
    return SegmenterConfig.model_validate(data)


def embed_cached(embedder: Any, texts: list[str], cache_dir: Path | None, tag: str) -> np.ndarray:
    """``embedder.encode(texts)`` in one call, cached on disk by a hash of model and texts."""
    h = hashlib.sha256((getattr(embedder, "name", "?") + "\x00" + "\x00".join(texts)).encode()).hexdigest()[:16]
    path = cache_dir / f"{tag}-{h}.npy" if cache_dir else None
    if path and path.exists():
        return np.load(path)
    vecs = np.asarray(embedder.encode(texts), dtype=np.float32)
    if path:
        path.parent.mkdir(parents=True, exist_ok=True)
        np.save(path, vecs)
    return vecs


def load_locomo(path: Path) -> list[Conversation]:
    """LoCoMo conversations through the project's adapter."""
    from lychee_ray.io.adapters import read_locomo

    return [it.conversation for it in read_locomo(path) if it.conversation is not None]


def locomo_lengths(convs: Sequence[Conversation], vecs: Sequence[np.ndarray], cfg: SegmenterConfig, encoding: str) -> dict[str, Any]:
    """Mean turns per segment, per conversation and overall (each conversation starts cold)."""
    per: dict[str, float] = {}
    turns = segs = 0
    for conv, v in zip(convs, vecs):
        res = segment_conversation(conv, cfg=cfg, turn_vectors=v, encoding=encoding)
        per[conv.conversation_id] = round(conv.num_turns / len(res.segments), 3)
        turns += conv.num_turns
        segs += len(res.segments)
    return {"mean_turns_per_segment": round(turns / segs, 3), "per_conversation": per}


def subset(dialogues: list[SegDialogue], vectors: np.ndarray, idx: list[int]) -> tuple[list[SegDialogue], np.ndarray]:
    """Dialogues ``idx`` and their utterance vectors (corpus order kept)."""
    starts = np.cumsum([0] + [len(d.utterances) for d in dialogues])
    rows = np.concatenate([np.arange(starts[i], starts[i + 1]) for i in idx])
    return [dialogues[i] for i in idx], vectors[rows]


def feasible(loc: dict[str, Any]) -> bool:
    """The cost-model constraint on LoCoMo granularity."""
    lo, hi = LOCOMO_MEAN_RANGE
    plo, phi_ = LOCOMO_PER_CONV
    return lo <= loc["mean_turns_per_segment"] <= hi and all(plo <= v <= phi_ for v in loc["per_conversation"].values())


def pick(rows: list[dict[str, Any]], corpus: str) -> dict[str, Any]:
    """One-standard-error rule on ``corpus``'s WindowDiff, then closest to 5.8 on LoCoMo, then smaller role_bias."""
    ok = [r for r in rows if r["feasible"]] or rows
    top = min(ok, key=lambda r: r[corpus]["windowdiff"])
    band = top[corpus]["windowdiff"] + top[corpus]["windowdiff_se"]
    near = [r for r in ok if r[corpus]["windowdiff"] <= band]
    best = min(near, key=lambda r: (abs(r["locomo"]["mean_turns_per_segment"] - LOCOMO_GOAL), r["overrides"]["role_bias"]))
    return {"overrides": best["overrides"], "best_windowdiff": top[corpus]["windowdiff"], "band": round(band, 4), "candidates_in_band": len(near)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tiage", default=str(DATA / "segmentation" / "tiage.json"))
    ap.add_argument("--superdialseg", default=str(DATA / "segmentation" / "superdialseg_validation.json"))
    ap.add_argument("--locomo", default=str(DATA / "locomo"))
    ap.add_argument("--out", required=True)
    ap.add_argument("--cache-dir", help="keep embeddings here between runs")
    ap.add_argument("--config", action="append", default=[], help="base config file(s) (default: configs/default.yaml)")
    args = ap.parse_args(argv)

    cfg_all = load_config(files=args.config)
    base, enc = cfg_all.segmenter, cfg_all.tokenizer.encoding
    from lychee_ray.embed import get_embedder

    embedder = get_embedder(cfg_all.embedding, cfg_all.llm)
    cache = Path(args.cache_dir) if args.cache_dir else None
    t0 = time.perf_counter()
    tiage = load_seg_corpus(args.tiage)
    tv = embed_cached(embedder, [u for d in tiage for u in d.utterances], cache, "tiage")
    sds = load_seg_corpus(args.superdialseg)
    sv = embed_cached(embedder, [u for d in sds for u in d.utterances], cache, "superdialseg")
    convs = load_locomo(Path(args.locomo))
    lv_all = embed_cached(embedder, [turn_embedding_text(t) for c in convs for *_, t in c.iter_turns()], cache, "locomo")
    bounds = np.cumsum([0] + [c.num_turns for c in convs])
    lv = [lv_all[bounds[i] : bounds[i + 1]] for i in range(len(convs))]
    print(f"embedded in {time.perf_counter() - t0:.1f}s", file=sys.stderr)
    corpora = {
        "tiage_train": subset(tiage, tv, [i for i, d in enumerate(tiage) if d.subset == "train"]),
        "tiage_test": subset(tiage, tv, [i for i, d in enumerate(tiage) if d.subset == "test"]),
        "superdialseg": (sds, sv),
    }

    def lychee(name: str, cfg: SegmenterConfig) -> dict[str, float]:
        d, v = corpora[name]
        return evaluate_dialogues(d, v, cfg, encoding=enc, baselines=False)["lychee"]

    # TIAGE and LoCoMo have no user/agent roles: role_bias cannot change them, so they are run per bias.
    per_bias = {b: {"tiage_train": lychee("tiage_train", with_overrides(base, {"bias": b})),
                    "locomo": locomo_lengths(convs, lv, with_overrides(base, {"bias": b}), enc)} for b in GRID["bias"]}
    rows = []
    for b, rb in itertools.product(GRID["bias"], GRID["role_bias"]):
        over = {"bias": b, "role_bias": rb}
        row = {"overrides": over, **per_bias[b], "superdialseg": lychee("superdialseg", with_overrides(base, over))}
        row["feasible"] = feasible(row["locomo"])
        rows.append(row)
        print(f"{over} TIAGE-train WD {row['tiage_train']['windowdiff']:.3f} SDS WD {row['superdialseg']['windowdiff']:.3f} "
              f"LoCoMo {row['locomo']['mean_turns_per_segment']:.2f} {'*' if row['feasible'] else ' '}", file=sys.stderr)

    def report(cfg: SegmenterConfig) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name in ("tiage_test", "superdialseg"):
            d, v = corpora[name]
            r = evaluate_dialogues(d, v, cfg, encoding=enc)
            out[name] = {k: r[k] for k in ("lychee", "fixed_window", "no_boundary", "texttiling_oracle", "gold_mean_segment_len", "exchange_mode")}
        out["locomo"] = locomo_lengths(convs, lv, cfg, enc)
        return out

    directions = {"tiage_to_superdialseg": pick(rows, "tiage_train"), "superdialseg_to_tiage": pick(rows, "superdialseg")}
    for sel in directions.values():
        sel["report"] = report(with_overrides(base, sel["overrides"]))
    result: dict[str, Any] = {
        "embedding_model": getattr(embedder, "name", "?"),
        "python": platform.python_version(),
        "base_config": base.model_dump(mode="json"),
        "selection": {"grid": GRID, "locomo_mean_range": LOCOMO_MEAN_RANGE, "locomo_per_conversation_range": LOCOMO_PER_CONV,
                      "rule": "feasible; calibration WindowDiff within 1 SE of the best; closest to 5.8 on LoCoMo; smaller role_bias"},
        "grid": rows,
        "directions": directions,
        "defaults": report(base),
        "ablations": {name: {"overrides": over, **report(with_overrides(base, over))} for name, over in ABLATIONS.items()},
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(table(result))
    return 0


def _row(label: str, rep: dict[str, Any]) -> str:
    cells = []
    for name in ("tiage_test", "superdialseg"):
        r = rep[name]
        cells.append(f"{r['lychee']['windowdiff']:.3f} / {r['lychee']['pk']:.3f} ({r['lychee']['mean_segment_len']:.2f}) | "
                     f"{r['fixed_window']['windowdiff']:.3f} ({r['fixed_window']['window']}) | {r['no_boundary']['windowdiff']:.3f} | "
                     f"{r['texttiling_oracle']['windowdiff']:.3f}")
    return f"| {label} | " + " | ".join(cells) + f" | {rep['locomo']['mean_turns_per_segment']:.2f} |"


def table(result: dict[str, Any]) -> str:
    """Markdown table: lychee WD / Pk (mean length) | fixed WD (window) | no boundary | oracle TextTiling, per corpus."""
    head = ("| configuration | TIAGE test: lychee WD / Pk (len) | fixed (w) | none | TT oracle "
            "| SuperDialseg: lychee WD / Pk (len) | fixed (w) | none | TT oracle | LoCoMo turns/seg |\n|" + "---|" * 10)
    lines = [head, _row("defaults", result["defaults"])]
    for name, sel in result["directions"].items():
        lines.append(_row(f"{name} {sel['overrides']}", sel["report"]))
    for name, ab in result["ablations"].items():
        lines.append(_row(f"ablation {name}", ab))
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
