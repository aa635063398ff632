"""Online semantic segmenter (DESIGN §1 step 1) and the fixed-window baseline.

Turns go in one at a time, already embedded by the caller (the same vectors later feed the raw-turn
index, so nothing is embedded twice); closed :class:`Segment` objects come out. The segmenter never
looks ahead: the decision for exchange ``x_t`` uses only ``x_1..x_t``. The method, its calibration and
its figures are in docs/segmenter.md.

Modules, in pipeline order::

    types         TurnInput / TurnRef / Exchange / Segment / Decision
    cues          surface cues of a unit's text: question, content words, lexical novelty
    exchanges     exchange building (role | pair | turn) and the token cap (oversized turns -> pieces)
    signals       sigmoid, pressure ramps, the calibrated surprise phi(s)
    state         the open segment's running sums (JSON-able)
    base          shared streaming machinery: sessions, cap, centring, trace, save/restore
    online        OnlineSegmenter (p_t > threshold), FixedWindowSegmenter, make_segmenter
    conversation  whole conversations: embed once, segment, resolve segments to turn texts

Decision for a unit with centred unit vector ``e_t`` against the open segment ``S_k``::

    p_t = sigmoid(b + r_t + w_s*phi(s_t) + w_c*min(cmax, d_t/cscale) + w_l*L_t + w_n*N_t
                  + w_q*Q_t + w_a*A_t + w_x*X_t)

with the surprise ``s_t`` against the segment's recent trajectory, the cohesion drop ``d_t``, the
length/count pressures (tokens / turns in ``S_k``), ``phi`` = max(absolute part, robust z-score of
``s_t`` in the stream) and ``r_t`` the structural prior (``role_bias`` at a user's new request in
``role`` mode); ``Q_t`` (the unit opens with a question), ``A_t`` (the previous unit ended with one) and
``X_t`` (share of content words new to the open segment's recent units) are the surface cues. Cut
before ``x_t`` when ``p_t > threshold`` or when appending would pass the token cap.

Invariants (tested): a segment never spans two sessions nor exceeds ``max_segment_tokens`` (a longer
turn is split into character-range pieces that share the turn's vector); every turn appears in exactly
one segment, in order, nothing dropped; the state round-trips through JSON and a restored segmenter
makes exactly the decisions of an uninterrupted one. Empty turns carry no signal and are appended;
identical turns are never cut semantically (only the pressures or the cap cut them).

Pure numpy + the offline tokenizer; no Ray.
"""

from lychee_ray.ingest.segment.base import BaseSegmenter
from lychee_ray.ingest.segment.conversation import (
    ResolvedTurn,
    SegmentationResult,
    StreamSegmentation,
    conversation_turn_inputs,
    embed_turns,
    open_turn_refs,
    segment_conversation,
    segment_stream,
    segment_turn_inputs,
    segment_turns,
    turn_embedding_text,
)
from lychee_ray.ingest.segment.cues import WordRate, content_words, count_words, is_question, lexical_novelty
from lychee_ray.ingest.segment.exchanges import (
    ANSWER_ROLES,
    build_exchanges,
    fit_to_cap,
    resolve_exchange_mode,
    split_text_by_tokens,
)
from lychee_ray.ingest.segment.online import (
    FixedWindowSegmenter,
    OnlineSegmenter,
    make_segmenter,
)
from lychee_ray.ingest.segment.signals import calibrated_surprise, ramp, sigmoid
from lychee_ray.ingest.segment.state import STATE_VERSION
from lychee_ray.ingest.segment.types import (
    CloseReason,
    Decision,
    DecisionReason,
    Exchange,
    Segment,
    TurnInput,
    TurnRef,
)
from lychee_ray.names import ExchangeMode, UnitWithoutRoles

__all__ = [
    "ANSWER_ROLES",
    "STATE_VERSION",
    "BaseSegmenter",
    "CloseReason",
    "Decision",
    "DecisionReason",
    "Exchange",
    "ExchangeMode",
    "FixedWindowSegmenter",
    "OnlineSegmenter",
    "ResolvedTurn",
    "Segment",
    "SegmentationResult",
    "StreamSegmentation",
    "TurnInput",
    "TurnRef",
    "UnitWithoutRoles",
    "WordRate",
    "build_exchanges",
    "calibrated_surprise",
    "content_words",
    "conversation_turn_inputs",
    "count_words",
    "embed_turns",
    "fit_to_cap",
    "is_question",
    "lexical_novelty",
    "make_segmenter",
    "open_turn_refs",
    "ramp",
    "resolve_exchange_mode",
    "segment_conversation",
    "segment_stream",
    "segment_turn_inputs",
    "segment_turns",
    "sigmoid",
    "split_text_by_tokens",
    "turn_embedding_text",
]
