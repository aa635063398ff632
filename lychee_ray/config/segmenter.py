"""Section for the online semantic segmenter (``segmenter``; docs/segmenter.md)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from lychee_ray.config.base import Section
from lychee_ray.names import ExchangeMode, ExchangeModeChoice, SegmentationMethod, UnitWithoutRoles


class SurpriseConfig(Section):
    """phi(s): calibrated surprise, phi = max(A, robust_weight * R) (docs/segmenter.md)."""

    # s = 1 - cos(e_t, h_k) against the open segment's recent trajectory h_k (trajectory), or against
    # the closer of h_k and its centroid c_k (max: the authors' form).
    reference: Literal["trajectory", "max"] = Field(default="trajectory",
        description=(
            "s = 1 - cos(e_t, trajectory of the open segment) | max (closer of trajectory and centroid; the "
            "authors')"))

    # Absolute part A = clip((s - center) / scale, clip_min, clip_max). The paper's centre suits
    # text-embedding-3-small; the default is calibrated for centred MiniLM (A then only fires on outliers).
    center: float = Field(default=0.8, description="A = clip((s - center) / scale, clip_min, clip_max)")
    scale: float = Field(default=0.14, gt=0)
    clip_min: float = Field(default=-1.0)
    clip_max: float = Field(default=2.5)
    # Relative part R = robust z-score of s against the last `robust_window` surprises of the stream.
    # Weighted above the paper's: phi is then mostly data-adaptive, so it transfers across corpora.
    robust_weight: float = Field(default=1.6, ge=0, description="weight of R, the robust z-score of s in the stream")
    robust_window: int = Field(default=256, ge=1, description="R compares against the last this-many surprises of the stream")
    # R = 0 until this many surprises were seen
    robust_min_history: int = Field(default=3, ge=1,
        description=(
            "R = 0 until this many surprises were seen (small, so that a cold stream cuts a plain shift among its"
            " first units)"))
    robust_clip_min: float = Field(default=-2.0)
    robust_clip_max: float = Field(default=4.0)
    # MAD -> standard deviation for normal data
    mad_to_sigma: float = Field(default=1.4826, gt=0, description="MAD -> standard deviation")
    # Smallest sigma for R: keeps near-identical turns (tiny surprise wiggles) from looking like outliers.
    mad_floor: float = Field(default=0.05, gt=0, description="smallest sigma, so near-identical turns do not look like outliers")

class PressureConfig(Section):
    """A ramp: 0 up to `start`, then +1 per `scale` units, capped at `max`."""

    start: float = Field(ge=0)
    scale: float = Field(gt=0)
    max: float = Field(ge=0)

class CueConfig(Section):
    """Surface cues of a unit's text next to the embedding signals (docs/segmenter.md §4).

    Their weights add to the logit of p_t; they were fitted by benchmarks/fit_segmenter_cues.py.
    """

    # on Q_t = 1 when the unit's opening turn asks a question (a new topic is often asked for)
    w_question: float = Field(default=1.237,
        description=(
            "on Q_t = 1 when the unit's opening turn asks a question (new topics are asked for), only where "
            "question_max_words lets it count; LOCO worst margin (docs/segmenter.md §3.10)"))
    # on A_t = 1 when the previous unit ended with a question (this one answers it)
    w_answer: float = Field(default=-2.791,
        description=(
            "on A_t = 1 when the previous unit ended with a question (this unit answers it: same topic); LOCO "
            "worst margin, role units only"))
    # on X_t = share of the unit's content words absent from the open segment's recent units
    w_lexical: float = Field(default=1.195,
        description=(
            "on X_t = share of the unit's content words absent from the open segment's recent units; LOCO worst "
            "margin (docs/segmenter.md §3.10)"))
    # X_t compares against the open segment's last this-many units
    lexical_window: int = Field(default=2, ge=1,
        description="X_t compares against the open segment's last this-many units (as the trajectory window)")
    # content words: at least this many characters (a stop-word list without a language)
    min_word_chars: int = Field(default=4, ge=1,
        description=(
            "content words have at least this many characters (drops most function words without a stop-word "
            "list)"))
    # The exchange modes in which each cue counts (elsewhere it is 0): a gate the segmenter can observe
    # in the stream itself (roles present -> role units), chosen by leave-one-corpus-out.
    question_modes: list[ExchangeMode] = Field(default=["role", "pair", "turn"],
        description=(
            "exchange modes in which Q_t counts (0 elsewhere): a gate observable in the stream (role = roles "
            "present)"))
    answer_modes: list[ExchangeMode] = Field(default=["role"],
        description="... in which A_t counts: role units only (a reply to a user's question), chosen by LOCO worst margin")
    lexical_modes: list[ExchangeMode] = Field(default=["role", "pair", "turn"], description="... in which X_t counts")
    # Q_t counts only while the stream's recent words per turn (the mean over its last `words_window`
    # non-empty turns, known after `words_min_history`) is at most this: the question cue helps
    # short-utterance chat and hurts long-utterance chat and agent logs. 0 = no gate.
    question_max_words: float = Field(default=16.0, ge=0,
        description=(
            "Q_t counts only while the stream's recent words per turn are at most this (a gate the stream shows: "
            "the cue helps short-utterance chat, hurts long turns and agent logs); chosen inside every LOCO fit "
            "(docs/segmenter.md §3.10); 0 = no gate"))
    words_window: int = Field(default=64, ge=1,
        description=(
            "that mean is over the stream's last this-many non-empty turns (a few short dialogues, a stretch of a"
            " long one; not fitted)"))
    words_min_history: int = Field(default=8, ge=1,
        description="the gate stays shut (Q_t = 0) until the stream has shown this many non-empty turns (not fitted)")
    # The look-ahead H_t = cos(next unit, unit) - cos(next unit, open segment's trajectory): in these modes
    # a unit is decided only when the next one has arrived (one unit of latency; [] = decide at once).
    w_ahead: float = Field(default=0.0,
        description=(
            "on H_t = cos(next unit, unit) - cos(next unit, open segment's trajectory), the look-ahead; off: it "
            "does not help across held-out corpora (docs/segmenter.md §3.12)"))
    ahead_modes: list[ExchangeMode] = Field(default=[],
        description="exchange modes in which a unit waits for the next one and H_t counts (one unit of latency; [] = off)")


class PlacementConfig(Section):
    """Where a semantic cut lands at turn level (docs/segmenter.md §3).

    A unit of two turns (``pair``) can only be cut before its first turn, so a topic that starts at
    its second turn, or at the second turn of the unit before, is cut one turn off. When a cut fires,
    the gap before the unit competes with the gap before the open segment's last turn and the gap
    inside the unit: the gap whose two sides (``window`` turns each, no look-ahead past the unit)
    are least similar wins, if it beats the unit's own gap by ``margin``.
    """

    # exchange modes in which a cut may move by one turn ([] = off)
    modes: list[UnitWithoutRoles] = Field(default=["pair"],
        description=(
            "exchange modes in which a cut may move by one turn (pair | turn); [] = always before the unit; "
            "[pair]: a topic that starts at a pair's second turn (docs/segmenter.md §3.4)"))
    # turns on each side of a gap for its coherence
    window: int = Field(default=2, ge=1, description="turns on each side of a gap for its coherence (only turns already seen)")
    # cosine by which a neighbouring gap must be less coherent than the unit's own
    margin: float = Field(default=0.0, ge=0,
        description="a neighbouring gap wins when its coherence is lower than the unit's own gap by more than this")


class CalibrationConfig(Section):
    """The cut threshold calibrated from the stream's own decision scores (docs/segmenter.md §3).

    Fixed: cut when the logit z_t > logit(threshold). Stream (lychee_ray/ingest/segment/calibration.py):
    ``quantile`` cuts the top rho of the stream's recent evidence, rho = (turns per unit, measured on the
    stream) / ``segment_turns`` (a segment-length prior); ``robust`` cuts evidence ``spread`` robust
    standard deviations above the stream's median. The threshold used is the blend
    ``(1 - blend) * fixed + blend * stream``; ``blend: 0`` is the fixed rule.
    """

    blend: float = Field(default=1.0, ge=0, le=1,
        description=(
            "threshold = (1 - blend) * fixed + blend * stream threshold (over the stream's recent logits, "
            "pressures apart); 1 chosen by LOCO worst margin; 0 = the fixed rule"))
    # quantile = cut the stream's top rho (rate from segment_turns); robust = cut what lies `spread`
    # robust SDs above the stream's median evidence (scale from the stream, rate from its tail).
    kind: Literal["quantile", "robust"] = Field(default="quantile",
        description=(
            "stream threshold: quantile = the (1 - rho) quantile (a rate) | robust = median + spread * robust SD "
            "(a scale)"))
    # the segment-length prior: expected turns per segment (quantile)
    segment_turns: float = Field(default=8.0, gt=0,
        description=(
            "quantile: segment-length prior in turns, rho = turns per unit / this; chosen by LOCO worst margin "
            "with LoCoMo kept in 4-8 turns/segment (docs/segmenter.md §3.10)"))
    # robust: robust standard deviations above the median evidence
    spread: float = Field(default=2.0, description="robust: cut evidence this many robust SDs (1.4826 * MAD) above the stream's median")
    # robust: smallest spread unit (a stream of identical evidence)
    mad_floor: float = Field(default=0.05, gt=0, description="robust: smallest robust SD (a stream whose evidence never varies)")
    # scores remembered for the quantile
    window: int = Field(default=256, ge=1, description="logits remembered for the quantile")
    # fixed threshold alone until this many scores were seen
    min_history: int = Field(default=16, ge=1, description="the fixed threshold alone until this many logits were seen")
    # rho is at most this (a unit of many turns is not always cut)
    max_rate: float = Field(default=0.5, gt=0, le=1, description="rho is at most this")


class SegmenterConfig(Section):
    """Online semantic segmenter (DESIGN §1 step 1); calibrated in docs/segmenter.md."""

    # semantic = boundary probability p_t; fixed = every `fixed_window` exchanges (the ablation).
    method: SegmentationMethod = Field(default="semantic",
        description="semantic (boundary probability p_t) | fixed (every fixed_window exchanges; the ablation)")
    # role = user turn + replies; pair = two consecutive turns; turn = one turn;
    # auto = role when the conversation has assistant turns, else auto_without_roles.
    exchange_mode: ExchangeModeChoice = Field(default="auto",
        description=(
            "role (user turn + replies) | pair (two turns) | turn (one turn) | auto (role if any assistant turn, "
            "else auto_without_roles)"))
    # The unit `auto` uses where no turn answers a user (two-human chat, a corpus without roles):
    # turn (every utterance is a decision point) or pair (two consecutive turns).
    auto_without_roles: UnitWithoutRoles = Field(default="turn",
        description=(
            "the unit auto picks without an answering role (two-human chat): turn | pair; chosen by "
            "leave-one-corpus-out (docs/segmenter.md §3.11)"))
    # Exchange vector from its turn vectors: mean = normalised mean; tokens = token-weighted mean.
    exchange_weighting: Literal["mean", "tokens"] = Field(default="mean",
        description="exchange vector = normalised mean of its turn vectors | tokens (token-weighted mean)")
    # Hard cap on a segment's tokens (turn text); longer turns are split into pieces.
    max_segment_tokens: int = Field(default=2048, ge=16,
        description="hard cap on a segment's turn-text tokens; longer turns are split into pieces, never dropped")
    # Bound on one turn's cost: only the first this-many characters of a longer turn (a pasted log,
    # a 10 MB blob) are embedded, segmented and encoded; the turn is stored and searchable (raw turns,
    # BM25) in full, and the build reports it as an input warning. 0 = no bound.
    max_turn_chars: int = Field(default=50000, ge=0,
        description=(
            "only this many leading characters of a longer turn are embedded, segmented and encoded (bounded "
            "cost); the turn is stored and searchable in full; reported as an input warning; 0 = no bound"))
    # delta: cut when p_t > threshold
    threshold: float = Field(default=0.5, gt=0, lt=1, description="delta: cut before x_t when p_t > delta")
    # b
    bias: float = Field(default=-3.444,
        description=(
            "b in p_t = sigmoid(b + r + w_s*phi + w_c*D + w_l*L + w_n*N + cues); chosen by leave-one-corpus-out "
            "worst held-out margin (LOCO, benchmarks/segmenter_loco.py; docs/segmenter.md §3.10); with "
            "calibration.blend 1 it acts only before calibration.min_history"))
    # Structural prior added to b where, in role mode, a unit opens with a user turn (a new request:
    # support dialogues shift topic at the user's turn). Learned from roles, not set per corpus.
    role_bias: float = Field(default=0.878,
        description=(
            "r: added where, in role mode, a unit opens with a user turn (a new request); 0 elsewhere; LOCO worst"
            " margin"))
    # w_s on phi(s_t)
    w_surprise: float = Field(default=0.691, description="w_s, on phi(s_t); LOCO worst margin")
    # w_c on min(cohesion_max, d_t / cohesion_scale)
    w_cohesion: float = Field(default=-0.651,
        description=(
            "w_c, on D = min(cohesion_max, d_t / cohesion_scale); LOCO worst margin (negative: phi and X_t carry "
            "the topic shift)"))
    # w_l on the length pressure L_t
    w_length: float = Field(default=0.9, description="w_l, on the length pressure L_t (the paper's; a cost prior, not fitted)")
    # w_n on the count pressure N_t
    w_count: float = Field(default=0.3, description="w_n, on the count pressure N_t (the paper's; a cost prior, not fitted)")
    # Ten times the paper's: centred MiniLM cosines are lower and wider spread.
    cohesion_scale: float = Field(default=0.6, gt=0,
        description="cohesion drop that counts as 1 (for centred MiniLM cosines; docs/segmenter.md)")
    cohesion_max: float = Field(default=2.5, ge=0, description="ceiling of D")
    # h_k = normalised mean of the last `trajectory_window` exchanges of the open segment.
    trajectory_window: int = Field(default=2, ge=1, description="h_k = normalised mean of the last this-many exchanges of the open segment")
    # Subtract the running mean of the stream's exchange vectors before the cosines (removes the
    # component all sentences share). The mean is shrunk as sum / (n + centering_prior), so the
    # centring fades in smoothly over the first exchanges instead of switching on at once.
    center_embeddings: bool = Field(default=True, description="subtract the stream's running mean vector before the cosines")
    centering_prior: float = Field(default=10.0, ge=0,
        description="that mean is sum / (n + prior): the centring fades in over the first exchanges")
    surprise: SurpriseConfig = Field(default_factory=SurpriseConfig, description="phi(s) = max(A, robust_weight * R)")
    # L_t over the tokens already in the open segment; N_t over its turns (the same unit in every exchange mode).
    length_pressure: PressureConfig = Field(default_factory=lambda: PressureConfig(start=0, scale=128, max=1.0),
        description=(
            "L_t = min(max, max(0, tokens in the open segment - start) / scale); full pressure at 128 tokens "
            "(a few chat turns; docs/segmenter.md)"))
    count_pressure: PressureConfig = Field(default_factory=lambda: PressureConfig(start=2, scale=8, max=2.0),
        description="N_t = min(max, max(0, turns in the open segment - start) / scale)")
    # exchanges per segment when method = fixed
    fixed_window: int = Field(default=3, ge=1,
        description=(
            "exchanges per segment for method = fixed (eval's fixed_window variant matches lychee's own length "
            "instead)"))
    cues: CueConfig = Field(default_factory=CueConfig,
        description=(
            "surface cues of the unit's text, added to the logit of p_t (docs/segmenter.md §4); weights fitted by"
            " benchmarks/fit_segmenter_cues.py"))
    placement: PlacementConfig = Field(default_factory=PlacementConfig,
        description=(
            "where a semantic cut lands at turn level (docs/segmenter.md §3): the unit's own gap, the gap before "
            "the open segment's last turn, or the gap inside the unit, whichever has the least similar sides"))
    calibration: CalibrationConfig = Field(default_factory=CalibrationConfig,
        description=(
            "cut threshold from the stream's own decision scores (docs/segmenter.md §3); blend 0 = the fixed rule"
            " p_t > threshold"))
