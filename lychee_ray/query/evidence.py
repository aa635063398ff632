"""Selected evidence and its serialisation: what the answer prompt shows and the budget counts.

Compact serialisation, in conversation order, one header per session date::

    ## 2023-05-08
    Caroline: I went to a LGBTQ support group yesterday and it was so powerful.
    - Caroline went to an LGBTQ support group on 7 May 2023.
    Melanie: Wow, that's cool, Caroline! What happened that was so awesome?

Tokens go to content: a raw turn is one ``Speaker: content`` line; a memory record is one ``- text``
line (its text already says names and absolute dates); a passage of a long turn is one
``Speaker (part k of n): text`` line. Turn ids (``show_source_ids``) and
``[type, time]`` tags (``show_record_tags``) are optional: the answer step needs neither, and the
evidence items returned to callers carry both. The date is written once per session group.

Token counts of lines are cached on the loaded view (:func:`prime_line_tokens` counts them once
when a conversation is loaded), so the selection's budget checks cost no tokenizer calls.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Literal
from collections.abc import Sequence

from lychee_ray.core.records import TimeSpan
from lychee_ray.query.fuse import ItemKey
from lychee_ray.query.pacing import Pause, paced
from lychee_ray.query.view import ConversationView
from lychee_ray.text.tokens import DEFAULT_ENCODING, count_tokens

_HEADER_CACHE = 4096  # distinct session headers counted (few per conversation)
_MAX_LISTED_IDS = 2  # a record's source ids are listed up to this many, else shown as a first-last range

EvidenceKind = Literal["record", "turns", "passage"]


@dataclass
class Evidence:
    """One selected unit of context."""

    key: ItemKey
    kind: EvidenceKind
    conversation_id: str
    id: str  # record id, the window's centre turn id, or the passage id
    text: str  # record text, the window's "Speaker: content" lines, or "Speaker: passage"
    type: str  # record type, "turns" or "passage"
    time: TimeSpan | None
    session_date: str | None
    turn_ids: list[str]  # source turns of a record; the turns of a window (what the unit covers); a passage's turn
    score: float
    channels: list[str]
    routes: list[int]
    block: str = ""  # serialised form (counted against the budget)
    # tokens the block adds to the context (its lines and their newlines; the session header not included)
    tokens: int = 0
    order: tuple[int, ...] = (0, 0)  # chronological position (first covered turn; a passage: its place in the turn)
    rank: int = 0  # position in selection order (0 = picked first)
    group: tuple[str, str | None] = ("", None)  # (conversation id, session day): the header it goes under
    # a passage: (position in its turn, 1-based; passages its turn has; char_start; char_end in the turn's text)
    passage: tuple[int, int, int, int] | None = None

    # whether what it shows holds now (query/marks.py): current | superseded | conflicting | history
    status: str = "current"
    valid_until: str | None = None
    superseded_by: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Dropped:
    """A candidate the token budget refused: what it would have cost (the inspector's "dropped for
    the budget" list; the selection counts them in ``skipped["budget"]`` either way)."""

    key: ItemKey
    tokens: int  # tokens it needed (its smallest form: the turn alone, the record's line)
    score: float  # its relevance in the selection, in [0, 1]


@dataclass
class Selection:
    """Selected evidence (chronological) and its serialisation."""

    evidence: list[Evidence]
    context: str
    tokens: int
    budget: int
    pool: int
    skipped: dict[str, int] = field(default_factory=dict)
    dropped: list[Dropped] = field(default_factory=list)  # refused for the budget, in the order refused


def fmt_day(iso: str | None) -> str | None:
    """The ``YYYY-MM-DD`` day of an ISO date or datetime (None stays None)."""
    return iso[:10] if iso else None


def fmt_time(span: TimeSpan | None) -> str | None:
    """Compact absolute time: 2023-05-07, 2023-05 (month), 2023 (year), a..b (range)."""
    if span is None or not (span.start or span.end):
        return None
    s, e = fmt_day(span.start), fmt_day(span.end)
    if span.granularity == "year" and s:
        return s[:4] if (e is None or e[:4] == s[:4]) else f"{s[:4]}..{e[:4]}"
    if span.granularity == "month" and s and (e is None or e[:7] == s[:7]):
        return s[:7]
    if s and e and s == e:
        return s
    return f"{s or ''}..{e or ''}"


def fmt_turn_ids(ids: Sequence[str]) -> str:
    """``D1:3,D1:4`` for one or two ids, ``D1:3-D1:9`` for more."""
    if len(ids) <= _MAX_LISTED_IDS:
        return ",".join(ids)
    return f"{ids[0]}-{ids[-1]}"


def group_header(conversation_id: str, session_date: str | None, show_conversation: bool) -> str:
    """``## 2023-05-08`` (+ the conversation id when several are in scope)."""
    head = f"## {fmt_day(session_date) or 'undated'}"
    return f"{head} ({conversation_id})" if show_conversation else head


def one_line(text: str) -> str:
    """``text`` with every whitespace run (line breaks included) as one space, ends stripped."""
    return " ".join(text.split())


def record_block(view: ConversationView, pos: int, show_source_ids: bool, show_tags: bool = False) -> str:
    """``- text``; with ids ``- D1:3 text``, with tags ``- [type, time] text`` (time only when it
    differs from the session date)."""
    src = f"{fmt_turn_ids(view.record_sources[pos])} " if show_source_ids and view.record_sources[pos] else ""
    tag = ""
    if show_tags:
        said = fmt_day(view.record_session_date[pos])
        t = fmt_time(view.record_time[pos])
        tag = "[" + view.record_type[pos] + (f", {t}" if t and t != said else "") + "] "
    return f"- {src}{tag}{one_line(view.record_text[pos])}"


def turns_block(view: ConversationView, positions: Sequence[int], show_source_ids: bool) -> str:
    """One ``Speaker: content`` line per turn of a window (``D1:3 Speaker: content`` with ids).

    Speaker and content are put on one line each, so no line starts with whitespace or holds a
    line break (what keeps :func:`rendered_tokens` exact)."""
    return "\n".join(
        f"{view.turn_ids[p] + ' ' if show_source_ids else ''}{one_line(view.turn_speaker[p]) or '?'}: {one_line(view.turn_text[p])}"
        for p in positions
    )


def passage_block(view: ConversationView, pos: int, show_source_ids: bool) -> str:
    """One ``Speaker (part k of n): text`` line for a passage (``D1:3 Speaker ...`` with ids)."""
    pc = view.passages
    tp = pc.turn[pos]
    head = f"{view.turn_ids[tp] + ' ' if show_source_ids else ''}{one_line(view.turn_speaker[tp]) or '?'}"
    return f"{head} (part {pc.part[pos] + 1} of {pc.count[pos]}): {one_line(pc.text[pos])}"


def line_tokens(text: str, encoding: str) -> int:
    """Tokens a line adds to the rendered context: the line with the newline that follows it
    (BPE often merges that newline into the line's last token, e.g. ``.\n``)."""
    return count_tokens(text + "\n", encoding)


@lru_cache(maxsize=_HEADER_CACHE)
def header_line_tokens(header: str, encoding: str) -> int:
    """:func:`line_tokens` of a session header (few distinct ones, counted on every query)."""
    return line_tokens(header, encoding)


def record_line_tokens(view: ConversationView, pos: int, show_source_ids: bool, encoding: str,
                       show_tags: bool = False) -> int:
    """:func:`line_tokens` of a record's line (cached on the view)."""
    key = ("rec_tok", pos, show_source_ids, show_tags, encoding)
    n = view.memo.get(key)
    if n is None:
        n = view.memo[key] = line_tokens(record_block(view, pos, show_source_ids, show_tags), encoding)
    return n


def turn_line_tokens(view: ConversationView, pos: int, show_source_ids: bool, encoding: str) -> int:
    """:func:`line_tokens` of a raw turn's line (cached on the view)."""
    key = ("turn_tok", pos, show_source_ids, encoding)
    n = view.memo.get(key)
    if n is None:
        n = view.memo[key] = line_tokens(turns_block(view, [pos], show_source_ids), encoding)
    return n


def passage_line_tokens(view: ConversationView, pos: int, show_source_ids: bool, encoding: str) -> int:
    """:func:`line_tokens` of a passage's line (cached on the view)."""
    key = ("passage_tok", pos, show_source_ids, encoding)
    n = view.memo.get(key)
    if n is None:
        n = view.memo[key] = line_tokens(passage_block(view, pos, show_source_ids), encoding)
    return n


def prime_line_tokens(view: ConversationView, show_source_ids: bool, encoding: str = DEFAULT_ENCODING,
                      show_tags: bool = False, pause: Pause | None = None) -> None:
    """Count every record and turn line of a freshly loaded view once (~12 µs a line), so queries
    never pay for a line they meet for the first time (a cold conversation costs ~25 ms more to
    load; every query after it saves the misses). A view extended by appended turns
    (query/view_extend.py) carries its memo over: only the lines not counted yet are."""
    key = ("primed", show_source_ids, show_tags, encoding)
    done_rec, done_turn = view.memo.get(key, (0, 0))
    for p in paced(range(done_rec, view.num_records), pause):
        record_line_tokens(view, p, show_source_ids, encoding, show_tags)
    for p in paced(range(done_turn, view.num_turns), pause):
        turn_line_tokens(view, p, show_source_ids, encoding)
    view.memo[key] = (view.num_records, view.num_turns)
    pkey = ("primed_passages", show_source_ids, encoding)
    for p in paced(range(view.memo.get(pkey, 0), view.num_passages), pause):
        passage_line_tokens(view, p, show_source_ids, encoding)
    view.memo[pkey] = view.num_passages


def render(units: Sequence[Evidence], show_conversation: bool) -> str:
    """Units in the given order, under a header per (conversation, session date) group."""
    lines: list[str] = []
    group = None
    for u in units:
        if u.group != group:
            group = u.group
            lines.append(group_header(u.conversation_id, group[1], show_conversation))
        lines.append(u.block)
    return "\n".join(lines)


def rendered_tokens(units: Sequence[Evidence], show_conversation: bool, encoding: str) -> int:
    """Exact token count of ``render(units, show_conversation)`` from the lines' known counts.

    No rendered line starts with whitespace or holds a line break (headers start with ``## ``,
    records with ``- ``, turns with the speaker), so the GPT pre-tokenizer never joins a line break
    with the text after it: the context's count is the sum of its lines each counted with its newline
    (the units' ``tokens`` and the headers'), less the newline the last line does not have. Counting
    the ~2,000-token context again would cost about a millisecond per query; tests compare the two."""
    if not units:
        return 0
    total = 0
    group = None
    for u in units:
        if u.group != group:
            group = u.group
            total += header_line_tokens(group_header(u.conversation_id, group[1], show_conversation), encoding)
        total += u.tokens
    last = units[-1].block.rpartition("\n")[2]
    return total - (line_tokens(last, encoding) - count_tokens(last, encoding))


__all__ = [
    "Dropped", "Evidence", "EvidenceKind", "Selection", "fmt_day", "fmt_time", "fmt_turn_ids", "group_header",
    "header_line_tokens", "line_tokens", "one_line", "passage_block", "passage_line_tokens", "prime_line_tokens",
    "record_block", "record_line_tokens", "render", "rendered_tokens", "turn_line_tokens", "turns_block",
]
