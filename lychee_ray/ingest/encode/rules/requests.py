"""A user's statements out of the questions they are asked in (assistant chats).

People tell an assistant their news inside a request: "I secured 5 interviews — how can I prepare
for them?", "I'm thinking of attending the mixer at Coral Bay Hotel on May 10, Laura recommended it,
can you help me figure out what to expect?". Kept as one question, the update is a long "asked"
record that neither reads nor ranks as the fact it states. :func:`split_requests` rewrites such a
sentence as its statements (each a sentence of its own) followed by the request, so the sentence
rules downstream make a statement record per run of statements and one question record.

A sentence is split into clauses at commas (not inside numbers: "March 15, 2024", "75,000"),
semicolons, colons, dashes and before "and/but/so" + a request; each clause is a *request* (it opens
with a question word, an inverted auxiliary or a request phrase: "can you", "how do I", "any tips",
"help me"), a *continuation* of the clause before it ("especially since …", "to show …", "like I always
do"), *filler* (no content word: "you know") or a *statement*. Adjacent statements stay one sentence.
"""

from __future__ import annotations

import re

from lychee_ray.ingest.encode.rules.cleaning import content_word_count
from lychee_ray.text.sentences import split_sentences

_CLAUSE_CUT = re.compile(r",\s+(?!\d)|;\s+|:\s+|\s+[—–]\s*|\s+-{1,2}\s+|\s*[—–]\s+"
                         r"|\s+(?=(?:and|but|so)\s+(?:can|could|would|will|how|what|should|do|any)\b)")
LEAD = re.compile(r"^(?:(?:and|but|so|also|then|or|plus|well|ok|okay|anyway)\s+)+", re.I)
# A question word asks when an auxiliary or "to" follows ("how can I", "what should", "how to"); a
# relative clause ("who I met at …", "where I work") does not.
_AUX = (r"(?:do|does|did|can|could|should|would|will|shall|is|are|was|were|am|have|has|had|might|must|may|"
        r"to|else|kind|type|sort|much|many|long|often|about|if)\b")
REQUEST_START = re.compile(
    r"^(?:can|could|would|will|should|shall|do|does|did|is|are|am|was|were|have|has|"
    r"(?:what|how|why|where|when|which|who|whom|whose)\s+" + _AUX + r"|any|please|tell me|show me|explain|give me|"
    r"help me|walk me|let me know|"
    r"i(?:'m| am) (?:wondering|curious|not sure|unsure)|i was wondering|i wonder|"
    r"i(?:'d| would) (?:love|like|appreciate) (?:some|any|your|it if|to (?:know|hear|get|learn|see|understand))|"
    r"i need (?:help|advice|some (?:help|advice|tips|guidance|ideas)|your)|is there|are there|"
    r"what's|how's|where's|who's)\b", re.I)
# "which has improved", "who I met", "where I work": a relative clause, unless an auxiliary and a
# subject follow as in a question ("where do I start", "when can we meet").
RELATIVE = re.compile(
    r"^(?:which|who|whom|whose|where|when)\b(?!\s+(?:do|does|did|can|could|should|would|will|shall|is|are|was|were|"
    r"am|have|has)\s+(?:i|you|we|they|he|she|it|my|your|the)\b)", re.I)
# A clause that continues the one before it (a purpose, reason, example or comparison).
CONTINUATION = re.compile(
    r"^(?:to|so that|which|that|like|where|because|since|especially|including|such as|for|with|in|on|at|by|"
    r"from|as|or|than|without|about|into|given|considering|particularly|even|just)\b", re.I)
# A clause that only says the speaker wonders ("I'm kinda curious"): the request that follows says what.
_WONDER = re.compile(r"^i(?:'m| am)\s+(?:\w+\s+)?(?:curious|wondering|stuck|confused|unsure|not sure)$", re.I)
# A clause with no content word is filler ("you know") only when it is this short and has no digit.
_FILLER_WORDS = 3
# A clause that opens with its own first-person subject starts a new statement when the run before it
# has at least this many words.
_SUBJECT = re.compile(r"^(?:i|i'm|i've|i'd|i'll|my|we|we're|we've|our)\b", re.I)
_MIN_STATEMENT_WORDS = 6
# "Here's my code", "this is what I have so far": a pointer to what follows, not a statement.
_POINTER = re.compile(r"^(?:here(?:'s| is| are)|this is|below is)\b.{0,40}\b(?:code|what i(?:'ve| have)(?: \w+){0,3}|"
                      r"my (?:current |latest )?(?:\w+ )?(?:code|attempt|draft|version|setup|snippet))\s*[:.]?\s*$", re.I)


def is_request(clause: str) -> bool:
    """Whether a clause asks (a question word, an inverted auxiliary or a request phrase opens it)."""
    return REQUEST_START.match(LEAD.sub("", clause.strip())) is not None


def _kind(clause: str, names_low: set[str]) -> str:
    body = LEAD.sub("", clause.strip())
    if RELATIVE.match(body):
        return "continuation"
    if REQUEST_START.match(body):
        return "request"
    if _WONDER.match(body) or _POINTER.match(body) or (content_word_count(body, names_low) == 0 and len(body.split()) <= _FILLER_WORDS
                               and not any(c.isdigit() for c in body)):
        return "filler"
    if CONTINUATION.match(body):
        return "continuation"
    return "statement"


def split_request_sentence(sentence: str, names_low: set[str]) -> tuple[list[str], str | None]:
    """(its statements, its request or None) for one sentence; a sentence that states nothing besides
    its request comes back whole (a question as the request, an imperative as a statement)."""
    s = sentence.strip()
    if _POINTER.match(s.rstrip(":. ")):
        return [], None
    clauses = [c for c in _CLAUSE_CUT.split(s.rstrip("?!. ")) if c and c.strip()]
    kinds = [_kind(c, names_low) for c in clauses]
    groups: list[tuple[str, list[str]]] = []  # (statement | request, its clauses)
    for c, k in zip(clauses, kinds, strict=False):
        if k == "filler":
            continue
        if k == "continuation" and groups:
            groups[-1][1].append(c)
            continue
        k = "statement" if k == "continuation" else k
        # a statement run is cut where a clause of its own begins ("…, but I want to …") once the run
        # says something by itself: one record per statement, not one per sentence of them
        independent = k == "statement" and _SUBJECT.match(LEAD.sub("", c.strip())) is not None \
            and groups and sum(len(x.split()) for x in groups[-1][1]) >= _MIN_STATEMENT_WORDS
        if groups and groups[-1][0] == k and not independent:
            groups[-1][1].append(c)
        else:
            groups.append((k, [c]))
    if not any(k == "request" for k, _ in groups):
        if s.endswith("?") and "request" not in kinds:  # an inverted or elliptic question: keep it a question
            return [], s
        if len(groups) <= 1:
            return [s], None
    statements = [", ".join(cs).strip() for k, cs in groups if k == "statement"]
    if not statements:  # a question or request and nothing stated: the sentence as it was
        return ([], s) if s.endswith("?") else ([s], None)
    request = ", ".join(c for k, cs in groups if k == "request" for c in cs).strip()
    return [_sentence(x) for x in statements if x], (LEAD.sub("", request) + "?") if request else None


def _sentence(text: str) -> str:
    t = LEAD.sub("", text.strip()).rstrip(",;: ")
    return (t[:1].upper() + t[1:] + ("" if t.endswith((".", "!")) else ".")) if t else ""


def split_requests(text: str, names_low: set[str]) -> str:
    """``text`` with each asking sentence rewritten as its statements, then its request (see the
    module doc); sentences that ask nothing are kept as they are."""
    out: list[str] = []
    for sentence in split_sentences(text):
        statements, request = split_request_sentence(sentence, names_low)
        out.extend(statements)
        if request:
            out.append(request[:1].upper() + request[1:])
    return " ".join(out)


__all__ = ["LEAD", "is_request", "split_request_sentence", "split_requests"]
