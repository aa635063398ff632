"""Exchange building (role | pair | turn) and fitting exchanges under the segment token cap."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
import numpy as np

from lychee_ray.ingest.segment.cues import content_words, count_words, is_question
from lychee_ray.ingest.segment.types import Exchange, TurnInput, TurnRef
from lychee_ray.names import AUTO, ExchangeMode, ExchangeModeChoice, PAIR_MODE, ROLE_MODE, TURN_MODE, UnitWithoutRoles
from lychee_ray.text.tokens import DEFAULT_ENCODING, count_tokens, get_encoding

# Roles that answer a user: chat logs say "assistant", support corpora (SuperDialseg) say "agent".
ANSWER_ROLES = frozenset({"assistant", "agent"})


def resolve_exchange_mode(
    mode: ExchangeModeChoice, roles: Iterable[str], without_roles: UnitWithoutRoles
) -> ExchangeMode:
    """Concrete mode for ``auto``: ``role`` when any turn answers a user (assistant/agent), else
    ``without_roles`` (``segmenter.auto_without_roles``)."""
    if mode != AUTO:
        return mode
    return ROLE_MODE if any(r in ANSWER_ROLES for r in roles) else without_roles


def _unit(v: np.ndarray) -> np.ndarray:
    n = float(np.linalg.norm(v))
    return v / n if n > 0 else np.zeros_like(v)


def split_text_by_tokens(text: str, max_tokens: int, encoding: str = DEFAULT_ENCODING) -> list[tuple[int, int]]:
    """Character spans covering ``text`` whose pieces have at most ``max_tokens`` tokens each.

    Pieces end at a whitespace when one lies in the second half of the piece, so words are not cut
    when avoidable. The spans are contiguous and cover the whole text (nothing is dropped).
    """
    if count_tokens(text, encoding) <= max_tokens:
        return [(0, len(text))]
    enc = get_encoding(encoding)
    spans: list[tuple[int, int]] = []
    start = 0
    while start < len(text):
        # Tokenise a window of the rest, not all of it (a 10 MB turn would cost O(n^2)); the window
        # grows until it holds more than max_tokens tokens or reaches the end of the text.
        window = max_tokens * 8
        while True:
            rest = text[start : start + window]
            ids = enc.encode(rest, disallowed_special=())
            if len(ids) > max_tokens or start + window >= len(text):
                break
            window *= 2
        if len(ids) <= max_tokens:
            spans.append((start, len(text)))
            break
        # Characters fully covered by the first max_tokens tokens (a token may end inside a character).
        nbytes = sum(len(b) for b in enc.decode_tokens_bytes(ids[:max_tokens]))
        cut = max(1, len(rest.encode("utf-8")[:nbytes].decode("utf-8", errors="ignore")))
        ws = max(rest.rfind(" ", cut // 2, cut), rest.rfind("\n", cut // 2, cut))
        if ws > 0:
            cut = ws + 1
        # Re-tokenising a piece can merge differently at its edge: shrink until it fits.
        while cut > 1 and count_tokens(rest[:cut], encoding) > max_tokens:
            cut -= max(1, cut // 20)
        spans.append((start, start + cut))
        start += cut
    return spans


def _exchange_vector(turns: Sequence[tuple[TurnInput, int]], weighting: str) -> np.ndarray:
    """Normalised (optionally token-weighted) mean of the turn vectors that carry signal."""
    acc: np.ndarray | None = None
    for t, tokens in turns:
        if not t.text.strip():
            continue  # empty turns say nothing about the topic
        u = _unit(t.vector)
        w = float(tokens) if weighting == "tokens" else 1.0
        acc = u * w if acc is None else acc + u * w
    if acc is None:
        dim = turns[0][0].vector.shape[0] if turns else 0
        return np.zeros(dim, dtype=np.float64)
    return _unit(acc)


def fit_to_cap(
    turns: Sequence[TurnInput],
    max_tokens: int,
    weighting: str = "mean",
    encoding: str = DEFAULT_ENCODING,
    min_word_chars: int = 4,
) -> list[Exchange]:
    """Turn one exchange into decision units of at most ``max_tokens`` tokens each.

    Usually this is the exchange itself. An oversized exchange is packed greedily by turns; a turn
    over the cap is split into character-range pieces that all reuse the turn's vector. Each unit
    also carries its surface cues (question at the start / end, content words of ``min_word_chars``+).
    """
    items: list[tuple[TurnInput, TurnRef, int]] = []  # (turn, ref or piece ref, tokens)
    for t in turns:
        if t.tokens <= max_tokens:
            items.append((t, t.ref, t.tokens))
            continue
        for a, b in split_text_by_tokens(t.text, max_tokens, encoding):
            piece = t.ref.model_copy(update={"char_start": a, "char_end": b})
            items.append((t, piece, count_tokens(t.text[a:b], encoding)))
    groups: list[list[tuple[TurnInput, TurnRef, int]]] = []
    total = max_tokens + 1  # forces a new group for the first item
    for it in items:
        if total + it[2] > max_tokens:
            groups.append([])
            total = 0
        groups[-1].append(it)
        total += it[2]
    first = turns[0].ref
    out = []
    for i, g in enumerate(groups):
        texts = [r.slice(t.text) for t, r, _ in g]
        out.append(
            Exchange(
                session_index=first.session_index,
                session_id=first.session_id,
                turns=[r for _, r, _ in g],
                tokens=sum(n for _, _, n in g),
                vector=_exchange_vector([(t, n) for t, _, n in g], weighting),
                opener_role=turns[0].role if i == 0 else "",
                # Only a unit that opens the exchange opens with a turn (later cap-sized parts continue one).
                opener_question=i == 0 and is_question(texts[0]),
                closer_question=is_question(texts[-1]),
                words=content_words(texts, min_word_chars),
                word_counts=tuple(count_words(t) for t in texts),
            )
        )
    return out


class _ExchangeBuilder:
    """Streaming exchange building; holds the turns of a not yet complete exchange."""

    def __init__(self, mode: ExchangeMode) -> None:
        self.mode = mode
        self.pending: list[TurnInput] = []

    def add(self, t: TurnInput) -> list[list[TurnInput]]:
        out: list[list[TurnInput]] = []
        if self.pending and t.ref.session_index != self.pending[0].ref.session_index:
            out.append(self.pending)  # exchanges never cross a session boundary
            self.pending = []
        if self.mode == TURN_MODE:
            out.append([t])
        elif self.mode == PAIR_MODE:
            self.pending.append(t)
            if len(self.pending) == 2:
                out.append(self.pending)
                self.pending = []
        else:  # role: a user turn opens an exchange; other turns reply to it
            if t.role == "user" and self.pending:
                out.append(self.pending)
                self.pending = []
            self.pending.append(t)
        return out

    def flush(self) -> list[list[TurnInput]]:
        out = [self.pending] if self.pending else []
        self.pending = []
        return out


def build_exchanges(
    turns: Sequence[TurnInput],
    mode: ExchangeModeChoice = "auto",
    max_tokens: int = 2048,
    weighting: str = "mean",
    encoding: str = DEFAULT_ENCODING,
    min_word_chars: int = 4,
    without_roles: UnitWithoutRoles = "turn",
) -> list[Exchange]:
    """All decision units of a finished turn sequence (batch form of what the segmenter streams);
    ``without_roles``: the unit ``auto`` picks without an answering role (``segmenter.auto_without_roles``)."""
    b = _ExchangeBuilder(resolve_exchange_mode(mode, (t.role for t in turns), without_roles))
    groups = [g for t in turns for g in b.add(t)] + b.flush()
    return [u for g in groups for u in fit_to_cap(g, max_tokens, weighting, encoding, min_word_chars)]

