"""Fit the segmenter's decision weights on TIAGE train + SuperDialseg validation together (issue 29).

    python benchmarks/fit_segmenter_cues.py --out benchmarks/results/segmenter_cues_fit.json --cache-dir /tmp/segcache29

The decision stays the online p_t threshold (docs/segmenter.md §1); what is fitted is the weight of each
input of its logit: the calibrated surprise phi, the cohesion drop D, the pressures L and N, the role
prior r (role mode), and the surface cues Q (the unit opens with a question), A (the previous unit ended
with one) and X (lexical novelty against the open segment's recent units).

Procedure (TIAGE test is never read; SuperDialseg validation is a fitting corpus, as the issue says):
1. Trace: run the segmenter (base configuration) over both corpora under eval-seg's protocol and record,
   for every semantic decision, its inputs and whether a gold segment starts at that unit.
2. Logistic regression (IRLS, small L2) of the gold label on the inputs, each corpus weighted equally
   (SuperDialseg has 4x TIAGE train's decisions). The coefficients become the weights; the intercept b.
   Refit once on the trace of the fitted configuration (the open segment, hence D, N and X, follows the
   segmenter's own cuts).
3. The logistic intercept gives calibrated probabilities, not the WindowDiff-optimal cut rate: one offset
   of b (grid ``BIAS_OFFSETS``) and one pressure setting (``PRESSURES``, each with its own fit) are chosen
   on the mean WindowDiff of the two fitting corpora among those that keep LoCoMo within 5-7 turns per
   segment (every conversation within 4-9), by the one-SE rule of :func:`choose`.
Writes the weights, the fit trace and the fitting-corpus figures as JSON; copy the weights into
configs/default.yaml (segmenter: bias, role_bias, w_*, cues.w_*, the chosen pressure setting).

``--report`` skips the fit and evaluates the configuration as it stands (configs/default.yaml plus any
``--config``) on TIAGE test and SuperDialseg validation (the eval-seg report: every reference with paired
95 % intervals) and on LoCoMo (turns per segment), and checks the issue's gate:

    python benchmarks/fit_segmenter_cues.py --report --out benchmarks/results/segmenter_report.json --cache-dir /tmp/segcache29
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from calibrate_segmenter import (  # noqa: E402
    LOCOMO_GOAL,
    corpus_arguments,
    embedded_corpora,
    feasible,
    locomo_lengths,
    subset,
    with_overrides,
)

from lychee_ray.ingest.segment import make_segmenter  # noqa: E402
from lychee_ray.config import SegmenterConfig, load_config  # noqa: E402
from lychee_ray.eval.runners.segmentation import (  # noqa: E402
    SegDialogue,
    dialogue_turn_inputs,
    eval_exchange_mode,
    evaluate_dialogues,
)

# Logit inputs in trace order and the config key each coefficient is written to.
FEATURES: dict[str, str] = {
    "phi": "w_surprise",
    "cohesion": "w_cohesion",
    "length_pressure": "w_length",
    "count_pressure": "w_count",
    "role": "role_bias",
    "question": "cues.w_question",
    "answer": "cues.w_answer",
    "lexical_novelty": "cues.w_lexical",
}
# The pressures are the cost model's prior on segment size, not evidence of a topic shift: the fitting
# dialogues (12-15 utterances) cannot identify them (a free fit even makes the count pressure negative,
# which lets LoCoMo's 300-turn conversations run into 12-turn segments). They enter the fit as a fixed
# offset with the base configuration's weights.
FIXED = ("length_pressure", "count_pressure")
L2 = 1e-3  # ridge on the coefficients (not the intercept): keeps IRLS stable when a cue is constant in a corpus
BIAS_OFFSETS = [round(x, 2) for x in np.arange(-0.7, 0.51, 0.1)]
# The pressures are the cost model's lever on long conversations (LoCoMo, 300+ turns of ~25 tokens), where
# the surface cues make cuts rarer than in the short fitting dialogues: at the bias the fitting corpora
# prefer, LoCoMo segments run to 8-9 turns. A segment's size in tokens is what an encoder call costs, so the
# length pressure (not a per-corpus constant) is what may tighten there; a few settings are tried, each with
# its own fit and bias sweep. The first is issue 20's.
PRESSURES: list[dict[str, float]] = [
    {"length_pressure.scale": 1024.0},
    {"length_pressure.scale": 256.0},
    {"length_pressure.scale": 128.0},
    {"length_pressure.scale": 128.0, "count_pressure.start": 6.0, "w_count": 1.0},
]
# The first trace is taken with issue 20's decision (embedding signals only), whatever configs/default.yaml
# says now, so that the fit does not depend on its own earlier output.
START: dict[str, Any] = {
    "bias": -1.3, "role_bias": 1.8, "w_surprise": 0.65, "w_cohesion": 0.45, "w_length": 0.9, "w_count": 0.3,
    "length_pressure.scale": 1024.0, "count_pressure.start": 2.0,
    "cues.w_question": 0.0, "cues.w_answer": 0.0, "cues.w_lexical": 0.0,
}
REFITS = 2  # fit on the base trace, then once more on the fitted configuration's own trace


def trace(dialogues: list[SegDialogue], vectors: np.ndarray, cfg: SegmenterConfig, enc: str) -> tuple[np.ndarray, np.ndarray]:
    """Inputs of every semantic decision and its gold label (a gold segment starts at the unit)."""
    turns = dialogue_turn_inputs(dialogues, vectors, enc)
    seg = make_segmenter(cfg, mode=eval_exchange_mode(dialogues), encoding=enc)
    rows: list[list[float]] = []
    labels: list[int] = []
    for d, tl in zip(dialogues, turns):
        seg.decisions = []
        seg.push_turns(tl)
        seg.new_stream()
        starts = set(np.cumsum([0, *d.segments])[:-1].tolist())
        for dec in seg.decisions:
            if dec.reason not in ("append", "semantic") or dec.p is None:
                continue  # forced cuts (start, cap, session) and units without signal carry no decision
            first = int(dec.turn_ids[0].rsplit(":", 1)[1])
            rows.append([
                dec.phi or 0.0,
                min(cfg.cohesion_max, (dec.cohesion_drop or 0.0) / cfg.cohesion_scale),
                dec.length_pressure or 0.0,
                dec.count_pressure or 0.0,
                1.0 if (dec.prior or 0.0) != 0.0 else 0.0,  # the role prior's indicator
                dec.question or 0.0,
                dec.answer or 0.0,
                dec.lexical_novelty or 0.0,
            ])
            labels.append(1 if first in starts else 0)
    return np.asarray(rows, dtype=np.float64), np.asarray(labels, dtype=np.float64)


def logistic_irls(
    x: np.ndarray, y: np.ndarray, w: np.ndarray, offset: np.ndarray, l2: float = L2, iters: int = 50
) -> tuple[float, np.ndarray]:
    """Weighted L2-regularised logistic regression (with a fixed logit offset) by Newton steps.

    Returns (intercept, coefficients).
    """
    xa = np.hstack([np.ones((len(x), 1)), x])
    beta = np.zeros(xa.shape[1])
    reg = np.full(xa.shape[1], l2 * w.sum())
    reg[0] = 0.0
    for _ in range(iters):
        p = 1.0 / (1.0 + np.exp(-(xa @ beta + offset)))
        grad = xa.T @ (w * (p - y)) + reg * beta
        hess = (xa * (w * p * (1 - p))[:, None]).T @ xa + np.diag(reg) + 1e-9 * np.eye(len(beta))
        step = np.linalg.solve(hess, grad)
        beta -= step
        if np.max(np.abs(step)) < 1e-8:
            break
    return float(beta[0]), beta[1:]


def auc(score: np.ndarray, y: np.ndarray) -> float:
    """Area under the ROC curve (rank statistic, ties averaged)."""
    order = np.argsort(score, kind="mergesort")
    ranks = np.empty(len(score))
    s = score[order]
    i = 0
    while i < len(s):
        j = i
        while j + 1 < len(s) and s[j + 1] == s[i]:
            j += 1
        ranks[order[i : j + 1]] = (i + j) / 2 + 1
        i = j + 1
    pos = y == 1
    n1, n0 = pos.sum(), (~pos).sum()
    return float((ranks[pos].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))


def overrides_from(intercept: float, coef: np.ndarray) -> dict[str, float]:
    """Config overrides for a fitted logit over the FITTED features (rounded to what the YAML documents)."""
    out = {"bias": round(intercept, 2)}
    for key, c in zip((FEATURES[f] for f in FITTED), coef):
        out[key] = round(float(c), 2)
    return out


FITTED = tuple(f for f in FEATURES if f not in FIXED)
FEATURES_INDEX = {f: j for j, f in enumerate(FEATURES)}


def fit_and_sweep(cfg0: SegmenterConfig, pressure: dict[str, float], fit: dict[str, tuple[list[SegDialogue], np.ndarray]],
                  convs: list[Any], lv: list[np.ndarray], enc: str) -> dict[str, Any]:
    """Fit the weights under one pressure setting (REFITS rounds), then sweep the bias offset."""
    cfg = cfg0
    rounds: list[dict[str, Any]] = []
    for r in range(REFITS):
        xs, ys, ws = [], [], []
        for name, (d, v) in fit.items():
            x, y = trace(d, v, cfg, enc)
            xs.append(x), ys.append(y), ws.append(np.full(len(y), 1.0 / len(y)))
        x, y, w = np.vstack(xs), np.concatenate(ys), np.concatenate(ws)
        fi = [list(FEATURES).index(f) for f in FITTED]
        xi_fixed = [list(FEATURES).index(f) for f in FIXED]
        dumped = cfg.model_dump()
        fixed_w = np.array([float(dumped[FEATURES[f]]) for f in FIXED])
        b, coef = logistic_irls(x[:, fi], y, w, x[:, xi_fixed] @ fixed_w)
        over = {**pressure, **overrides_from(b, coef)}
        aucs = {name: round(auc(xi[:, fi] @ coef + xi[:, xi_fixed] @ fixed_w, yi), 4) for name, xi, yi in zip(fit, xs, ys)}
        # Each input alone (the sign-free AUC, max(a, 1 - a)): what a cue is worth before the combination.
        single = {name: {f: round(max(a, 1 - a), 4) for f, a in ((f, auc(xi[:, j], yi)) for j, f in enumerate(FEATURES))
                         if np.ptp(xi[:, FEATURES_INDEX[f]]) > 0} for name, xi, yi in zip(fit, xs, ys)}
        rounds.append({"single_auc": single, "decisions": {n: len(yi) for n, yi in zip(fit, ys)}, "boundary_rate": {n: round(float(yi.mean()), 4) for n, yi in zip(fit, ys)},
                       "intercept": round(b, 4), "coefficients": {k: round(float(c), 4) for k, c in zip(FITTED, coef)},
                       "fixed": {k: float(v) for k, v in zip(FIXED, fixed_w)}, "auc": aucs})
        print(f"{pressure} round {r}: {over} AUC {aucs}", file=sys.stderr)
        cfg = with_overrides(cfg0, over)
    fitted = {**pressure, **overrides_from(rounds[-1]["intercept"], np.array(list(rounds[-1]["coefficients"].values())))}
    sweep = []
    for off in BIAS_OFFSETS:
        over = {**fitted, "bias": round(fitted["bias"] + off, 2)}
        c = with_overrides(cfg0, over)
        row: dict[str, Any] = {"overrides": over}
        for name, (d, v) in fit.items():
            lr = evaluate_dialogues(d, v, c, encoding=enc, baselines=False)["lychee"]
            row[name] = {k: lr[k] for k in ("windowdiff", "pk", "mean_segment_len", "windowdiff_se")}
        row["mean_windowdiff"] = round((row["tiage_train"]["windowdiff"] + row["superdialseg"]["windowdiff"]) / 2, 4)
        row["locomo"] = locomo_lengths(convs, lv, c, enc)
        row["feasible"] = feasible(row["locomo"])
        sweep.append(row)
        print(f"  bias {c.bias:+.2f}: TIAGE train {row['tiage_train']['windowdiff']:.4f} ({row['tiage_train']['mean_segment_len']:.2f}) "
              f"SDS {row['superdialseg']['windowdiff']:.4f} mean {row['mean_windowdiff']:.4f} "
              f"LoCoMo {row['locomo']['mean_turns_per_segment']:.2f} {'*' if row['feasible'] else ''}", file=sys.stderr)
    return {"pressure": pressure, "rounds": rounds, "bias_sweep": sweep}


def choose(rows: list[dict[str, Any]]) -> tuple[dict[str, Any], float]:
    """The project's one-standard-error rule (as in calibrate_segmenter.pick): among LoCoMo-feasible rows,
    those whose mean WindowDiff is within one SE of the best (SE of the two-corpus mean), then the one
    closest to the paper's 5.8 LoCoMo turns per segment. Adjacent biases differ by less than the noise, so
    the minimum alone would pick noise; the cost model breaks the tie."""
    ok = [r for r in rows if r["feasible"]] or rows
    top = min(ok, key=lambda r: r["mean_windowdiff"])
    se = float(np.hypot(top["tiage_train"]["windowdiff_se"], top["superdialseg"]["windowdiff_se"]) / 2)
    band = round(top["mean_windowdiff"] + se, 4)
    near = [r for r in ok if r["mean_windowdiff"] <= band]
    return min(near, key=lambda r: abs(r["locomo"]["mean_turns_per_segment"] - LOCOMO_GOAL)), band


GATE_NO_BOUNDARY_TIAGE = 0.03  # the issue: on TIAGE test at least this much below no-boundary


def gate(reports: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The issue's gate: on both corpora lychee's WindowDiff is below the matched fixed window, no boundary and
    standard TextTiling with the whole paired 95 % interval below 0; on TIAGE test >= 0.03 below no boundary."""
    checks: dict[str, bool] = {}
    for corpus, rep in reports.items():
        for ref in ("fixed_window", "no_boundary", "texttiling"):
            checks[f"{corpus}: below {ref} (paired 95% CI < 0)"] = rep["paired"][ref]["windowdiff"]["ci95_high"] < 0
    d = reports["tiage_test"]["paired"]["no_boundary"]["windowdiff"]["mean"]
    checks[f"tiage_test: >= {GATE_NO_BOUNDARY_TIAGE} below no_boundary"] = d <= -GATE_NO_BOUNDARY_TIAGE
    return {"checks": checks, "met": all(checks.values())}


def report(cfg: SegmenterConfig, enc: str, tiage: list[SegDialogue], tv: np.ndarray, sds: list[SegDialogue], sv: np.ndarray,
           convs: list[Any], lv: list[np.ndarray], out: Path) -> int:
    """Evaluate ``cfg`` on the reported corpora and LoCoMo; write JSON and print the summaries."""
    from lychee_ray.eval.runners.segmentation import format_report

    corpora = {"tiage_test": subset(tiage, tv, [i for i, d in enumerate(tiage) if d.subset == "test"]), "superdialseg": (sds, sv)}
    reports = {name: evaluate_dialogues(d, v, cfg, encoding=enc) for name, (d, v) in corpora.items()}
    loc = locomo_lengths(convs, lv, cfg, enc)
    result = {"config": cfg.model_dump(mode="json"), **reports, "locomo": {**loc, "feasible": feasible(loc)}, "gate": gate(reports)}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    for name, rep in reports.items():
        print(f"== {name}\n{format_report(rep)}")
    print(f"== LoCoMo: {loc['mean_turns_per_segment']:.2f} turns/segment (per conversation "
          f"{min(loc['per_conversation'].values()):.2f}-{max(loc['per_conversation'].values()):.2f})")
    for k, ok in result["gate"]["checks"].items():
        print(f"{'PASS' if ok else 'FAIL'}  {k}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = corpus_arguments(__doc__)
    ap.add_argument("--report", action="store_true", help="no fit: report the configuration on TIAGE test, SuperDialseg and LoCoMo")
    args = ap.parse_args(argv)

    cfg_all = load_config(files=args.config)
    base, enc = cfg_all.segmenter, cfg_all.tokenizer.encoding
    corpora = embedded_corpora(args, cfg_all)
    _, tiage, tv, sds, sv, convs, lv = corpora
    if args.report:
        return report(base, enc, tiage, tv, sds, sv, convs, lv, Path(args.out))
    # Fitting corpora only: TIAGE train and SuperDialseg validation (TIAGE test is not used for the fit).
    fit = {
        "tiage_train": subset(tiage, tv, [i for i, d in enumerate(tiage) if d.subset == "train"]),
        "superdialseg": (sds, sv),
    }

    start = with_overrides(base, START)
    settings = [fit_and_sweep(with_overrides(start, p), p, fit, convs, lv, enc) for p in PRESSURES]
    best, band = choose([r for st in settings for r in st["bias_sweep"]])
    weights = best["overrides"]
    result = {
        "embedding_model": corpora.embedding_model,
        "features": FEATURES, "fixed": FIXED,
        "l2": L2,
        "settings": settings,
        "chosen": {"weights": weights, "rule": "LoCoMo-feasible; mean WindowDiff of TIAGE train and SuperDialseg within one "
                   "SE of the best; closest to 5.8 LoCoMo turns per segment", "band": band, "row": best},
        "base_config": base.model_dump(mode="json"),
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(weights))
    return 0


if __name__ == "__main__":
    sys.exit(main())
