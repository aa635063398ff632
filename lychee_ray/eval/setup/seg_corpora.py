"""Segmentation corpora derived from data already in the project's data folder.

Two public gold corpora (TIAGE, SuperDialseg validation) are too few to choose the segmenter's defaults
by leave-one-corpus-out, and neither looks like the streams the system segments in deployment (long
two-person conversations, agent logs). These builders make topic-shift streams with KNOWN boundaries by
joining pieces of different sources; each returns dialogues in eval-seg's corpus format
(``{dial_id, utterances, segments, roles?, sources}``, docs/segmenter.md §2), deterministic given the seed.

* :func:`locomo_mix` — two-person chat (LoCoMo): every session is cut into consecutive chunks of
  ``min_len..max_len`` turns and chunks of *different* conversations are joined. The shift it models is a
  change of topic inside a long chat (other people, other events) with no greeting or session marker; a
  chunk starts anywhere in a session, so a boundary falls on both phases of a ``pair`` exchange. Chunks
  can hold an unlabelled topic change of their own: gold is a lower bound on the true boundaries.
* :func:`tau_mix` — agent logs (tau-bench airline trajectories): the opening of each trajectory's text
  messages (user and assistant; system prompt, tool calls and tool results left out, the simulator's
  ``###STOP###`` marker removed) up to a *pause* — a message that asks nothing, or the trajectory's end —
  4-10 messages long, of different tasks and users, joined. The shift it models is the next support
  session of the same agent arriving without a session marker: same domain and register, a new customer
  and request — the hardest kind of shift for an embedding. Why these ends (docs/segmenter.md §3.2): cut
  at a random message, 39 % of the excerpts ended on the assistant's question (3 % of SuperDialseg's
  segments do), which no session end does; whole trajectories (13.6 messages) put the gold at twice the
  granularity the cost model asks of the segmenter (4-8 turns per encoder call on LoCoMo).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from lychee_ray.ingest.segment.cues import is_question
from lychee_ray.core.conversation import Conversation

STOP_MARKER = "###STOP###"  # tau-bench's user simulator ends a trajectory with it (a giveaway, not dialogue)


@dataclass(frozen=True)
class _Chunk:
    source: tuple[str, ...]  # consecutive chunks of a stream must differ in every component
    utterances: list[str]
    roles: list[str] | None


def _lengths(n: int, rng: np.random.Generator, min_len: int, max_len: int) -> list[int]:
    """Consecutive chunk lengths in ``min_len..max_len`` covering ``n`` items (a remainder < min_len is dropped)."""
    out, left = [], n
    while left >= min_len:
        k = int(rng.integers(min_len, max_len + 1))
        k = min(k, left)
        out.append(k)
        left -= k
    return out


def _streams(chunks: list[_Chunk], rng: np.random.Generator, min_chunks: int, max_chunks: int, prefix: str) -> list[dict[str, Any]]:
    """Join shuffled chunks into streams of ``min_chunks..max_chunks`` chunks, neighbours from different sources.

    Every chunk is used at most once, so the streams are independent samples (paired bootstrap over them).
    """
    pool = [chunks[i] for i in rng.permutation(len(chunks))]
    out: list[dict[str, Any]] = []
    while len(pool) >= min_chunks:
        want = int(rng.integers(min_chunks, max_chunks + 1))
        picked: list[_Chunk] = [pool.pop(0)]
        while len(picked) < want:
            j = next((i for i, c in enumerate(pool) if all(a != b for a, b in zip(c.source, picked[-1].source, strict=False))), None)
            if j is None:
                break
            picked.append(pool.pop(j))
        if len(picked) < min_chunks:
            break  # what is left shares a source: no more valid streams
        d: dict[str, Any] = {
            "dial_id": f"{prefix}-{len(out):04d}",
            "utterances": [u for c in picked for u in c.utterances],
            "segments": [len(c.utterances) for c in picked],
            "sources": ["/".join(c.source) for c in picked],
        }
        if all(c.roles is not None for c in picked):
            d["roles"] = [r for c in picked for r in c.roles or ()]
        out.append(d)
    return out


def locomo_mix(
    conversations: Sequence[Conversation],
    *,
    seed: int = 0,
    min_len: int = 4,
    max_len: int = 10,
    min_chunks: int = 3,
    max_chunks: int = 6,
) -> list[dict[str, Any]]:
    """Streams of session chunks from different LoCoMo conversations (roles left out: both speakers are users)."""
    _check(min_len, max_len, min_chunks, max_chunks)
    if len({c.conversation_id for c in conversations}) < 2:
        raise ValueError("locomo_mix needs at least two conversations")
    rng = np.random.default_rng(seed)
    chunks: list[_Chunk] = []
    for conv in conversations:
        for s in conv.sessions:
            texts = [t.content for t in s.turns if t.content.strip()]
            pos = 0
            for k in _lengths(len(texts), rng, min_len, max_len):
                chunks.append(_Chunk((conv.conversation_id,), texts[pos : pos + k], None))
                pos += k
    return _streams(chunks, rng, min_chunks, max_chunks, "locomo-mix")


def tau_text_messages(messages: Sequence[dict[str, Any]]) -> list[tuple[str, str]]:
    """(role, text) of a trajectory's user and assistant messages that carry text, stop marker removed."""
    out = []
    for m in messages:
        if m.get("role") not in ("user", "assistant"):
            continue  # the system policy and tool results are not dialogue
        text = str(m.get("content") or "").replace(STOP_MARKER, "").strip()
        if text:
            out.append((str(m["role"]), text))
    return out


def tau_mix(
    trajectories: Sequence[dict[str, Any]],
    *,
    seed: int = 0,
    min_len: int = 4,
    max_len: int | None = 10,
    min_chunks: int = 2,
    max_chunks: int = 4,
) -> list[dict[str, Any]]:
    """Streams of trajectory openings that end at a pause, with different tasks and users.

    ``trajectories``: tau-bench records as in ``agentlogs/tau_airline_dev.jsonl`` (``messages``,
    ``user_id``, ``metadata.task_id``). Each trajectory gives its first ``k`` text messages, ``k`` drawn
    among ``min_len..max_len`` where message ``k`` asks no question or is the last one; a trajectory
    without such a ``k`` is skipped. ``max_len=None`` takes whole trajectories.
    """
    _check(min_len, max_len or min_len, min_chunks, max_chunks)
    rng = np.random.default_rng(seed)
    chunks: list[_Chunk] = []
    for tr in trajectories:
        msgs = tau_text_messages(tr.get("messages") or [])
        top = len(msgs) if max_len is None else min(len(msgs), max_len)
        ends = [k for k in range(min_len, top + 1) if k == len(msgs) or not is_question(msgs[k - 1][1])]
        if max_len is None:
            ends = [len(msgs)] if len(msgs) >= min_len else []
        if not ends:
            continue
        k = int(ends[int(rng.integers(0, len(ends)))])
        task = str((tr.get("metadata") or {}).get("task_id", tr.get("conversation_id", "")))
        chunks.append(_Chunk((task, str(tr.get("user_id", ""))), [t for _, t in msgs[:k]], [r for r, _ in msgs[:k]]))
    return _streams(chunks, rng, min_chunks, max_chunks, "tau-mix")


def _check(min_len: int, max_len: int, min_chunks: int, max_chunks: int) -> None:
    if not 1 <= min_len <= max_len:
        raise ValueError(f"chunk lengths {min_len}..{max_len}: need 1 <= min_len <= max_len")
    if not 2 <= min_chunks <= max_chunks:
        raise ValueError(f"chunks per stream {min_chunks}..{max_chunks}: need 2 <= min_chunks <= max_chunks")


DERIVED: dict[str, Callable[..., list[dict[str, Any]]]] = {"locomo_mix": locomo_mix, "tau_mix": tau_mix}
