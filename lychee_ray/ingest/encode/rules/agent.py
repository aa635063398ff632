"""Records from agent work for the ``rules`` backend (docs/agent-logs.md).

Agent logs carry their facts in structure, not in prose: a tool call names a tool and its
arguments, its result is JSON, and the identifiers a later agent asks for (reservation codes, order
numbers, e-mail addresses, amounts, dates) sit verbatim in both. Everything here is derived from
that structure, deterministically, and keeps the specifics verbatim:

* ``tool_affordance`` — what a tool was used for and with which arguments (the user's request it served);
* ``fact`` — state a lookup returned (a tool whose name starts with one of ``read_prefixes``), one
  record per field group or list item, each opening with the call (``get_user_details(user_id=…)``)
  so it stands alone;
* ``event`` — an action that changed something (any other tool), with its date, the user and the result;
* ``failure_pattern`` — a tool error, a hand-over to a human (``transfer_words``), the agent refusing
  a request, the user correcting the agent;
* ``procedure`` — the multi-step flow of a segment that ended in an action;
* ``constraint`` — the rules of a system prompt (:func:`policy_records`).

Records are attributed by role: what the assistant said or did is the agent's ("the agent …"), a
tool's output is the tool's, what the user said stays the user's (the sentence records of
:mod:`.encoder`). How a call and its result are written as record text (JSON rendered and chunked,
errors recognised, a call's short signature) is :mod:`.tool_results`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from lychee_ray.ingest.encode.base import EncodeRequest, RecordDraft, SegmentTurn, TimeDraft
from lychee_ray.ingest.encode.rules.object_state import StateGroup, state_groups
from lychee_ray.ingest.encode.rules.tool_results import (
    args_text,
    cut,
    is_error_result,
    one_line,
    render,
    result_body,
    result_chunks,
    short_signature,
    state_chunks,
)
from lychee_ray.config import ToolRecordsConfig
from lychee_ray.core.tools import CALL_ARROW, ToolCall
from lychee_ray.text.sentences import split_sentences

# How the assistant is named in records (its turns' speaker is usually just "assistant").
AGENT = "the agent"
# An assistant sentence that declines the user's request.
REFUSAL = re.compile(
    r"\b(?:i(?:'m| am) (?:sorry|afraid)[^.!?]*\b(?:can(?:no|')t|unable|not (?:able|possible|allowed|permitted))|"
    r"i (?:can(?:no|')t|am unable to|am not able to|won't be able to)|(?:is|are) not (?:allowed|permitted|eligible|possible)|"
    r"against (?:our |the )?polic(?:y|ies)|not (?:able|possible) to (?:do|process|help|change|cancel|modify))", re.I)
# A user sentence that corrects what the agent said or did: strong cues count anywhere, a bare "no"
# only right after an agent statement (after a question it is an answer).
# "Actually" corrects only with a negation, "instead" or "I meant" after it ("Actually, I'd also like to
# return the sleeping bag" adds a request); "wrong" only as a verdict on what the agent said or did.
CORRECTION = re.compile(
    r"(?:\bthat(?:'s| is| was)(?: not| wrong| incorrect)|\bnot what i\b|\bi (?:said|meant)\b|"
    r"^actually\b[^.!?]*\b(?:not|n't|no|instead|i (?:said|meant|asked))\b|"
    r"\byou (?:got|made) (?:it|that|a mistake)|\b(?:that|this|it) (?:is|was)(?:n't| not) (?:right|correct)|"
    r"\b(?:you(?:'re| are| have| got)|(?:that|this|it)(?:'s| is| was)) (?:\w+ )?wrong\b|"
    r"\bwrong (?:one|reservation|order|flight|item|date|number|address|name|amount|card|account|city|seat)\b)", re.I)
WEAK_CORRECTION = re.compile(r"^(?:no|nope|wait)\b", re.I)
# A system-prompt sentence that states a rule (modal or limiting words).
_RULE = re.compile(
    r"\b(?:must|should|shall|cannot|can't|can not|can only|only|at most|at least|never|always|not allowed|"
    r"do not|don't|does not|need to|needs to|required|requires|allowed|prohibited|forbidden|deny|refuse|"
    r"if and only if|unless|no more than|up to|free|eligible|not be)\b", re.I)
_HEADER = re.compile(r"^\s{0,3}#{1,6}\s*(.+?)\s*#*\s*$")
_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+")


def strip_calls(text: str) -> str:
    """An assistant turn's text without its rendered tool-call lines (what it *said*)."""
    return "\n".join(line for line in text.split("\n") if not line.startswith(CALL_ARROW)).strip()


@dataclass
class _Call:
    """One call of the segment with its result turn (None: unanswered in this segment)."""

    call: ToolCall
    turn: SegmentTurn
    result: SegmentTurn | None
    request: str | None  # the user's request it served (first sentence of the last user turn before it)


class AgentRecords:
    """Derives the records of tool traffic, failures and flows of one segment (see the module doc)."""

    def __init__(self, cfg: ToolRecordsConfig, max_entities: int, max_topics: int) -> None:
        self.cfg = cfg
        self.max_entities = max_entities
        self.max_topics = max_topics
        self._read = tuple(p.lower() for p in cfg.read_prefixes)
        self._transfer = tuple(w.lower() for w in cfg.transfer_words)
        self._notes = {n.lower() for n in cfg.note_tools}
        self._ends = tuple(p.lower() for p in cfg.end_prefixes)

    # -- tool kinds ------------------------------------------------------------------------------
    def is_note(self, name: str) -> bool:
        return name.lower() in self._notes

    def is_transfer(self, name: str) -> bool:
        low = name.lower()
        return any(w in low for w in self._transfer)

    def is_end(self, name: str) -> bool:
        """A call that ends the object it acts on (``cancel_reservation``): its name's first word is an end prefix."""
        return _first_word(name) in self._ends

    def is_read(self, name: str) -> bool:
        """A lookup: the tool name's first word (``get_user``, ``lookupOrder``) is a read prefix."""
        return _first_word(name) in self._read

    # -- the segment -----------------------------------------------------------------------------
    def segment_records(self, request: EncodeRequest) -> list[RecordDraft]:
        """Tool traffic, failures and the flow of one dialogue segment."""
        calls = self._calls(request)
        out: list[RecordDraft] = []
        for c in calls:
            out.extend(self._call_records(c, request))
        out.extend(self._dialogue_failures(request))
        flow = self._procedure(calls, request)
        if flow is not None:
            out.append(flow)
        for d in out:  # every record one bounded, capitalised sentence (a call's arguments can be long)
            d.text = cut(_cap(d.text), 2 * self.cfg.max_record_chars)
        return out

    def _calls(self, request: EncodeRequest) -> list[_Call]:
        """The segment's calls in order, each with the result that answers it: the first tool turn
        after it naming its call id (ids are reused by some models once a call is answered)."""
        request_text: str | None = None
        out: list[_Call] = []
        for t in request.turns:
            if t.role == "user" and t.content.strip():
                request_text = self._request_gist(t.content)
            if t.role == "tool" and t.tool_call_id:
                waiting = [c for c in out if c.result is None and c.call.call_id == t.tool_call_id]
                if waiting:
                    waiting[-1].result = t
            for call in t.tool_calls:
                out.append(_Call(call, t, None, request_text))
        return out

    def _request_gist(self, text: str) -> str | None:
        """What the user asked for: the first sentence of at least three words (else the turn's
        start), cut to ``request_chars``."""
        line = one_line(text)
        first = next((x for x in split_sentences(line) if len(x.split()) >= 3), line)
        return cut(first, self.cfg.request_chars) if first else None

    def _call_records(self, c: _Call, request: EncodeRequest) -> list[RecordDraft]:
        name, sig = c.call.name, short_signature(c.call, self.cfg.short_arg_chars)
        day = _day(c.turn.session_date)
        sources = [c.turn.index] + ([c.result.index] if c.result is not None else [])
        user = _user(request)
        ents = self._entities(c.call, request)
        topics = self._topics(name)
        time = TimeDraft(start=day, end=day) if day else None
        cap = self.cfg.max_record_chars
        if self.is_note(name):
            args = c.call.parsed_arguments()
            note = render(args) if isinstance(args, dict) and args else c.call.arguments
            if not note.strip():
                return []
            return [RecordDraft(type="fact", text=cut(f"{_cap(AGENT)} noted: {one_line(note)}", cap * 2),
                                entities=ents, topics=topics, source_turns=[c.turn.index])]
        out: list[RecordDraft] = []
        purpose = f" to handle the user's request: {c.request}" if c.request else ""
        out.append(RecordDraft(type="tool_affordance", text=f"{_cap(AGENT)} used the tool {name} with arguments "
                                                            f"{args_text(c.call)}{purpose}",
                               entities=ents, topics=topics, source_turns=[c.turn.index]))
        when = f"On {day}, " if day else ""
        if c.result is None:
            return out
        body = result_body(c.result)
        if is_error_result(c.result):
            out.append(RecordDraft(type="failure_pattern", text=f"{when}{AGENT}'s call {sig}{user} failed: "
                                                                f"{cut(one_line(body), cap)}",
                                   entities=ents, topics=[*topics, "error"][: self.max_topics], time=time,
                                   source_turns=sources))
            return out
        parts = self._result_parts(c.call, body) if body.strip() else []
        chunks = [p for p, _ in parts]
        if self.is_transfer(name):
            out.append(RecordDraft(type="failure_pattern", text=f"{when}{AGENT} handed the conversation{user} over to a "
                                                                f"human agent ({sig}): {cut(one_line(body), cap)}",
                                   entities=ents, topics=[*topics, "transfer"][: self.max_topics], time=time,
                                   source_turns=sources))
        elif self.is_read(name):
            for chunk, g in parts:
                out.append(RecordDraft(type="fact", text=f"{sig} returned: {chunk}", entities=ents, topics=topics,
                                       source_turns=sources, **_slot(g)))
        else:
            first = f"; result: {chunks[0]}" if chunks else ""
            g0 = parts[0][1] if parts else None
            out.append(RecordDraft(type="event", text=f"{when}{AGENT} performed {sig}{user}{first}", entities=ents,
                                   topics=topics, time=time, source_turns=sources, **_slot(g0),
                                   ends=g0 is not None and self.is_end(name)))
            for chunk, g in parts[1:]:
                out.append(RecordDraft(type="fact", text=f"After {sig}: {chunk}", entities=ents, topics=topics,
                                       source_turns=sources, **_slot(g)))
        return out

    def _result_parts(self, call: ToolCall, body: str) -> list[tuple[str, StateGroup | None]]:
        """A successful result's record texts, each with the state group (slot) it shows: an
        object's state is split by field group (:mod:`.object_state`), any other result as
        :func:`result_chunks` splits it."""
        cap, most = self.cfg.max_record_chars, self.cfg.max_records_per_result
        try:
            value = json.loads(body)
        except (json.JSONDecodeError, TypeError):
            value = None
        groups = state_groups(call, value) if not self.is_transfer(call.name) else []
        if groups:
            return [(chunk, g) for chunk, g in state_chunks(groups, cap, most)]
        return [(chunk, None) for chunk in result_chunks(body, cap, most)]

    def _dialogue_failures(self, request: EncodeRequest) -> list[RecordDraft]:
        """The agent refusing a request; the user correcting the agent right after its turn. Only where
        an agent takes part: in a chat between people (every turn a user's) nobody is "the agent"."""
        out: list[RecordDraft] = []
        if not any(t.role == "assistant" for t in request.turns):
            return out
        prev_role, prev_asked = None, False
        cap = self.cfg.max_record_chars
        for t in request.turns:
            said = strip_calls(t.content) if t.role == "assistant" else t.content if t.role == "user" else ""
            day = _day(t.session_date)
            when = f"On {day}, " if day else ""
            if said:
                for s in split_sentences(one_line(said)):
                    if t.role == "assistant" and REFUSAL.search(s):
                        out.append(RecordDraft(type="failure_pattern", text=f"{when}{AGENT} declined{_user(request)}: "
                                                                            f"{cut(s, cap)}",
                                               entities=[], topics=["refusal"], source_turns=[t.index]))
                        break
                    # a "no" that answers the agent's question is an answer, not a correction
                    if t.role == "user" and (CORRECTION.search(s) or (
                            prev_role == "assistant" and not prev_asked and WEAK_CORRECTION.search(s))):
                        who = f"user {request.user_id}" if _has_user(request) else "the user"
                        out.append(RecordDraft(type="failure_pattern", text=f"{_cap(when)}{who} corrected "
                                                                            f"{AGENT}: {cut(s, cap)}",
                                               entities=[], topics=["correction"], source_turns=[t.index]))
                        break
            if t.role in ("user", "assistant") and (said or t.tool_calls):
                prev_role = t.role
                prev_asked = said.rstrip().endswith("?")
        return out

    def _procedure(self, calls: list[_Call], request: EncodeRequest) -> RecordDraft | None:
        """The segment's flow: two or more tool steps that include an action."""
        steps = [c for c in calls if not self.is_note(c.call.name)]
        acts = [c for c in steps if not self.is_read(c.call.name) and not self.is_transfer(c.call.name)]
        if len(steps) < 2 or not acts:
            return None
        goal = next((c.request for c in acts if c.request), None)
        chain = f" {CALL_ARROW} ".join(_step(c, self.cfg.short_arg_chars) for c in steps)
        head = f"To handle the request \"{goal}\", " if goal else ""
        text = cut(f"{head}{AGENT} ran these steps: {chain}", self.cfg.max_record_chars * 2)
        ents = list(dict.fromkeys(e for c in steps for e in self._entities(c.call, request)))[: self.max_entities]
        return RecordDraft(type="procedure", text=_cap(text), entities=ents,
                           topics=list(dict.fromkeys(t for c in acts for t in self._topics(c.call.name)))[: self.max_topics],
                           source_turns=sorted({c.turn.index for c in steps} | {c.result.index for c in steps if c.result}))

    # -- metadata --------------------------------------------------------------------------------
    def _entities(self, call: ToolCall, request: EncodeRequest) -> list[str]:
        """The call's identifying values (argument strings and numbers) and the user: what exact
        key matches (entity nodes) and the lexical channel find the record by."""
        args = call.parsed_arguments()
        vals: list[str] = []
        if isinstance(args, dict):
            for v in args.values():
                for x in (v if isinstance(v, list) else [v]):
                    if isinstance(x, (str, int, float)) and not isinstance(x, bool) and 0 < len(str(x)) <= 64:
                        vals.append(str(x))
        if _has_user(request):
            vals.append(request.user_id)
        return list(dict.fromkeys(vals))[: self.max_entities]

    def _topics(self, name: str) -> list[str]:
        words = [w.lower() for w in re.split(r"[_\W]+|(?<=[a-z])(?=[A-Z])", name) if len(w) > 2]
        return list(dict.fromkeys([name.lower(), *words]))[: self.max_topics]


def policy_records(request: EncodeRequest, cfg: ToolRecordsConfig, max_topics: int) -> list[RecordDraft]:
    """The rules a system prompt states, one ``constraint`` record each (``Policy (section): …``),
    at most ``max_policy_records``, in order; its other sentences are context, not memory."""
    out: list[RecordDraft] = []
    for t in request.turns:
        section = ""
        for line in t.content.splitlines():
            header = _HEADER.match(line)
            if header:
                section = one_line(header.group(1))
                continue
            text = _BULLET.sub("", line).strip()
            if not text:
                continue
            for s in split_sentences(one_line(text)):
                if len(out) >= cfg.max_policy_records:
                    return out
                if len(s.split()) < 4 or not _RULE.search(s):
                    continue
                where = f" ({section})" if section else ""
                topics = [w.lower() for w in re.findall(r"[A-Za-z]{3,}", section)][:max_topics]
                out.append(RecordDraft(type="constraint", text=f"Policy{where}: {cut(s, cfg.max_record_chars)}",
                                       entities=[], topics=topics, source_turns=[t.index]))
    return out


def _slot(group: StateGroup | None) -> dict[str, Any]:
    """A record's slot fields for the state group it shows (none for other records)."""
    return {"slot": group.slot, "slot_value": group.value} if group is not None else {}


def _first_word(name: str) -> str:
    words = [w for w in re.split(r"[_\W]+|(?<=[a-z0-9])(?=[A-Z])", name) if w]
    return words[0].lower() if words else ""


def _day(session_date: str | None) -> str | None:
    return session_date[:10] if session_date and len(session_date) >= 10 else None


def _has_user(request: EncodeRequest) -> bool:
    """True when the conversation names a user of its own (not just its id as the default owner)."""
    return bool(request.user_id) and request.user_id != request.conversation_id


def _user(request: EncodeRequest) -> str:
    return f" for user {request.user_id}" if _has_user(request) else ""


# A text that opens with an identifier (a tool's name: ``get_order_details(...) returned``) keeps its case.
_IDENTIFIER_START = re.compile(r"^[a-z]\w*(?:[_(.]|[A-Z])")


def _cap(text: str) -> str:
    return text if _IDENTIFIER_START.match(text) else text[:1].upper() + text[1:]


def _step(c: _Call, max_arg_chars: int) -> str:
    outcome = " (failed)" if c.result is not None and is_error_result(c.result) else ""
    return f"{short_signature(c.call, max_arg_chars)}{outcome}"


__all__ = ["AGENT", "AgentRecords", "policy_records", "strip_calls"]
