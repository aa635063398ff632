"""Cross-corpus calibration of the segmenter (docs/segmenter.md §5) and every figure, as JSON + a table.

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
4. Report both picks on TIAGE test, SuperDialseg and LoCoMo against the matched fixed window, no boundary,
   standard TextTiling and oracle-count TextTiling, plus a few ablations of the chosen configuration.
5. Paired per-dialogue WindowDiff differences of the defaults against each reference, the defaults started
   cold in every dialogue, and a one-step sensitivity sweep of the remaining knobs (``SENSITIVITY``).
6. Diagnostics of what the oracle's count is worth (``count_diagnostics``): TextTiling with one threshold for
   the whole corpus set at the gold boundary rate, an online one-sided surprise told each dialogue's count,
   and content-free boundaries (evenly spaced / random) told the count.
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
from typing import Any, NamedTuple

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lychee_ray.ingest.segment import segment_conversation, turn_embedding_text
from lychee_ray.config import SegmenterConfig, load_config
from lychee_ray.core.conversation import Conversation
from lychee_ray.eval.baselines.texttiling import depth_scores, gap_coherence, texttiling_hearst, texttiling_oracle
from lychee_ray.eval.metrics.segmentation import boundary_string, evaluate_corpus, window_k, windowdiff
from lychee_ray.eval.runners.segmentation import (
    SegDialogue,
    dialogue_turn_inputs,
    eval_exchange_mode,
    evaluate_dialogues,
    load_seg_corpus,
    segment_dialogues,
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
SENSITIVITY: list[dict[str, Any]] = [
    {"trajectory_window": 1}, {"trajectory_window": 3}, {"w_cohesion": 0.0}, {"w_cohesion": 0.9},
    {"surprise.robust_weight": 1.2}, {"surprise.robust_weight": 2.0}, {"count_pressure.start": 4.0},
    {"count_pressure.scale": 4.0}, {"centering_prior": 50.0}, {"surprise.center": 0.7}, {"surprise.center": 0.9},
]
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


def _lengths(n: int, gaps: Sequence[int]) -> list[int]:
    cuts = [-1, *sorted(int(g) for g in gaps), n - 1]
    return [b - a for a, b in zip(cuts, cuts[1:])]


def _centred_stream(v: np.ndarray, prior: float) -> np.ndarray:
    """Unit vectors centred on the running mean of the units before them (the segmenter's centring, carried
    across dialogues as in eval-seg's protocol)."""
    v = v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)
    before = np.vstack([np.zeros((1, v.shape[1])), np.cumsum(v, axis=0)[:-1]])
    c = v - before / (np.arange(len(v))[:, None] + prior)
    return c / np.maximum(np.linalg.norm(c, axis=1, keepdims=True), 1e-12)


def _online_surprise(c: np.ndarray, window: int) -> np.ndarray:
    """Per gap, 1 - cos(next unit, mean of the ``window`` units before it): one-sided, no segment state."""
    out = np.zeros(max(0, len(c) - 1))
    for i in range(len(out)):
        h = c[max(0, i + 1 - window) : i + 1].sum(axis=0)
        out[i] = 1.0 - float(c[i + 1] @ h) / max(float(np.linalg.norm(h)), 1e-12)
    return out


def count_diagnostics(dialogues: Sequence[SegDialogue], vectors: np.ndarray, cfg: SegmenterConfig, seeds: int = 20) -> dict[str, Any]:
    """What knowing each dialogue's true boundary count is worth (utterance units; docs/segmenter.md §5.5).

    The online surprise uses the segmenter's centring (running mean over the corpus in file order, prior
    ``cfg.centering_prior``) and trajectory window.
    """
    starts = np.cumsum([0] + [len(d.utterances) for d in dialogues])
    vs = [np.asarray(vectors[starts[i] : starts[i + 1]], dtype=np.float64) for i in range(len(dialogues))]
    gold = [d.segments for d in dialogues]
    counts = [min(len(g) - 1, len(v) - 1) for g, v in zip(gold, vs)]
    rate = sum(counts) / max(1, sum(len(v) - 1 for v in vs))

    def top(score: np.ndarray, m: int, n: int) -> list[int]:
        return _lengths(n, np.argsort(-score, kind="stable")[:m].tolist()) if m > 0 else [n]

    depth = [depth_scores(gap_coherence(v)) for v in vs]
    thr = float(np.quantile(np.concatenate(depth), 1.0 - rate)) if rate > 0 else np.inf
    centred = _centred_stream(np.asarray(vectors, dtype=np.float64), cfg.centering_prior)
    online = [_online_surprise(centred[starts[i] : starts[i + 1]], cfg.trajectory_window) for i in range(len(vs))]
    rng = np.random.default_rng(0)
    rand = [evaluate_corpus(gold, [_lengths(len(v), rng.choice(len(v) - 1, m, replace=False).tolist()) for v, m in zip(vs, counts)])["windowdiff"]
            for _ in range(seeds)]
    hyps = {
        "texttiling_told_count": [texttiling_oracle(v, m) for v, m in zip(vs, counts)],
        "texttiling_told_corpus_rate": [_lengths(len(v), np.flatnonzero(d > thr).tolist()) for v, d in zip(vs, depth)],
        "online_surprise_told_count": [top(s, m, len(v)) for v, s, m in zip(vs, online, counts)],
        "evenly_spaced_told_count": [_lengths(len(v), np.round(np.arange(1, m + 1) * len(v) / (m + 1)).astype(int) - 1) if m else [len(v)]
                                     for v, m in zip(vs, counts)],
    }
    out: dict[str, Any] = {k: {m: round(r[m], 4) for m in ("windowdiff", "pk", "windowdiff_se", "mean_segment_len")}
                           for k, r in ((k, evaluate_corpus(gold, h)) for k, h in hyps.items())}
    out["random_positions_told_count"] = {"windowdiff": round(float(np.mean(rand)), 4), "sd_over_seeds": round(float(np.std(rand)), 4), "seeds": seeds}
    return out


def paired_differences(dialogues: Sequence[SegDialogue], vectors: np.ndarray, cfg: SegmenterConfig, encoding: str) -> dict[str, Any]:
    """Per-dialogue WindowDiff of lychee minus each reference: mean and paired standard error."""
    turns = dialogue_turn_inputs(dialogues, vectors, encoding)
    gold = [d.segments for d in dialogues]
    hyp = segment_dialogues(turns, cfg, mode=eval_exchange_mode(dialogues), encoding=encoding)
    window = max(1, round(sum(map(sum, hyp)) / sum(map(len, hyp))))
    starts = np.cumsum([0] + [len(d.utterances) for d in dialogues])
    vs = [vectors[starts[i] : starts[i + 1]] for i in range(len(dialogues))]
    refs = {
        "fixed_window": segment_dialogues(turns, cfg.model_copy(update={"method": "fixed", "fixed_window": window}), mode="turn", encoding=encoding),
        "texttiling": [texttiling_hearst(v) for v in vs],
        "texttiling_oracle": [texttiling_oracle(v, len(g) - 1) for v, g in zip(vs, gold)],
    }

    def wd(h: list[list[int]]) -> np.ndarray:
        return np.array([windowdiff(boundary_string(g), boundary_string(x), window_k(g)) for g, x in zip(gold, h)])

    own = wd(hyp)
    out = {}
    for name, h in refs.items():
        diff = own - wd(h)
        out[name] = {"mean": round(float(diff.mean()), 4), "paired_se": round(float(diff.std(ddof=1) / np.sqrt(len(diff))), 4)}
    return out


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


def corpus_arguments(doc: str | None) -> argparse.ArgumentParser:
    """The arguments every segmenter fitting script takes: the three corpora, output, cache, config."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tiage", default=str(DATA / "segmentation" / "tiage.json"))
    ap.add_argument("--superdialseg", default=str(DATA / "segmentation" / "superdialseg_validation.json"))
    ap.add_argument("--locomo", default=str(DATA / "locomo"))
    ap.add_argument("--out", required=True)
    ap.add_argument("--cache-dir", help="keep embeddings here between runs")
    ap.add_argument("--config", action="append", default=[], help="base config file(s) (default: configs/default.yaml)")
    return ap


class Corpora(NamedTuple):
    """The three corpora the segmenter is fitted and checked on, with their vectors."""

    embedding_model: str
    tiage: list[SegDialogue]
    tiage_vectors: np.ndarray
    superdialseg: list[SegDialogue]
    superdialseg_vectors: np.ndarray
    locomo: list[Conversation]
    locomo_vectors: list[np.ndarray]  # one array per conversation


def embedded_corpora(args: argparse.Namespace, cfg_all: Any) -> Corpora:
    """TIAGE, SuperDialseg and LoCoMo (``args.tiage`` / ``superdialseg`` / ``locomo``) with their
    embeddings (cached under ``args.cache_dir``)."""
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
    return Corpora(getattr(embedder, "name", "?"), tiage, tv, sds, sv, convs, lv)


def main(argv: list[str] | None = None) -> int:
    ap = corpus_arguments(__doc__)
    args = ap.parse_args(argv)

    cfg_all = load_config(files=args.config)
    base, enc = cfg_all.segmenter, cfg_all.tokenizer.encoding
    corpora = embedded_corpora(args, cfg_all)
    _, tiage, tv, sds, sv, convs, lv = corpora
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
            out[name] = {k: r[k] for k in ("lychee", "fixed_window", "no_boundary", "texttiling", "texttiling_oracle", "gold_mean_segment_len", "exchange_mode")}
        out["locomo"] = locomo_lengths(convs, lv, cfg, enc)
        return out

    directions = {"tiage_to_superdialseg": pick(rows, "tiage_train"), "superdialseg_to_tiage": pick(rows, "superdialseg")}
    for sel in directions.values():
        sel["report"] = report(with_overrides(base, sel["overrides"]))
    result: dict[str, Any] = {
        "embedding_model": corpora.embedding_model,
        "python": platform.python_version(),
        "base_config": base.model_dump(mode="json"),
        "selection": {"grid": GRID, "locomo_mean_range": LOCOMO_MEAN_RANGE, "locomo_per_conversation_range": LOCOMO_PER_CONV,
                      "rule": "feasible; calibration WindowDiff within 1 SE of the best; closest to 5.8 on LoCoMo; smaller role_bias"},
        "grid": rows,
        "directions": directions,
        "defaults": report(base),
        "ablations": {name: {"overrides": over, **report(with_overrides(base, over))} for name, over in ABLATIONS.items()},
        "paired_vs_references": {name: paired_differences(*corpora[name], base, enc) for name in ("tiage_test", "superdialseg")},
        "cold_start": {name: evaluate_dialogues(*corpora[name], base, reset_background=True, encoding=enc, baselines=False)["lychee"]
                       for name in ("tiage_test", "superdialseg")},
        "sensitivity": [{"overrides": over, **{name: lychee(name, with_overrides(base, over)) for name in corpora}} for over in SENSITIVITY],
        "count_diagnostics": {name: count_diagnostics(*corpora[name], base) for name in ("tiage_test", "superdialseg")},
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
                     f"{r['texttiling']['windowdiff']:.3f} | {r['texttiling_oracle']['windowdiff']:.3f}")
    return f"| {label} | " + " | ".join(cells) + f" | {rep['locomo']['mean_turns_per_segment']:.2f} |"


def table(result: dict[str, Any]) -> str:
    """Markdown tables: lychee WD / Pk (mean length) | fixed WD (window) | no boundary | TextTiling | oracle TextTiling,
    per corpus; then the count diagnostics (WindowDiff)."""
    head = ("| configuration | TIAGE test: lychee WD / Pk (len) | fixed (w) | none | TT | TT oracle "
            "| SuperDialseg: lychee WD / Pk (len) | fixed (w) | none | TT | TT oracle | LoCoMo turns/seg |\n|" + "---|" * 12)
    lines = [head, _row("defaults", result["defaults"])]
    for name, sel in result["directions"].items():
        lines.append(_row(f"{name} {sel['overrides']}", sel["report"]))
    for name, ab in result["ablations"].items():
        lines.append(_row(f"ablation {name}", ab))
    lines += ["", "| sensitivity (WD, mean length) | TIAGE train | TIAGE test | SuperDialseg |", "|---|---|---|---|"]
    for row in result["sensitivity"]:
        lines.append(f"| {row['overrides']} | " + " | ".join(
            f"{row[c]['windowdiff']:.3f} ({row[c]['mean_segment_len']:.2f})" for c in ("tiage_train", "tiage_test", "superdialseg")) + " |")
    lines += ["", "| lychee − reference, WD (paired SE) | TIAGE test | SuperDialseg |", "|---|---|---|"]
    pv = result["paired_vs_references"]
    lines += [f"| {k} | {pv['tiage_test'][k]['mean']:+.3f} ({pv['tiage_test'][k]['paired_se']:.3f}) | "
              f"{pv['superdialseg'][k]['mean']:+.3f} ({pv['superdialseg'][k]['paired_se']:.3f}) |" for k in pv["tiage_test"]]
    diag = result["count_diagnostics"]
    lines += ["", "| count diagnostic (WD) | TIAGE test | SuperDialseg |", "|---|---|---|"]
    lines += [f"| {k} | {diag['tiage_test'][k]['windowdiff']:.3f} | {diag['superdialseg'][k]['windowdiff']:.3f} |" for k in diag["tiage_test"]]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
