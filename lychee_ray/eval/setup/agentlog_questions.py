"""Questions a later agent would ask about an agent log, derived from its tool traffic.

Agent logs come without QA. What a later agent needs from them is what the tools said and did:
the state a lookup returned, what an action changed, what failed. This module derives one set of
such questions from the structure of any log (no dataset-specific templates), each with exact
answer tokens and its gold messages, so that retrieval can be scored with the same metrics as
LoCoMo (answer in context, gold-message coverage):

* ``lookup`` — a field of a lookup's JSON result: "What is the <field> of <subject>?", the subject
  named by the call's identifying argument ("reservation JG7FMM"), or for a list result by the
  item's own identifying field ("flight_number HAT069 in the search_direct_flight results for
  origin JFK, destination SEA, date 2024-05-20"); gold: the result message;
* ``change`` — an action's identifying argument: "Which reservation_id did the agent use when it
  called cancel_reservation for user … on 2024-05-15?"; gold: the call and its result;
* ``failure`` — why a call failed: "Why did the agent's call to book_reservation … fail?"; the
  answer is the error text; gold: the result.

A question is kept only when its answer is not in its own text, no other question of the same
conversation has the same text with another answer (so it has one right answer), and the answer is
specific (lookups): it occurs at most ``max_answer_occurrences`` times in the conversation's text
(finding "available" or "economy" in a context says nothing about whether the right message was
found; a change's target id is named all through its conversation, and that is fine: the question
asks which one the action used). Which fields
become questions is a stable hash of the conversation, call and field (not the first ones: the
first fields of a result are the ones its call names). A tool is a lookup when its name's first
word is one of :data:`LOOKUP_WORDS` — the benchmark's own definition, kept apart from the
encoder's configuration so that tuning one cannot tune the other.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any
from collections.abc import Callable, Iterable, Iterator

from lychee_ray.core.conversation import Conversation, QAItem, Turn
from lychee_ray.core.tools import ToolCall

KINDS = ("lookup", "change", "failure")
LOOKUP_WORDS = frozenset({"get", "search", "list", "find", "lookup", "look", "fetch", "read", "query", "retrieve",
                          "check", "view", "show", "describe"})
_ERROR = re.compile(r"^\s*(?:error|exception|failed|failure)\b[:\s-]*", re.I)
# Answers are specific values: short enough to be one fact, long enough not to match by chance.
_MIN_ANSWER_CHARS = 2
_MAX_ANSWER_CHARS = 60
# Identifying values (ids, codes, names with digits): what names a subject.
_ID_LIKE = re.compile(r"^(?=.*[\dA-Z_@.-])[\w@.+-]{3,64}$")
_WORD_SPLIT = re.compile(r"[_\W]+|(?<=[a-z0-9])(?=[A-Z])")


@dataclass(frozen=True)
class QuestionLimits:
    """How many questions of each kind one conversation gives at most (``eval.agentlog``)."""

    lookup_per_result: int
    per_kind: int
    max_answer_occurrences: int


def _first_word(name: str) -> str:
    words = [w for w in _WORD_SPLIT.split(name) if w]
    return words[0].lower() if words else ""


def is_lookup(name: str) -> bool:
    """The benchmark's definition of a lookup tool (its name's first word)."""
    return _first_word(name) in LOOKUP_WORDS


def _human(key: str) -> str:
    return " ".join(w for w in _WORD_SPLIT.split(key) if w).lower() or key


def _scalar(v: Any) -> str | None:
    """A leaf value usable as an answer (strings and numbers of a sensible length), else None."""
    if isinstance(v, bool) or v is None:
        return None
    s = str(v).strip()
    return s if _MIN_ANSWER_CHARS <= len(s) <= _MAX_ANSWER_CHARS else None


def _subject(args: Any) -> str | None:
    """The call's identifying argument as ``key value`` (the first id-like string argument)."""
    if not isinstance(args, dict):
        return None
    for k, v in args.items():
        if isinstance(v, (str, int)) and not isinstance(v, bool) and _ID_LIKE.match(str(v)):
            return f"{k} {v}"
    return None


def _all_args(args: Any) -> str:
    """Every scalar argument as ``key value`` pairs (a search's subject: all its criteria)."""
    if not isinstance(args, dict):
        return ""
    return ", ".join(f"{k} {v}" for k, v in args.items() if _scalar(v) is not None)


def _leaves(value: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], str]]:
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _leaves(v, (*path, str(k)))
    elif isinstance(value, list):
        for v in value:
            if not isinstance(v, (dict, list)):
                continue  # list positions are no way to ask for a value
            yield from _leaves(v, path)
    else:
        s = _scalar(value)
        if s is not None and path:
            yield path, s


def _unique_leaves(value: Any, skip: set[str]) -> list[tuple[tuple[str, ...], str]]:
    """The leaves whose path occurs once in ``value`` (a path repeated over list items has no one
    answer) and whose value is not one of ``skip`` (the call's own arguments)."""
    leaves = list(_leaves(value))
    count: dict[tuple[str, ...], int] = {}
    for p, _ in leaves:
        count[p] = count.get(p, 0) + 1
    return [(p, v) for p, v in leaves if count[p] == 1 and v not in skip]


def _alnum(text: str) -> str:
    return re.sub(r"[\W_]+", "", text).lower()


def _pick(items: list[Any], n: int, *salt: str) -> list[Any]:
    """``n`` of ``items`` chosen by a stable hash (the same picks on every run and machine)."""
    def h(i: int) -> str:
        return hashlib.sha256("\x1f".join([*salt, str(i)]).encode("utf-8")).hexdigest()
    order = sorted(range(len(items)), key=h)[:n]
    return [items[i] for i in sorted(order)]


def _parse(text: str) -> Any:
    try:
        return json.loads(text)
    except (json.JSONDecodeError, TypeError):
        return None


@dataclass
class _Exchange:
    call: ToolCall
    call_turn: Turn
    result: Turn
    date: str | None


def _exchanges(conv: Conversation) -> list[_Exchange]:
    """Every call with the tool turn answering it, in order."""
    open_calls: dict[str, tuple[ToolCall, Turn]] = {}
    out: list[_Exchange] = []
    for _, s, _, t in conv.iter_turns():
        for c in t.tool_calls:
            open_calls[c.call_id] = (c, t)
        if t.role == "tool" and t.tool_call_id in open_calls:
            c, ct = open_calls.pop(t.tool_call_id)
            date = (ct.timestamp or s.started_at or "")[:10] or None
            out.append(_Exchange(c, ct, t, date))
    return out


def _lookup_questions(conv: Conversation, ex: _Exchange, limits: QuestionLimits) -> Iterator[tuple[str, str, list[str]]]:
    value = _parse(ex.result.content)
    args = ex.call.parsed_arguments()
    arg_values = {str(v) for v in (args.values() if isinstance(args, dict) else [])}
    gold = [ex.result.turn_id]
    if isinstance(value, dict):
        subject = _subject(args) or _all_args(args)
        if not subject:
            return
        leaves = _unique_leaves(value, arg_values)
        for path, answer in _pick(leaves, limits.lookup_per_result, conv.conversation_id, ex.result.turn_id):
            field = " ".join(_human(k) for k in path[-2:])
            yield f"What is the {field} of {_human(subject.split(' ', 1)[0])} {subject.split(' ', 1)[1]}?", answer, gold
    elif isinstance(value, list):
        items = [v for v in value if isinstance(v, dict)] or [x for v in value if isinstance(v, list) for x in v
                                                               if isinstance(x, dict)]
        criteria = _all_args(args)
        keyed = []
        for item in items:
            key = next(((k, str(v)) for k, v in item.items() if isinstance(v, str) and _ID_LIKE.match(v)), None)
            if key is not None:
                keyed.append((key, item))
        for (k, kv), item in _pick(keyed, limits.lookup_per_result, conv.conversation_id, ex.result.turn_id):
            leaves = _unique_leaves(item, arg_values | {kv})
            for path, answer in _pick(leaves, 1, conv.conversation_id, ex.result.turn_id, kv):
                field = " ".join(_human(x) for x in path[-2:])
                within = f" in the {_human(ex.call.name)} results for {criteria}" if criteria else ""
                yield f"What is the {field} of {_human(k)} {kv}{within}?", answer, gold


def _change_questions(conv: Conversation, ex: _Exchange) -> Iterator[tuple[str, str, list[str]]]:
    args = ex.call.parsed_arguments()
    if not isinstance(args, dict):
        return
    target = next(((k, str(v)) for k, v in args.items()
                   if isinstance(v, (str, int)) and not isinstance(v, bool) and _ID_LIKE.match(str(v))
                   and str(v) != conv.user_id), None)
    if target is None:
        return
    user = f" for user {conv.user_id}" if conv.user_id != conv.conversation_id else ""
    when = f" on {ex.date}" if ex.date else ""
    yield (f"Which {_human(target[0])} did the agent use when it called {ex.call.name}{user}{when}?", target[1],
           [ex.call_turn.turn_id, ex.result.turn_id])


def _failure_questions(conv: Conversation, ex: _Exchange) -> Iterator[tuple[str, str, list[str]]]:
    reason = _ERROR.sub("", ex.result.content.strip(), count=1).strip().rstrip(".")
    if not (_MIN_ANSWER_CHARS <= len(reason) <= 2 * _MAX_ANSWER_CHARS):
        return
    subject = _subject(ex.call.parsed_arguments())
    about = f" with {subject}" if subject else ""
    when = f" on {ex.date}" if ex.date else ""
    yield f"Why did the agent's call to {ex.call.name}{about}{when} fail?", reason, [ex.result.turn_id]


def _is_failure(result: Turn) -> bool:
    if result.meta.get("is_error") is True or _ERROR.match(result.content or ""):
        return True
    value = _parse(result.content)
    return isinstance(value, dict) and bool(value.get("error"))


def derive_questions(conv: Conversation, limits: QuestionLimits, normalize: Callable[[str], str],
                     kinds: Iterable[str] | None = None) -> list[QAItem]:
    """The conversation's tool-traffic questions (see the module doc), at most ``limits.per_kind`` of
    each kind; ``normalize``: the answer-in-context normalisation the specificity check counts with
    (:func:`~lychee_ray.eval.metrics.locomo.locomo_normalize`)."""
    wanted = set(kinds) if kinds else set(KINDS)
    by_kind: dict[str, list[tuple[str, str, list[str]]]] = {k: [] for k in KINDS}
    for ex in _exchanges(conv):
        if _is_failure(ex.result):
            by_kind["failure"].extend(_failure_questions(conv, ex))
        elif is_lookup(ex.call.name):
            by_kind["lookup"].extend(_lookup_questions(conv, ex, limits))
        else:
            by_kind["change"].extend(_change_questions(conv, ex))
    corpus = f" {' '.join(normalize(t.text) for *_, t in conv.iter_turns())} "

    def specific(answer: str) -> bool:
        norm = normalize(answer)
        return bool(norm) and corpus.count(f" {norm} ") <= limits.max_answer_occurrences

    out: list[QAItem] = []
    for kind in KINDS:
        if kind not in wanted:
            continue
        answers: dict[str, set[str]] = {}
        for q, a, _ in by_kind[kind]:
            answers.setdefault(q, set()).add(a)
        usable, seen = [], set()
        for q, a, gold in by_kind[kind]:
            if len(answers[q]) != 1 or q in seen or _alnum(a) in _alnum(q) or (kind == "lookup" and not specific(a)):
                continue  # ambiguous, repeated, or answered by its own text
            seen.add(q)
            usable.append((q, a, gold))
        for i, (q, a, gold) in enumerate(_pick(usable, limits.per_kind, conv.conversation_id, kind)):
            out.append(QAItem(conversation_id=conv.conversation_id, question_id=f"{conv.conversation_id}-{kind}{i}",
                              question=q, answer=a, category=kind, evidence=gold,
                              meta={"source": "tool_traffic", "user_id": conv.user_id}))
    return out


__all__ = ["KINDS", "LOOKUP_WORDS", "QuestionLimits", "derive_questions", "is_lookup"]
