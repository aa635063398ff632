"""Leave-one-corpus-out selection of the segmenter's defaults (issue 38; docs/segmenter.md §3).

    python benchmarks/segmenter_loco.py --out benchmarks/results/segmenter_loco.json

Corpora (each a *group*; a group is held out whole):

* ``tiage``        TIAGE, all 500 dialogues (open-domain chit-chat; no roles -> ``turn`` units)
* ``superdialseg`` SuperDialseg validation (document-grounded support; user/agent -> ``role`` units)
* ``locomo``       ``locomo_mix`` (lychee_ray/eval/setup/seg_corpora.py): chunks of LoCoMo *dev* sessions
                   of different conversations, decided in ``pair`` units (as the build does for LoCoMo)
                   and in ``turn`` units (how eval-seg reads a corpus without roles)
* ``tau``          ``tau_mix``: openings of tau-bench airline trajectories of different tasks and users,
                   in ``role`` units (agent logs) and in ``turn`` units

A *design* fixes what the decision may use (the logit's inputs, turn-level placement, the stream
threshold). Fitting a design on a set of groups (:func:`fit_design`): trace the segmenter on every view
of the set, fit the logit's weights by logistic regression (each group weighted equally, one intercept
per view so that the weights do not absorb the corpora's different boundary rates), re-trace with the
fitted weights and fit again, then choose the bias on a grid by the WORST fitting-view margin
(lychee's WindowDiff minus the best of no boundary, the matched fixed window and standard TextTiling)
among biases that keep LoCoMo (all ten conversations, as built) within the cost model's 4-8 turns
per segment. Leave-one-corpus-out (:func:`loco`): fit on all groups but one, score the held-out
group's views, every direction. Designs are compared by their worst held-out margin; the chosen
design fitted on ALL groups gives the defaults. Per-cue effects: the chosen design with one input
removed (or added), refitted the same way, held-out WindowDiff difference per view with a paired
bootstrap 95 % interval over dialogues.

Every number is deterministic given the embeddings (cached under ``--cache-dir``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from calibrate_segmenter import DATA, embed_cached, load_locomo, with_overrides  # noqa: E402
from fit_segmenter_cues import logistic_irls  # noqa: E402

from lychee_ray.ingest.segment import make_segmenter, segment_conversation, turn_embedding_text  # noqa: E402
from lychee_ray.config import SegmenterConfig, load_config  # noqa: E402
from lychee_ray.eval.baselines.texttiling import texttiling_hearst  # noqa: E402
from lychee_ray.eval.metrics.segmentation import (  # noqa: E402
    evaluate_corpus,
    lengths_to_boundaries,
    paired_bootstrap,
    per_dialogue_scores,
)
from lychee_ray.eval.runners.segmentation import (  # noqa: E402
    SegDialogue,
    dialogue_turn_inputs,
    eval_exchange_mode,
    load_seg_corpus,
    segment_dialogues,
)
from lychee_ray.eval.setup.seg_corpora import locomo_mix, tau_mix  # noqa: E402

# view -> (corpus, exchange mode); group -> its views
VIEWS: dict[str, tuple[str, str]] = {
    "tiage": ("tiage", "turn"),
    "superdialseg": ("superdialseg", "role"),
    "locomo_pair": ("locomo_mix", "pair"),
    "locomo_turn": ("locomo_mix", "turn"),
    "tau_role": ("tau_mix", "role"),
    "tau_turn": ("tau_mix", "turn"),
}
GROUPS: dict[str, list[str]] = {
    "tiage": ["tiage"], "superdialseg": ["superdialseg"], "locomo": ["locomo_pair", "locomo_turn"], "tau": ["tau_role", "tau_turn"],
}
REFERENCES = ("no_boundary", "fixed_window", "texttiling")
# Logit inputs as the trace records them, and the config key of each weight.
INPUTS: dict[str, str] = {
    "phi": "w_surprise", "cohesion": "w_cohesion", "role": "role_bias",
    "question": "cues.w_question", "answer": "cues.w_answer", "lexical": "cues.w_lexical", "ahead": "cues.w_ahead",
}
# Where every fit starts (issue 20's embedding decision, no cues; the trace only needs a sane open segment).
# The switches a design may set are pinned here to their issue-29 values (fixed threshold, every cue in
# every mode), so that a design means the same whatever configs/default.yaml holds (it holds the chosen one).
ALL_MODES = ["role", "pair", "turn"]
START: dict[str, Any] = {"bias": -1.3, "role_bias": 1.8, "w_surprise": 0.65, "w_cohesion": 0.45,
                         "cues.w_question": 0.0, "cues.w_answer": 0.0, "cues.w_lexical": 0.0,
                         "calibration.blend": 0.0, "calibration.kind": "quantile", "center_embeddings": True,
                         "cues.question_modes": ALL_MODES, "cues.answer_modes": ALL_MODES, "cues.lexical_modes": ALL_MODES,
                         "cues.question_max_words": 0.0,
                         # LoCoMo as built (the 4-8 turns per segment constraint) in pair units unless a design says otherwise
                         "auto_without_roles": "pair",
                         # no look-ahead unless a design asks for it (it holds every unit until the next one)
                         "cues.w_ahead": 0.0, "cues.ahead_modes": [],
                         # the stream threshold's length prior while the weights are fitted (the grid sets it
                         # afterwards): pinned, so that a fit does not depend on the value the last fit wrote
                         "calibration.segment_turns": 10.0}
REFITS = 2
BIAS_GRID = [-1.0, -0.5, 0.0, 0.5, 1.0]  # offsets from the fitted intercept; then +-0.25 around the best
SEGMENT_TURNS_GRID = [5.0, 6.0, 7.0, 8.0, 10.0]  # the stream threshold's length prior (blend 1), LoCoMo feasibility decides the ends
SPREAD_GRID = [0.5, 1.0, 1.5, 2.0, 2.5, 3.0]  # the robust stream threshold's spread (blend 1, kind robust)
# The question cue's gate: words per turn at most this (the fitting corpora decide; 0 would be no gate).
WORD_GATE_GRID = [16.0, 20.0, 24.0]
LOCOMO_RANGE = (4.0, 8.0)  # the cost model: turns per segment on LoCoMo (mean over the ten conversations)
INFEASIBLE = 1.0  # added to the worst margin of a bias that leaves LoCoMo outside LOCOMO_RANGE

DESIGNS: dict[str, dict[str, Any]] = {
    # issue 29's inputs and decision, re-fitted under this protocol (its held-out behaviour)
    "issue29": {"inputs": ["phi", "cohesion", "role", "question", "answer", "lexical"], "over": {"placement.modes": []}},
    "issue29+placement": {"inputs": ["phi", "cohesion", "role", "question", "answer", "lexical"], "over": {"placement.modes": ["pair"]}},
    "no_question": {"inputs": ["phi", "cohesion", "role", "answer", "lexical"], "over": {"placement.modes": ["pair"]}},
    "embedding+answer": {"inputs": ["phi", "cohesion", "role", "answer"], "over": {"placement.modes": ["pair"]}},
    "embedding": {"inputs": ["phi", "cohesion", "role"], "over": {"placement.modes": ["pair"]}},
    "no_question+turn_placement": {"inputs": ["phi", "cohesion", "role", "answer", "lexical"], "over": {"placement.modes": ["pair", "turn"]}},
    "no_question+stream0.5": {"inputs": ["phi", "cohesion", "role", "answer", "lexical"],
                              "over": {"placement.modes": ["pair"], "calibration.blend": 0.5}},
    "no_question+stream1": {"inputs": ["phi", "cohesion", "role", "answer", "lexical"],
                            "over": {"placement.modes": ["pair"], "calibration.blend": 1.0}},
    "issue29+stream0.5": {"inputs": ["phi", "cohesion", "role", "question", "answer", "lexical"],
                          "over": {"placement.modes": ["pair"], "calibration.blend": 0.5}},
    "embedding+lexical": {"inputs": ["phi", "cohesion", "role", "lexical"], "over": {"placement.modes": ["pair"]}},
    "embedding+lexical+stream1": {"inputs": ["phi", "cohesion", "role", "lexical"], "over": {"placement.modes": ["pair"], "calibration.blend": 1.0}},
    "embedding+lexical+role_answer+stream1": {"inputs": ["phi", "cohesion", "role", "lexical", "answer"],
                                              "over": {"placement.modes": ["pair"], "calibration.blend": 1.0, "cues.answer_modes": ["role"]}},
    "embedding+lexical+role_answer+stream0.5": {"inputs": ["phi", "cohesion", "role", "lexical", "answer"],
                                                "over": {"placement.modes": ["pair"], "calibration.blend": 0.5, "cues.answer_modes": ["role"]}},
    "embedding+lexical+role_cues+stream1": {"inputs": ["phi", "cohesion", "role", "lexical", "answer", "question"],
                                            "over": {"placement.modes": ["pair"], "calibration.blend": 1.0, "cues.answer_modes": ["role"],
                                                     "cues.question_modes": ["role"]}},
    # the chosen design without X_t (its -lexical cue variant, under its own name: the best worst held-out margin)
    "embedding+role_answer+stream1": {"inputs": ["phi", "cohesion", "role", "answer"],
                                      "over": {"placement.modes": ["pair"], "calibration.blend": 1.0, "cues.answer_modes": ["role"]}},
    "embedding+lexical+role_answer": {"inputs": ["phi", "cohesion", "role", "lexical", "answer"],
                                      "over": {"placement.modes": ["pair"], "cues.answer_modes": ["role"]}},
    "embedding+lexical+role_answer+robust1": {"inputs": ["phi", "cohesion", "role", "lexical", "answer"],
                                              "over": {"placement.modes": ["pair"], "calibration.blend": 1.0, "calibration.kind": "robust",
                                                       "cues.answer_modes": ["role"]}},
    "no_question+robust1": {"inputs": ["phi", "cohesion", "role", "answer", "lexical"],
                            "over": {"placement.modes": ["pair"], "calibration.blend": 1.0, "calibration.kind": "robust"}},
    "embedding+answer+stream1": {"inputs": ["phi", "cohesion", "role", "answer"], "over": {"placement.modes": ["pair"], "calibration.blend": 1.0}},
    # Q_t gated on the stream's recent words per turn (docs/segmenter.md §3.5: it helps short-utterance chat,
    # hurts long turns); the gate's limit is chosen inside every fit from WORD_GATE_GRID by the worst fitting margin.
    "embedding+lexical+role_answer+short_question+stream1": {
        "inputs": ["phi", "cohesion", "role", "lexical", "answer", "question"],
        "over": {"placement.modes": ["pair"], "calibration.blend": 1.0, "cues.answer_modes": ["role"]},
        "grid": {"cues.question_max_words": WORD_GATE_GRID}},
    # The same decision with two-human chat built in turn units (segmenter.auto_without_roles: turn): the LoCoMo
    # feasibility constraint then reads LoCoMo as built in turn units (docs/segmenter.md §3.11).
    "embedding+lexical+role_answer+short_question+stream1+turn_units": {
        "inputs": ["phi", "cohesion", "role", "lexical", "answer", "question"],
        "over": {"placement.modes": ["pair"], "calibration.blend": 1.0, "cues.answer_modes": ["role"], "auto_without_roles": "turn"},
        "grid": {"cues.question_max_words": WORD_GATE_GRID}},
    # ... with the look-ahead H_t (each unit decided once the next has arrived), in every mode (docs/segmenter.md §3.12)
    "embedding+lexical+role_answer+short_question+stream1+turn_units+ahead": {
        "inputs": ["phi", "cohesion", "role", "lexical", "answer", "question", "ahead"],
        "over": {"placement.modes": ["pair"], "calibration.blend": 1.0, "cues.answer_modes": ["role"], "auto_without_roles": "turn",
                 "cues.ahead_modes": ["role", "pair", "turn"]},
        "grid": {"cues.question_max_words": WORD_GATE_GRID}},
    "embedding+lexical+role_answer+short_question": {  # the defaults' fixed-threshold twin (stream vs fixed)
        "inputs": ["phi", "cohesion", "role", "lexical", "answer", "question"],
        "over": {"placement.modes": ["pair"], "cues.answer_modes": ["role"]},
        "grid": {"cues.question_max_words": WORD_GATE_GRID}},
    "embedding+role_answer+short_question+stream1": {
        "inputs": ["phi", "cohesion", "role", "answer", "question"],
        "over": {"placement.modes": ["pair"], "calibration.blend": 1.0, "cues.answer_modes": ["role"]},
        "grid": {"cues.question_max_words": WORD_GATE_GRID}},
    "embedding+stream1": {"inputs": ["phi", "cohesion", "role"], "over": {"placement.modes": ["pair"], "calibration.blend": 1.0}},
}


def add_corpus_files(ap: argparse.ArgumentParser) -> None:
    """The corpora of the four groups (options shared with seg_corpus_stats.py)."""
    ap.add_argument("--tiage", default=str(DATA / "segmentation" / "tiage.json"))
    ap.add_argument("--superdialseg", default=str(DATA / "segmentation" / "superdialseg_validation.json"))
    ap.add_argument("--locomo", default=str(DATA / "locomo"))
    ap.add_argument("--tau", default=str(DATA / "agentlogs" / "tau_airline_dev.jsonl"))


def corpus_paths(args: argparse.Namespace, convs: list[Any], dev: set[str], corpora_dir: Path) -> dict[str, Path]:
    """The corpus file of each group's corpus: TIAGE and SuperDialseg as given; ``locomo_mix`` (from the
    ``dev`` conversations of ``convs``) and ``tau_mix`` derived and written to ``corpora_dir``."""
    corpora_dir.mkdir(parents=True, exist_ok=True)
    trajectories = [json.loads(line) for line in Path(args.tau).read_text(encoding="utf-8").splitlines() if line.strip()]
    derived = {"locomo_mix": locomo_mix([c for c in convs if c.conversation_id in dev]), "tau_mix": tau_mix(trajectories)}
    paths = {"tiage": Path(args.tiage), "superdialseg": Path(args.superdialseg)}
    for name, dialogues in derived.items():
        paths[name] = corpora_dir / f"{name}.json"
        paths[name].write_text(json.dumps(dialogues, ensure_ascii=False) + "\n", encoding="utf-8")
    return paths


class Bench:
    """Corpora, their vectors, baselines and the LoCoMo conversations, loaded once."""

    def __init__(self, args: argparse.Namespace) -> None:
        from lychee_ray.embed import get_embedder

        self.cfg_all = load_config(files=args.config)
        self.base: SegmenterConfig = self.cfg_all.segmenter
        self.enc = self.cfg_all.tokenizer.encoding
        self.resamples = args.resamples
        embedder = get_embedder(self.cfg_all.embedding, self.cfg_all.llm)
        self.embedding_model = getattr(embedder, "name", "?")
        cache = Path(args.cache_dir).expanduser()
        convs = load_locomo(Path(args.locomo))
        paths = corpus_paths(args, convs, set(self.cfg_all.eval.locomo_split.dev), Path(args.corpora_dir))
        self.corpus_paths = {k: str(v) for k, v in paths.items()}
        self.dialogues: dict[str, list[SegDialogue]] = {}
        self.vectors: dict[str, np.ndarray] = {}
        for name, path in paths.items():
            d = load_seg_corpus(path)
            self.dialogues[name] = d
            self.vectors[name] = embed_cached(embedder, [u for x in d for u in x.utterances], cache, name)
        lv = embed_cached(embedder, [turn_embedding_text(t) for c in convs for *_, t in c.iter_turns()], cache, "locomo")
        bounds = np.cumsum([0] + [c.num_turns for c in convs])
        self.locomo = [(c, lv[bounds[i] : bounds[i + 1]]) for i, c in enumerate(convs)]
        self.turns = {}
        for view, (name, mode) in VIEWS.items():
            tl = dialogue_turn_inputs(self.dialogues[name], self.vectors[name], self.enc)
            if mode != "role":
                eval_exchange_mode(self.dialogues[name], mode)
            self.turns[view] = tl
        self._refs: dict[str, dict[str, np.ndarray]] = {}
        self._fixed: dict[tuple[str, int], np.ndarray] = {}

    def gold(self, view: str) -> list[list[int]]:
        return [d.segments for d in self.dialogues[VIEWS[view][0]]]

    def refs(self, view: str) -> dict[str, np.ndarray]:
        """Per-dialogue WindowDiff of no boundary and standard TextTiling (utterance units)."""
        if view not in self._refs:
            name = VIEWS[view][0]
            gold, v = self.gold(view), self.vectors[name]
            st = np.cumsum([0] + [sum(g) for g in gold])
            hyps = {"no_boundary": [[sum(g)] for g in gold], "texttiling": [texttiling_hearst(v[st[i] : st[i + 1]]) for i in range(len(gold))]}
            self._refs[view] = {k: np.asarray(per_dialogue_scores(gold, h)["windowdiff"]) for k, h in hyps.items()}
        return self._refs[view]

    def fixed(self, view: str, window: int) -> np.ndarray:
        """Per-dialogue WindowDiff of a segment every ``window`` utterances."""
        key = (view, window)
        if key not in self._fixed:
            cfg = self.base.model_copy(update={"method": "fixed", "fixed_window": window})
            h = segment_dialogues(self.turns[view], cfg, mode="turn", encoding=self.enc)
            self._fixed[key] = np.asarray(per_dialogue_scores(self.gold(view), h)["windowdiff"])
        return self._fixed[key]

    def segment(self, view: str, cfg: SegmenterConfig) -> list[list[int]]:
        return segment_dialogues(self.turns[view], cfg, mode=VIEWS[view][1], encoding=self.enc)  # type: ignore[arg-type]

    def evaluate(self, view: str, cfg: SegmenterConfig, full: bool = False) -> dict[str, Any]:
        """lychee on ``view``: WindowDiff, mean length, margin (minus the best reference); ``full`` adds
        every reference with its paired bootstrap interval, F1, and where the cuts land."""
        gold = self.gold(view)
        hyp = self.segment(view, cfg)
        own = np.asarray(per_dialogue_scores(gold, hyp)["windowdiff"])
        length = sum(map(sum, hyp)) / sum(map(len, hyp))
        refs = {**self.refs(view), "fixed_window": self.fixed(view, max(1, round(length)))}
        out: dict[str, Any] = {"windowdiff": float(own.mean()), "mean_segment_len": length,
                               "margin": max(float(own.mean() - r.mean()) for r in refs.values())}
        if full:
            res = evaluate_corpus(gold, hyp)
            out.update(f1=res["f1"], f1_tol1=res["f1_tol1"], precision=res["precision"], recall=res["recall"],
                       gold_mean_segment_len=sum(map(sum, gold)) / sum(map(len, gold)), dialogues=len(gold),
                       fixed_window_size=max(1, round(length)), cut_positions=cut_positions(gold, hyp))
            out["references"] = {}
            for k in REFERENCES:
                b = paired_bootstrap(own, refs[k], resamples=self.resamples)
                out["references"][k] = {"windowdiff": float(refs[k].mean()), "diff": b["mean"], "ci95": [b["boot_low"], b["boot_high"]]}
            out["worst_ci_high"] = max(r["ci95"][1] for r in out["references"].values())
            out["per_dialogue_windowdiff"] = own.round(5).tolist()
        return out

    def locomo_turns_per_segment(self, cfg: SegmenterConfig) -> dict[str, Any]:
        per, turns, segs = {}, 0, 0
        for conv, v in self.locomo:
            n = len(segment_conversation(conv, cfg=cfg, turn_vectors=v, encoding=self.enc).segments)
            per[conv.conversation_id] = round(conv.num_turns / n, 3)
            turns += conv.num_turns
            segs += n
        return {"mean": round(turns / segs, 3), "per_conversation": per}


def cut_positions(gold: list[list[int]], hyp: list[list[int]]) -> dict[str, int]:
    """Predicted boundaries: on a gold boundary, one unit early, one unit late, or elsewhere."""
    out = {"exact": 0, "one_early": 0, "one_late": 0, "elsewhere": 0}
    for g, h in zip(gold, hyp):
        gb = set(lengths_to_boundaries(g))
        for b in lengths_to_boundaries(h):
            key = "exact" if b in gb else "one_early" if b + 1 in gb else "one_late" if b - 1 in gb else "elsewhere"
            out[key] += 1
    return out


def trace(bench: Bench, view: str, cfg: SegmenterConfig) -> tuple[np.ndarray, np.ndarray]:
    """Inputs of every semantic decision on ``view`` (INPUTS order, then the two pressures) and its label.

    Label 1 when a gold segment starts at the unit's first turn, or (``pair`` units, whose cut may move
    inside the unit) at its second turn.
    """
    name, mode = VIEWS[view]
    seg = make_segmenter(cfg, mode=mode, encoding=bench.enc)  # type: ignore[arg-type]
    rows: list[list[float]] = []
    labels: list[float] = []
    for d, tl in zip(bench.dialogues[name], bench.turns[view]):
        seg.decisions = []
        seg.push_turns(tl)
        seg.new_stream()
        starts = set(np.cumsum([0, *d.segments])[1:-1].tolist())
        for dec in seg.decisions:
            if dec.reason not in ("append", "semantic") or dec.p is None:
                continue
            idx = [int(t.rsplit(":", 1)[1]) for t in dec.turn_ids]
            hit = idx[0] in starts or (mode == "pair" and any(i in starts for i in idx[1:]))
            rows.append([dec.phi or 0.0, min(cfg.cohesion_max, (dec.cohesion_drop or 0.0) / cfg.cohesion_scale),
                         1.0 if (dec.prior or 0.0) != 0.0 else 0.0, dec.question or 0.0, dec.answer or 0.0,
                         dec.lexical_novelty or 0.0, dec.ahead or 0.0, dec.length_pressure or 0.0, dec.count_pressure or 0.0])
            labels.append(1.0 if hit else 0.0)
    return np.asarray(rows, dtype=np.float64), np.asarray(labels, dtype=np.float64)


def design_config(bench: Bench, design: dict[str, Any]) -> SegmenterConfig:
    """The base configuration with the design's overrides, START weights, and unused inputs at 0."""
    over = {**START, **design.get("over", {})}
    for name, key in INPUTS.items():
        if name not in design["inputs"]:
            over[key] = 0.0
    return with_overrides(bench.base, over)


def fit_design(bench: Bench, design: dict[str, Any], groups: list[str], log: str = "") -> dict[str, Any]:
    """Fit ``design`` on ``groups`` (module docstring): the weights, the bias, and the fitting figures.

    A design with a ``grid`` (a switch such as the question cue's word gate) is fitted at every grid
    value and keeps the one with the worst fitting margin lowest (ties: the earlier value): chosen on
    the fitting groups only, like the bias.
    """
    grid = design.get("grid")
    if not grid:
        return _fit_at(bench, design, groups, log)
    ((key, values),) = grid.items()
    fits = []
    for value in values:
        at = {**design, "over": {**design.get("over", {}), key: value}}
        fits.append(_fit_at(bench, at, groups, f"{log} [{key}={value}]"))
    best = min(fits, key=lambda f: f["worst_fitting_margin"])
    return {**best, "grid": {str(f["overrides"][key]): round(f["worst_fitting_margin"], 4) for f in fits}}


def _fit_at(bench: Bench, design: dict[str, Any], groups: list[str], log: str = "") -> dict[str, Any]:
    inputs = design["inputs"]
    cfg = design_config(bench, design)
    views = [v for g in groups for v in GROUPS[g]]
    cols = [list(INPUTS).index(i) for i in inputs]
    for _ in range(REFITS):
        xs, ys, ws = [], [], []
        for g in groups:
            for view in GROUPS[g]:
                x, y = trace(bench, view, cfg)
                xs.append(x), ys.append(y), ws.append(np.full(len(y), 1.0 / len(GROUPS[g]) / max(1, len(y))))
        x, y, w = np.vstack(xs), np.concatenate(ys), np.concatenate(ws)
        vid = np.concatenate([np.full(len(yy), i) for i, yy in enumerate(ys)])
        dummies = (vid[:, None] == np.arange(1, len(ys))[None, :]).astype(np.float64)
        pressures = len(INPUTS)  # the two columns after the inputs
        offset = x[:, pressures] * cfg.w_length + x[:, pressures + 1] * cfg.w_count  # the cost model's prior, not fitted
        b, coef = logistic_irls(np.hstack([x[:, cols], dummies]), y, w, offset)
        intercepts = np.concatenate([[b], b + coef[len(cols):]])
        view_weight = np.concatenate([[1.0 / len(GROUPS[g])] * len(GROUPS[g]) for g in groups])
        fitted = {INPUTS[i]: round(float(c), 3) for i, c in zip(inputs, coef[: len(cols)])}
        fitted["bias"] = round(float(np.average(intercepts, weights=view_weight)), 3)
        cfg = with_overrides(cfg, fitted)

    # The cut rate is set by the bias (fixed threshold) or, with the stream threshold alone (blend 1, where
    # the bias moves every logit and the stream threshold alike), by the segment-length prior (quantile)
    # or the robust spread (robust).
    stream = cfg.calibration.blend >= 1.0
    if not stream:
        key, centre, sweep, step, home = "bias", fitted["bias"], BIAS_GRID, 0.25, 0.0
    elif cfg.calibration.kind == "robust":
        key, centre, sweep, step, home = "calibration.spread", 0.0, SPREAD_GRID, 0.0, 2.0
    else:
        key, centre, sweep, step, home = "calibration.segment_turns", 0.0, SEGMENT_TURNS_GRID, 0.0, 6.0

    def score(off: float) -> tuple[float, dict[str, Any], dict[str, Any]]:
        c = with_overrides(cfg, {key: centre + off})
        ev = {v: bench.evaluate(v, c) for v in views}
        loc = bench.locomo_turns_per_segment(c)
        ok = LOCOMO_RANGE[0] <= loc["mean"] <= LOCOMO_RANGE[1]
        return max(e["margin"] for e in ev.values()) + (0.0 if ok else INFEASIBLE), ev, loc

    grid = {off: score(off) for off in sweep}

    def rank(o: float) -> tuple[float, float]:
        return grid[o][0], abs(o - home)  # ties: the fitted intercept / 6 turns / 2 robust SDs

    best = min(grid, key=rank)
    for off in (best - step, best + step) if step else ():
        grid[off] = score(off)
    best = min(grid, key=rank)
    weights = {**design.get("over", {}), **fitted, key: round(centre + best, 3)}
    worst, ev, loc = grid[best]
    print(f"{log} fit on {groups}: {weights} worst fitting margin {worst:+.3f}, LoCoMo {loc['mean']:.2f}", file=sys.stderr, flush=True)
    return {"overrides": weights, "worst_fitting_margin": worst, "fitting": ev, "locomo": loc,
            "bias_grid": {f"{o:+.2f}": round(g[0], 4) for o, g in sorted(grid.items())}}


def config_of(bench: Bench, design: dict[str, Any], fit: dict[str, Any]) -> SegmenterConfig:
    return with_overrides(design_config(bench, design), fit["overrides"])


def loco(bench: Bench, name: str, design: dict[str, Any]) -> dict[str, Any]:
    """Leave-one-corpus-out of ``design``: per held-out group, the fit on the others and its held-out scores."""
    out: dict[str, Any] = {"design": design, "held_out": {}}
    for g in GROUPS:
        fit = fit_design(bench, design, [h for h in GROUPS if h != g], log=f"[{name} / without {g}]")
        cfg = config_of(bench, design, fit)
        test = {v: bench.evaluate(v, cfg, full=True) for v in GROUPS[g]}
        out["held_out"][g] = {"fit": fit, "test": test}
        for v, e in test.items():
            print(f"    held-out {v:13s} WD {e['windowdiff']:.3f} (len {e['mean_segment_len']:.2f}) " + " ".join(
                f"{k}: {r['diff']:+.3f} [{r['ci95'][0]:+.3f}, {r['ci95'][1]:+.3f}]" for k, r in e["references"].items()),
                file=sys.stderr, flush=True)
    tests = [e for r in out["held_out"].values() for e in r["test"].values()]
    out["worst_held_out_margin"] = max(e["margin"] for e in tests)
    out["worst_held_out_ci_high"] = max(e["worst_ci_high"] for e in tests)
    print(f"== {name}: worst held-out margin {out['worst_held_out_margin']:+.3f}, worst CI high {out['worst_held_out_ci_high']:+.3f}",
          file=sys.stderr, flush=True)
    return out


# Issue 29's defaults (the configuration this issue starts from), for the before/after and off-by-one figures.
ISSUE29: dict[str, Any] = {
    "bias": -3.05, "role_bias": 1.15, "w_surprise": 0.38, "w_cohesion": 0.42, "w_length": 0.9, "w_count": 0.3,
    "cues.w_question": 1.79, "cues.w_answer": -1.54, "cues.w_lexical": 1.17, "length_pressure.scale": 128.0,
    "surprise.robust_min_history": 3, "placement.modes": [], "calibration.blend": 0.0,
    "cues.question_modes": ["role", "pair", "turn"], "cues.answer_modes": ["role", "pair", "turn"], "cues.lexical_modes": ["role", "pair", "turn"],
}


def issue29_diagnosis(bench: Bench) -> dict[str, Any]:
    """Issue 29's defaults on every view, as they were and with turn-level placement: where the cuts land."""
    out: dict[str, Any] = {}
    for label, modes in (("as_is", []), ("placement_pair", ["pair"]), ("placement_pair_turn", ["pair", "turn"])):
        cfg = with_overrides(bench.base, {**ISSUE29, "placement.modes": modes})
        out[label] = {v: {k: e[k] for k in ("windowdiff", "mean_segment_len", "f1", "f1_tol1", "precision", "cut_positions", "references")}
                      for v, e in ((v, bench.evaluate(v, cfg, full=True)) for v in VIEWS)}
    return out


CUES: dict[str, dict[str, Any]] = {
    # cue -> how to switch it on in a design (an input of the logit, or a configuration override)
    "question": {"input": "question"}, "answer": {"input": "answer"}, "lexical": {"input": "lexical"},
    "role": {"input": "role"}, "centring": {"over": {"center_embeddings": True}, "off": {"center_embeddings": False}},
}


def with_cue(design: dict[str, Any], cue: str, on: bool) -> dict[str, Any]:
    """``design`` with ``cue`` switched on or off."""
    spec = CUES[cue]
    d: dict[str, Any] = {"inputs": list(design["inputs"]), "over": dict(design.get("over", {}))}
    if "input" in spec:
        if on and spec["input"] not in d["inputs"]:
            d["inputs"].append(spec["input"])
        if not on and spec["input"] in d["inputs"]:
            d["inputs"].remove(spec["input"])
    else:
        d["over"].update(spec["over"] if on else spec["off"])
    if design.get("grid") and "question" in d["inputs"]:  # the question gate's limit stays chosen in every fit
        d["grid"] = design["grid"]
    return d


def has_cue(design: dict[str, Any], cue: str) -> bool:
    spec = CUES[cue]
    if "input" in spec:
        return spec["input"] in design["inputs"]
    return all(design.get("over", {}).get(k, True) == v for k, v in spec["over"].items())


def cue_variants(name: str, design: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The design with each cue toggled, by run name."""
    return {f"{name} {'-' if has_cue(design, cue) else '+'}{cue}": with_cue(design, cue, not has_cue(design, cue)) for cue in CUES}


_BENCH: Bench | None = None  # the workers' copy (forked)


def _loco_job(job: tuple[str, dict[str, Any]]) -> tuple[str, dict[str, Any]]:
    assert _BENCH is not None
    return job[0], loco(_BENCH, job[0], job[1])


def load_checkpoint(path: str | None) -> dict[str, dict[str, Any]]:
    """LOCO runs finished earlier (one JSON line each: name, design, run); a run whose design changed since is dropped."""
    if not path or not Path(path).exists():
        return {}
    out: dict[str, dict[str, Any]] = {}
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if line.strip():
            rec = json.loads(line)
            out[rec["name"]] = rec
    return out


def run_locos(bench: Bench, jobs: dict[str, dict[str, Any]], workers: int, checkpoint: str | None = None) -> dict[str, dict[str, Any]]:
    """LOCO of every design in ``jobs``, on ``workers`` forked processes (1 = in this process).

    With ``checkpoint`` (a JSON-lines file) every finished run is appended there at once, and a run
    already there for the same design is read back instead of run again (a long sweep survives a stop).
    """
    global _BENCH
    done: dict[str, dict[str, Any]] = {}
    for name, rec in load_checkpoint(checkpoint).items():
        if name in jobs and rec["design"] == json.loads(json.dumps(jobs[name])):
            done[name] = rec["run"]
            print(f"== {name}: from {checkpoint}", file=sys.stderr, flush=True)
    todo = {k: v for k, v in jobs.items() if k not in done}

    def keep(name: str, run: dict[str, Any]) -> None:
        done[name] = run
        if checkpoint:
            with open(checkpoint, "a", encoding="utf-8") as f:
                f.write(json.dumps({"name": name, "design": todo[name], "run": run}) + "\n")

    if workers <= 1 or len(todo) <= 1:
        for name, d in todo.items():
            keep(name, loco(bench, name, d))
        return {k: done[k] for k in jobs}
    import multiprocessing as mp

    _BENCH = bench
    with mp.get_context("fork").Pool(min(workers, len(todo))) as pool:
        for name, run in pool.imap_unordered(_loco_job, list(todo.items()), chunksize=1):
            keep(name, run)
    return {k: done[k] for k in jobs}


def cue_effects(bench: Bench, name: str, design: dict[str, Any], base_run: dict[str, Any], runs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Held-out effect of each cue: WindowDiff with the cue minus without it, per held-out view (paired
    bootstrap 95 % interval over dialogues; negative = the cue helps there). The design's own LOCO run
    is one side, the design with the cue toggled (refitted the same way, ``runs`` by
    :func:`cue_variants` name) the other."""
    out: dict[str, Any] = {}
    for (label, _), cue in zip(cue_variants(name, design).items(), CUES):
        on = has_cue(design, cue)
        if label not in runs:  # not run (a sweep cut short): no figure rather than a guess
            continue
        other = runs[label]
        with_run, without_run = (base_run, other) if on else (other, base_run)
        per_view = {}
        for g, r in with_run["held_out"].items():
            for v, e in r["test"].items():
                a = np.asarray(e["per_dialogue_windowdiff"])
                b = np.asarray(without_run["held_out"][g]["test"][v]["per_dialogue_windowdiff"])
                bs = paired_bootstrap(a, b, resamples=bench.resamples)
                per_view[v] = {"with": float(a.mean()), "without": float(b.mean()), "effect": bs["mean"], "ci95": [bs["boot_low"], bs["boot_high"]]}
        out[cue] = {"in_design": on, "per_view": per_view}
    return out


def matrix(bench: Bench, design: dict[str, Any], fits: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Fit-on x tested-on: every fit (all groups but one, and all) scored on every view."""
    out: dict[str, Any] = {}
    for label, fit in fits.items():
        cfg = config_of(bench, design, fit)
        out[label] = {v: {k: e[k] for k in ("windowdiff", "mean_segment_len", "margin", "references", "worst_ci_high", "f1", "f1_tol1", "cut_positions")}
                      for v, e in ((v, bench.evaluate(v, cfg, full=True)) for v in VIEWS)}
    return out


def markdown(result: dict[str, Any]) -> str:
    """The tables of docs/segmenter.md §3 from a result JSON."""
    lines = ["| design | worst held-out margin | worst CI high | " + " | ".join(VIEWS) + " |", "|---|---|---|" + "---|" * len(VIEWS)]
    for name, run in result["designs"].items():
        cells = []
        for v in VIEWS:
            g = next(g for g, vs in GROUPS.items() if v in vs)
            e = run["held_out"][g]["test"][v]
            cells.append(f"{e['windowdiff']:.3f} ({e['margin']:+.3f})")
        lines.append(f"| {name} | {run['worst_held_out_margin']:+.3f} | {run['worst_held_out_ci_high']:+.3f} | " + " | ".join(cells) + " |")
    chosen = result["chosen"]
    lines += ["", f"Fit-on x tested-on ({chosen}): WindowDiff, then lychee minus each reference [paired bootstrap 95 % CI]", ""]
    lines += ["| fit on | tested on | WD (len) | − no boundary | − fixed window | − TextTiling | F1 exact / ±1 |", "|---|---|---|---|---|---|---|"]
    for label, row in result["matrix"].items():
        for v, e in row.items():
            held = label != "all" and v in GROUPS[label.removeprefix("all but ")]
            refs = " | ".join(f"{e['references'][k]['diff']:+.3f} [{e['references'][k]['ci95'][0]:+.3f}, {e['references'][k]['ci95'][1]:+.3f}]" for k in REFERENCES)
            mark = "**" if held else ""
            lines.append(f"| {label} | {mark}{v}{mark} | {e['windowdiff']:.3f} ({e['mean_segment_len']:.2f}) | {refs} | {e['f1']:.2f} / {e['f1_tol1']:.2f} |")
    lines += ["", "Cue effects (held-out WD with the cue minus without it [95 % CI]; negative = helps)", ""]
    lines += ["| cue | in default | " + " | ".join(VIEWS) + " |", "|---|---|" + "---|" * len(VIEWS)]
    for cue, eff in result["cue_effects"].items():
        lines.append(f"| {cue} | {'yes' if eff['in_design'] else 'no'} | " + " | ".join(
            f"{eff['per_view'][v]['effect']:+.3f} [{eff['per_view'][v]['ci95'][0]:+.3f}, {eff['per_view'][v]['ci95'][1]:+.3f}]" for v in VIEWS) + " |")
    return "\n".join(lines)


def add_corpus_arguments(ap: argparse.ArgumentParser) -> None:
    """The corpora, caches and base config every Bench reads (shared with segmenter_offbyone.py)."""
    add_corpus_files(ap)
    ap.add_argument("--corpora-dir", default=str(ROOT / "benchmarks" / "results" / "seg_corpora"), help="the derived corpora are written here")
    ap.add_argument("--cache-dir", default="~/.cache/lychee_ray/segcache", help="embeddings kept here between runs")
    ap.add_argument("--config", action="append", default=[], help="base config file(s) (default: configs/default.yaml)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    add_corpus_arguments(ap)
    ap.add_argument("--designs", default=",".join(DESIGNS), help="comma-separated names from DESIGNS")
    ap.add_argument("--choose", help="the design to report in detail (default: the best worst held-out margin)")
    ap.add_argument("--no-cues", action="store_true", help="skip the per-cue held-out effects (5 more LOCO runs)")
    ap.add_argument("--resamples", type=int, default=2000)
    ap.add_argument("--workers", type=int, default=1, help="LOCO runs in parallel (forked processes)")
    ap.add_argument("--checkpoint", help="JSON-lines file of finished LOCO runs: appended as they finish, reused when present")
    ap.add_argument("--cues", help="comma-separated cues (from CUES) whose held-out effect is measured (default: all)")
    args = ap.parse_args(argv)

    t0 = time.perf_counter()
    bench = Bench(args)
    cues = args.cues.split(",") if args.cues else list(CUES)

    def variants(name: str) -> dict[str, dict[str, Any]]:
        return {k: v for (k, v), cue in zip(cue_variants(name, DESIGNS[name]).items(), CUES) if cue in cues}

    jobs = {name: DESIGNS[name] for name in args.designs.split(",")}
    if args.choose and not args.no_cues:  # the cue variants can run alongside the designs
        jobs |= variants(args.choose)
    done = run_locos(bench, jobs, args.workers, args.checkpoint)
    runs = {name: done[name] for name in args.designs.split(",")}
    chosen = args.choose or min(runs, key=lambda n: (runs[n]["worst_held_out_margin"], runs[n]["worst_held_out_ci_high"]))
    design = DESIGNS[chosen]
    if not args.no_cues:
        missing = {k: v for k, v in variants(chosen).items() if k not in done}
        done |= run_locos(bench, missing, args.workers, args.checkpoint)
    final = fit_design(bench, design, list(GROUPS), log=f"[{chosen} / all]")
    fits = {f"all but {g}": r["fit"] for g, r in runs[chosen]["held_out"].items()} | {"all": final}
    result = {
        "embedding_model": bench.embedding_model,
        "corpora": bench.corpus_paths,
        "views": VIEWS, "groups": GROUPS, "references": REFERENCES,
        "protocol": {"refits": REFITS, "bias_grid": BIAS_GRID, "locomo_range": LOCOMO_RANGE, "start": START,
                     "selection": "designs by worst held-out margin (lychee WD minus the best reference WD, any held-out view); "
                                  "bias within a fit by the worst fitting-view margin, LoCoMo feasible",
                     "bootstrap_resamples": args.resamples},
        "designs": runs,
        "chosen": chosen,
        "default_fit": final,
        "default_locomo": bench.locomo_turns_per_segment(config_of(bench, design, final)),
        "matrix": matrix(bench, design, fits),
        "issue29_defaults": issue29_diagnosis(bench),
        "cue_effects": {} if args.no_cues else cue_effects(bench, chosen, design, runs[chosen], done),
        "cue_variant_runs": {k: {"worst_held_out_margin": v["worst_held_out_margin"], "worst_held_out_ci_high": v["worst_held_out_ci_high"]}
                             for k, v in done.items() if k not in runs},
        "seconds": round(time.perf_counter() - t0, 1),
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(markdown(result))
    print(f"\ndefault ({chosen}, fit on all): {final['overrides']}; LoCoMo {result['default_locomo']['mean']} turns/segment")
    return 0


if __name__ == "__main__":
    sys.exit(main())
