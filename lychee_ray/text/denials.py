"""Denials in what a person says, and whether a statement says the denied thing happened
(``rules`` backend; docs/current-memory.md).

* **A denial** (:func:`denial`): "I've never X" / "I have never X", or in the third person the
  rules backend writes a speaker's statements in ("User has never X") — the words of X;
* **said as done** (:func:`says_done`): a statement says a verb happened (or is being done, with
  ``attempts``) outside a question, a plan or a wish ("Can you help me submit ...", "I'm gonna submit ...");
* **a plan** (:data:`PLAN`): words that make what follows a plan, a goal or a wish.

English only: the cues are English grammar words.
"""

from __future__ import annotations

import re
from functools import lru_cache

from lychee_ray.text.lexical import lexical_terms

_DENIED = r"(?:'ve|’ve|'s|’s| have| has| had|'d| would)?\s+never\s+(?:actually\s+|ever\s+|really\s+)?(?P<x>[^,.;!?]{8,})"
DENIAL = re.compile(rf"\bI{_DENIED}", re.I)
# words that make what follows a plan, a goal or a wish rather than what is
PLAN = re.compile(r"\b(?:want|wants|wanted|plan|planning|goal|goals|target|targeting|aim|aiming|going to|will|would|hope|"
                  r"hoping|considering|thinking of|invited|should|could|might|if|need to|needs to)\b", re.I)
# words before a verb that say it did not happen (yet): a question, a plan, an attempt, "before ...ing"
_NOT_DONE = re.compile(r"^\s*(?:can|could|would|should|will|how|what|why|when|where|do|does|is|are)\b|\b(?:trying|try|tries|"
                       r"tried|attempting|gonna|about to|before|without|instead of|until|whether|never|not|no|"
                       r"suggest\w*|recommend\w*|advis\w*|"
                       r"asked|prefer\w*|like|love|enjoy\w*|looking\s+into|exploring)\b|n[’']t\b|[’']ll\b",
                       re.I)
_CLAUSE = re.compile(r"[.;:!?,]\s|\s[-–—]\s")
# irregular verb forms, so that a denial ("I've never felt ...") and what says it happened ("I
# felt ...", "I'm feeling ...") are compared by the verb they share
_IRREGULAR = {
    "felt": "feel", "met": "meet", "took": "take", "taken": "take", "got": "get", "gotten": "get", "went": "go",
    "gone": "go", "did": "do", "done": "do", "made": "make", "had": "have", "been": "be", "was": "be", "were": "be",
    "saw": "see", "seen": "see", "wrote": "write", "written": "write", "spoke": "speak", "spoken": "speak",
    "ran": "run", "bought": "buy", "thought": "think", "told": "tell", "sent": "send", "built": "build",
    "began": "begin", "begun": "begin", "won": "win", "lost": "lose", "left": "leave", "paid": "pay",
    "taught": "teach", "learnt": "learn", "brought": "bring", "kept": "keep", "found": "find", "held": "hold",
    "heard": "hear", "chose": "choose", "chosen": "choose", "drew": "draw", "drawn": "draw", "gave": "give",
    "given": "give", "ate": "eat", "eaten": "eat", "flew": "fly", "flown": "fly", "sold": "sell", "spent": "spend",
    "struck": "strike", "stood": "stand", "understood": "understand", "wore": "wear", "worn": "wear",
}
_WORD = re.compile(r"[A-Za-z][A-Za-z'’-]*")


def verb_terms(text: str) -> frozenset[str]:
    """The lexical terms of ``text`` with irregular verb forms as their base ("felt" -> "feel")."""
    return frozenset(lexical_terms(_WORD.sub(lambda m: _IRREGULAR.get(m.group(0).lower(), m.group(0)), text)))
# words that say nothing of what a value is about (the statement frames of chat: "I'm trying to ...")
FRAME_TERMS = frozenset(lexical_terms(
    "i im ive trying want need help make sure can could would like know how what project also get got have has had my "
    "me total per about around only just now new recently currently increased improved to from reached by the this "
    "that it already still really kinda user users assistant which due said says"))


@lru_cache(maxsize=256)
def _denial_of(subject: str) -> re.Pattern[str]:
    return re.compile(rf"(?:\bI|(?<![\w'’]){re.escape(subject)}){_DENIED}", re.I)


_ATTEMPT = re.compile(r"\b(?:trying|try|tries|tried|attempting)\b", re.I)


def says_done(text: str, verb: str, attempts: bool = False) -> bool:
    """``text`` says ``verb`` happened: its first word of that verb (as :func:`verb_terms` writes it)
    is not in a clause of a question, a plan, a wish or an attempt ("Can you help me submit ...",
    "I'm gonna submit ...", "before submitting ..."). False when the verb is not there.
    ``attempts``: an attempt counts as doing it ("I'm trying to set up a project using Bootstrap":
    the user works with Bootstrap)."""
    want = verb_terms(verb) or frozenset([verb])
    for m in _WORD.finditer(text):
        if want & verb_terms(m.group(0)):
            clause = _CLAUSE.split(text[:m.start()])[-1]
            if attempts:
                clause = _ATTEMPT.sub(" ", clause)
            return not (PLAN.search(clause) or _NOT_DONE.search(clause))
    return False


def denied_verb(text: str, subject: str | None = None) -> str | None:
    """The verb of what "I've never ..." denies, as :func:`verb_terms` writes it ("felt" -> "feel";
    None: no denial, or no word)."""
    m = (_denial_of(subject) if subject else DENIAL).search(text)
    if not m:
        return None
    first = _WORD.search(m.group("x"))
    terms = verb_terms(first.group(0)) if first else frozenset()
    return next(iter(terms)) if len(terms) == 1 else None


def denied_text(text: str, subject: str | None = None) -> str:
    """The words of what "I've never ..." denies in ``text``, as said ("" when it denies nothing)."""
    m = (_denial_of(subject) if subject else DENIAL).search(text)
    return " ".join(m.group("x").split()) if m else ""


def denial(text: str, subject: str | None = None, frame: bool = False) -> frozenset[str]:
    """The content words of what "I've never ..." denies in ``text`` (empty: no denial). ``subject``:
    the speaker's name, so that the statement as the rules backend writes it, in the third person
    ("User has never ..."), reads as the denial it is; ``frame``: keep the chat's frame words
    ("never worked with Michael on any projects": a question that names them means them)."""
    m = (_denial_of(subject) if subject else DENIAL).search(text)
    if not m:
        return frozenset()
    words = frozenset(lexical_terms(m.group("x")))
    return words if frame else words - FRAME_TERMS


__all__ = ["DENIAL", "FRAME_TERMS", "PLAN", "denial", "denied_text", "denied_verb", "says_done", "verb_terms"]
