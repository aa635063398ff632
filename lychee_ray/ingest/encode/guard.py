"""Memory checks on every encode reply (docs/llm-quality.md).

A weak model (and, less often, a strong one) copies the reference context ρ_k into later segments,
cites the wrong turns, leaves ``entities`` empty or writes absurd dates — and the reply is still
valid, schema-conform JSON. :class:`RecordGuard` looks at each drafted record against the turns it
came from and the records already stored, repairs what code can repair, rejects the rest with a
reason, and says whether the reply as a whole is degenerate (the pipeline then retries the segment
once in repair mode and, failing that, marks it failed with ``degenerate_output``).

Checks, in order, per draft (thresholds: ``encoder.guard``):

1. structural (always on): empty text, unknown type, the same (type, text) twice in one reply (the
   copy's cited turns are added to the sources of the one kept);
2. *echo*: a near-copy (equal normalised text, or content-word Jaccard ≥ ``echo_jaccard``) of a
   reference-context record or an earlier record of the conversation is rejected unless the turns
   it cites say it again (≥ ``echo_keep_grounding`` of its words other than speaker names);
3. *grounded*: at least ``min_grounding`` of its content words occur in its cited turns (speaker
   names count as present: "I" → "Caroline" is a resolution, not an invention);
   a missing, out-of-segment or unsupported citation is re-attributed to the best-matching turns,
   and a draft no turn supports is rejected (``invalid_citation`` when it cited outside the
   segment, else ``ungrounded``);
4. *entities*: names in the text (speakers, entities known in the conversation, capitalised spans
   when the list is empty) are added when the model left them out;
5. *time*: a time far outside the session date's plausible range, or contradicting its own
   relative expression ("yesterday" written as another day), is recomputed from the expression by
   the code-side normaliser or dropped with the expression kept; relative words left in the text
   ("yesterday") become the absolute date.

Lexical, not embedding, similarity decides echoes and grounding: copying is a lexical act, and a
cosine between MiniLM vectors flags any two records on the same topic (legitimate in a conversation
that comes back to a hobby), so it cannot tell a copy from a new fact.
"""

from __future__ import annotations

import calendar
import functools
from dataclasses import dataclass, field
from datetime import date
from collections.abc import Iterable

from lychee_ray.ingest.encode.base import EncodeOutput, EncodeRequest, RecordDraft, TimeDraft, merge_into
from lychee_ray.ingest.encode.rules.metadata import extract_entities
from lychee_ray.ingest.encode.rules.speakers import display_name, mid_sentence_caps
from lychee_ray.config import GuardConfig
from lychee_ray.core.quality import QualityCounts
from lychee_ray.core.records import MemoryRecord, normalise_type
from lychee_ray.text.dates import to_date
from lychee_ray.text.lexical import ATTRIBUTION_TERMS, lexical_terms, normalised_text, stem
from lychee_ray.text.time.detect import find_time_expressions
from lychee_ray.text.time.normalise import normalise_time
from lychee_ray.text.time.rewrite import rewrite_relative

# Calendar words and numbers say when, not what: a record's "7 May 2023" grounded in a turn's
# "yesterday" must not count as an unsupported word.
_CALENDAR_TERMS = frozenset(
    stem(w.lower()) for w in (*calendar.month_name[1:], *calendar.month_abbr[1:], *calendar.day_name, *calendar.day_abbr)
)
# Reasons that make a reply degenerate when too many of its drafts have them.
_DEGENERATE_REASONS = ("echo", "ungrounded", "invalid_citation")


@functools.lru_cache(maxsize=1 << 16)
def content_terms(text: str) -> frozenset[str]:
    """Words that carry content: lexical terms minus attribution verbs, calendar words and numbers.
    (Memoised: an increment's guard accepts every stored record of the conversation again.)"""
    return frozenset(t for t in lexical_terms(text) if t not in ATTRIBUTION_TERMS and t not in _CALENDAR_TERMS
                     and not t.isdigit())


@functools.lru_cache(maxsize=1 << 16)
def _normalised(text: str) -> str:
    # memoised like content_terms: every increment's guard accepts the stored records again
    return normalised_text(text)


def _jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    return len(a & b) / len(a | b) if a and b else 0.0


@dataclass
class ConversationMemory:
    """What the guard knows about a conversation's stored records (grows segment by segment)."""

    texts: set[str] = field(default_factory=set)
    terms: list[frozenset[str]] = field(default_factory=list)
    entities: dict[str, str] = field(default_factory=dict)  # lower-case name -> name as written

    def copy(self) -> ConversationMemory:
        """An independent copy (the kept memory of an appending process stays as it was)."""
        return ConversationMemory(set(self.texts), list(self.terms), dict(self.entities))

    def accept(self, records: Iterable[MemoryRecord]) -> None:
        """Remember stored records (for echo checks) and their entities (for entity filling)."""
        for r in records:
            self.texts.add(_normalised(r.text))
            self.terms.append(content_terms(r.text))
            for e in r.entities:
                self.entities.setdefault(e.lower(), e)


@dataclass
class GuardedReply:
    """The reply after the checks: kept (possibly repaired) drafts and the accounting."""

    output: EncodeOutput
    counts: QualityCounts
    # texts rejected as echoes or unsupported (shown as "do not repeat" in repair mode)
    rejected_texts: list[str] = field(default_factory=list)

    @property
    def degenerate_rejections(self) -> int:
        return sum(self.counts.rejected.get(r, 0) for r in _DEGENERATE_REASONS)

    def is_degenerate(self, max_rejected_share: float) -> bool:
        """More than ``max_rejected_share`` of the judged drafts rejected as echo / unsupported."""
        judged = len(self.output.records) + self.degenerate_rejections
        return self.degenerate_rejections > 0 and self.degenerate_rejections > max_rejected_share * judged


class RecordGuard:
    """Checks and repairs one encode reply at a time (see the module docstring)."""

    def __init__(self, cfg: GuardConfig, *, day_first: bool = False) -> None:
        self.cfg = cfg
        self.day_first = day_first

    def check(self, output: EncodeOutput, request: EncodeRequest, memory: ConversationMemory) -> GuardedReply:
        """Judge every draft of ``output``; ``memory`` holds the conversation's earlier records."""
        counts = QualityCounts(drafts=len(output.records))
        reply = GuardedReply(EncodeOutput(records=[], resolution_state=output.resolution_state), counts)
        seen: set[tuple[str, str]] = set()
        kept_at: dict[tuple[str, str], int] = {}  # (type, text) -> position of the kept draft
        n_turns = {t.index for t in request.turns}
        ctx = _SegmentContext(request, memory) if self.cfg.enabled else None
        for d in output.records:
            text = " ".join(d.text.split())
            if not text:
                counts.reject("empty_text")
                continue
            rtype = normalise_type(d.type)
            if rtype is None:
                counts.reject("unknown_type")
                continue
            if (rtype, text) in seen:
                counts.reject("duplicate_in_reply")
                j = kept_at.get((rtype, text))
                if j is not None:  # the copy's turns said it too: they become sources of the one kept
                    copy = d.model_copy(update={"source_turns": [i for i in d.source_turns if i in n_turns]})
                    reply.output.records[j] = merge_into(reply.output.records[j], copy)
                continue
            seen.add((rtype, text))
            if ctx is None:
                kept_at[(rtype, text)] = len(reply.output.records)
                reply.output.records.append(d)
                continue
            kept = self._judge(d, text, ctx, counts)
            if kept is None:
                reply.rejected_texts.append(text)
                continue
            kept_at[(rtype, text)] = len(reply.output.records)
            reply.output.records.append(kept)
            ctx.add_reply_record(kept)
        counts.records = len(reply.output.records)
        return reply

    # -- one draft --------------------------------------------------------------------------------
    def _judge(self, d: RecordDraft, text: str, ctx: _SegmentContext, counts: QualityCounts) -> RecordDraft | None:
        cfg = self.cfg
        terms = content_terms(text)
        cited = list(dict.fromkeys(d.source_turns))
        valid = [j for j in cited if j in ctx.turn_terms]
        invalid = len(valid) < len(cited)
        own = ctx.grounding(terms, valid) if valid else 0.0
        best, best_g = ctx.best_turns(terms, cfg.max_reattributed_turns)
        # A near-copy is kept only when the turns it cites say it again: names do not count as
        # support here (every record of a two-person chat names them), and no re-attribution — the
        # fact is stored already, so a wrongly cited restatement loses nothing when rejected.
        if ctx.is_near_copy(text, terms, cfg.echo_jaccard) and ctx.restated(terms, valid) < cfg.echo_keep_grounding:
            counts.reject("echo")
            return None
        source = valid
        if not valid or own < cfg.min_grounding:
            if best and best_g >= cfg.min_grounding:
                source = best
                counts.repair("citation_fixed")
            else:
                counts.reject("invalid_citation" if invalid else "ungrounded")
                return None
        update: dict[str, object] = {"source_turns": source}
        ents = self._entities(d, text, ctx)
        if ents is not None:
            update["entities"] = ents
            counts.repair("entities_filled")
        ref = ctx.session_date(source)
        time = self._time(d.time, ref, counts)
        if time is not d.time:
            update["time"] = time
        if cfg.rewrite_relative_text and ref is not None:
            new_text, mentions = rewrite_relative(text, ref, day_first=self.day_first)
            # a text that already names an absolute date was resolved by its writer ("the weekend of
            # 8–9 July 2023" would otherwise read as the relative "the weekend" again)
            if new_text != text and all(m.relative for m in mentions):
                update["text"] = new_text
                counts.repair("relative_time_rewritten")
        if update["source_turns"] == d.source_turns and len(update) == 1:
            return d  # untouched: a clean reply's drafts pass through as they are
        return d.model_copy(update=update)

    def _entities(self, d: RecordDraft, text: str, ctx: _SegmentContext) -> list[str] | None:
        """The draft's entities with the missing names added, or None when nothing is missing."""
        have = [e.strip() for e in d.entities if e and e.strip()]
        low = {e.lower() for e in have}
        found = extract_entities(text, ctx.known, ctx.seen_caps, self.cfg.max_filled_entities)
        add = [e for e in found if e.lower() not in low and (not have or e.lower() in ctx.known)]
        room = max(0, self.cfg.max_filled_entities - len(have)) if have else self.cfg.max_filled_entities
        add = add[:room]
        return have + add if add else None

    def _time(self, t: TimeDraft | None, ref: date | None, counts: QualityCounts) -> TimeDraft | None:
        """The draft's time, corrected or dropped when implausible or self-contradicting."""
        if t is None or ref is None or not (t.start or t.end):
            return t
        span = normalise_time(TimeDraft(start=t.start, end=t.end), None, ref, day_first=self.day_first)
        if span.start is None:
            return t  # unreadable: the normaliser falls back to the expression / text anyway
        mentions = find_time_expressions(t.expression, ref, day_first=self.day_first) if t.expression else []
        expr = next((m.time for m in mentions if m.time.start), None)
        relative = any(m.relative for m in mentions)
        lo, hi = to_date(span.start), to_date(span.end or span.start)
        implausible = lo is None or hi is None or lo.year < ref.year - self.cfg.time_past_years \
            or hi.year > ref.year + self.cfg.time_future_years
        e_lo, e_hi = (to_date(expr.start), to_date(expr.end or expr.start)) if expr is not None else (None, None)
        contradicts = (relative and lo is not None and hi is not None and e_lo is not None and e_hi is not None
                       and not (lo <= e_hi and e_lo <= hi))
        if not (implausible or contradicts):
            return t
        if expr is not None:
            counts.repair("time_corrected")
            return TimeDraft(start=expr.start, end=expr.end or expr.start, expression=t.expression)
        counts.repair("time_dropped")
        return TimeDraft(start=None, end=None, expression=t.expression)


class _SegmentContext:
    """Per-reply lookups: turn vocabularies, known names, what counts as an earlier record."""

    def __init__(self, request: EncodeRequest, memory: ConversationMemory) -> None:
        self.turns = {t.index: t for t in request.turns}
        names = list(dict.fromkeys([display_name(t.speaker, t.role) for t in request.turns]
                                   + [display_name(s) for s in request.speakers if s]))
        self.known: dict[str, str] = dict(memory.entities)
        for n in names:
            self.known[n.lower()] = n
            self.known.setdefault(n.split()[0].lower(), n)
        # Only the speakers' names count as present in any turn (a turn's "I" is its speaker): the
        # entity strings a model wrote earlier ("lake sunrise") would otherwise ground their own copies.
        self.name_terms = frozenset(w for n in names for part in (n, n.split()[0]) for w in lexical_terms(part))
        self.turn_terms = {i: frozenset(lexical_terms(t.content)) | frozenset(lexical_terms(t.speaker))
                           for i, t in self.turns.items()}
        self.seen_caps = mid_sentence_caps(request.turns)
        self.earlier_texts = set(memory.texts) | {normalised_text(t) for t in request.prev_records}
        self.earlier_terms = list(memory.terms) + [content_terms(t) for t in request.prev_records]

    def grounding(self, terms: frozenset[str], idx: list[int]) -> float:
        """Share of ``terms`` found in the turns ``idx`` (names of speakers / known entities count)."""
        if not terms:
            return 1.0
        vocab = self.name_terms.union(*(self.turn_terms[i] for i in idx)) if idx else self.name_terms
        return len(terms & vocab) / len(terms)

    def restated(self, terms: frozenset[str], idx: list[int]) -> float:
        """Share of the non-name words of a near-copy that its cited turns say again (0 without any)."""
        words = terms - self.name_terms
        if not words or not idx:
            return 0.0
        return len(words & frozenset().union(*(self.turn_terms[i] for i in idx))) / len(words)

    def best_turns(self, terms: frozenset[str], limit: int) -> tuple[list[int], float]:
        """Greedy: add the turn covering most still-uncovered words, up to ``limit`` turns."""
        if not terms:
            return ([min(self.turns)] if self.turns else []), 1.0
        left = set(terms - self.name_terms)
        chosen: list[int] = []
        while left and len(chosen) < limit:
            i, gain = max(((i, len(left & w)) for i, w in self.turn_terms.items() if i not in chosen),
                          key=lambda x: (x[1], -x[0]), default=(None, 0))
            if i is None or gain == 0:
                break
            chosen.append(i)
            left -= self.turn_terms[i]
        return sorted(chosen), self.grounding(terms, chosen)

    def is_near_copy(self, text: str, terms: frozenset[str], jaccard: float) -> bool:
        if normalised_text(text) in self.earlier_texts:
            return True
        return any(_jaccard(terms, t) >= jaccard for t in self.earlier_terms)

    def add_reply_record(self, d: RecordDraft) -> None:
        """Names a kept draft lists become known for the reply's later drafts."""
        for e in d.entities:
            self.known.setdefault(e.lower(), e)

    def session_date(self, idx: list[int]) -> date | None:
        """The reference date for relative times: the first cited turn's session date."""
        for i in idx or sorted(self.turns):
            d = to_date(self.turns[i].session_date)
            if d is not None:
                return d
        return None


__all__ = ["ConversationMemory", "GuardedReply", "RecordGuard", "content_terms"]
