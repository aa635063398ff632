"""Speaker resolution: first/second person rewritten to the speakers' names, verbs made to agree.

"I" / "me" / "my" become the turn's speaker, "you" / "your" the other speaker (when known), and
"we" / "our" both of them only when ``we_pair`` — in LoCoMo "we" is mostly the speaker's family or
group. The verb right after a rewritten subject is put in the third person.
"""

from __future__ import annotations

import re

from lychee_ray.ingest.encode.rules.lexicon import IRREGULAR_PAST, NUMBER_WORDS, WORD_TOKEN
from lychee_ray.text.stopwords import ENCODER_STOPWORDS

# Verbs that follow a first/second-person subject but must not get a third-person "-s".
MODALS = frozenset("can could will would shall should may might must ought".split())
# Words between a subject and its verb that are skipped when fixing agreement ("I really love").
ADVERBS = frozenset(
    """really also just always usually often still never sometimes actually totally definitely absolutely so
    truly even kinda sorta already finally recently mostly probably certainly honestly seriously personally
    generally basically literally def def'nitely sure too especially only rarely""".split()
)
# A word after which "you" is a subject (start of a clause) rather than an object.
SUBJECT_CONTEXT = frozenset(
    """and but so that if when because since as or think hope guess bet know knew glad sure maybe how what where why
    who which once while until though although whether then now remember wish believe heard hear see saw much many
    often""".split()
)
# Third-person forms of auxiliaries after I/you ("I am" → "is", "you were" → "was").
AUX_THIRD = {
    "am": "is", "are": "is", "were": "was", "have": "has", "do": "does", "don't": "doesn't", "haven't": "hasn't",
    "aren't": "isn't", "weren't": "wasn't", "'m": "is", "wanna": "wants to", "gotta": "has to",
}  # fmt: skip
# Auxiliaries that may come before an inverted subject ("did you", "are you", "have I").
INVERTING_AUX = frozenset(
    """am are is was were do does did don't doesn't didn't have has had haven't hasn't hadn't can could will would
    shall should may might must can't couldn't won't wouldn't shouldn't aren't weren't isn't wasn't""".split()
)
# Words after "I'd" / "you'd" that make it "had" rather than "would" ("I'd been", "you'd gone").
PARTICIPLE_AFTER_D = frozenset("been had better gone done seen never already".split())

# Sentences about the two speakers' own contact: "we" then means both of them.
PAIR_CUES = re.compile(
    r"\b(?:talk|talked|talking|chat|chatted|chatting|spoke|speak|spoken|catch up|caught up|hang out|hung out|met up|"
    r"meet up|last time|each other|both of us|you and i|you and me|together)\b",
    re.I,
)
# At most this many ADVERBS are skipped between a subject and its verb ("I really, truly, just love").
_MAX_SKIPPED_ADVERBS = 3


def _third_person(verb: str) -> str:
    """Crude third-person singular: love → loves, go → goes, try → tries, have → has."""
    low = verb.lower()
    if low in ("have", "do", "go", "be"):
        out = {"have": "has", "do": "does", "go": "goes", "be": "is"}[low]
    elif low.endswith(("s", "sh", "ch", "x", "z", "o")):
        out = low + "es"
    elif len(low) > 1 and low.endswith("y") and low[-2] not in "aeiou":
        out = low[:-1] + "ies"
    else:
        out = low + "s"
    return out.capitalize() if verb[:1].isupper() else out


def _looks_like_base_verb(low: str) -> bool:
    """True when a word after I/you could be a present-tense verb that needs a third-person form."""
    return not (
        low in ENCODER_STOPWORDS
        or low in MODALS
        or low in IRREGULAR_PAST
        or low in ADVERBS
        or low.endswith(("ed", "ing", "ly", "'s", "'d", "'ll", "'ve", "'re", "'m", "n't"))
        or low in NUMBER_WORDS
        or low in ("guys", "all", "both", "two", "too", "alone", "here", "there", "again", "yourself", "myself")
    )


class _Persons:
    """How first/second/plural person maps to names for one turn."""

    def __init__(self, speaker: str, other: str | None, we_pair: bool) -> None:
        self.a = speaker
        self.b = other
        self.pair = f"{speaker} and {other}" if (we_pair and other) else None


def rewrite_persons(text: str, speaker: str, other: str | None, *, we_pair: bool = False) -> tuple[str, bool]:
    """Rewrite I/me/my → speaker, you/your → ``other`` (when known), we/our → "speaker and other"
    (only when ``we_pair``), fixing the verb right after a rewritten subject.

    Returns (text, whether a first-person-plural pronoun was left as written).
    """
    p = _Persons(speaker, other, we_pair)
    question = text.rstrip().endswith("?")
    toks = WORD_TOKEN.findall(text.replace("’", "'"))
    out = list(toks)
    words = [i for i, t in enumerate(toks) if t[:1].isalpha()]
    pos_of = {ti: k for k, ti in enumerate(words)}
    left_we = False

    def adjacent(ti: int, step: int) -> int | None:
        """Index of the neighbouring word token when only spaces separate them."""
        k = pos_of[ti] + step
        if k < 0 or k >= len(words):
            return None
        tj = words[k]
        between = toks[min(ti, tj) + 1 : max(ti, tj)]
        return tj if all(b.isspace() for b in between) else None

    def clause_start(ti: int) -> bool:
        k = pos_of[ti]
        if k == 0:
            return True
        prev = words[k - 1]
        between = "".join(toks[prev + 1 : ti])
        if any(c in between for c in ",;:.!?—-(\""):
            return True
        return toks[prev].lower() in SUBJECT_CONTEXT

    def fix_verb_after(ti: int) -> None:
        j = adjacent(ti, 1)
        skipped = 0
        while j is not None and toks[j].lower() in ADVERBS and skipped < _MAX_SKIPPED_ADVERBS:
            j = adjacent(j, 1)
            skipped += 1
        if j is None:
            return
        low = toks[j].lower()
        if low in AUX_THIRD:
            out[j] = AUX_THIRD[low]
        elif _looks_like_base_verb(low):
            out[j] = _third_person(toks[j])

    def d_aux(ti: int) -> str:
        """What "'d" stands for after the word at ``ti``: "had" before a participle, else "would"."""
        nxt = adjacent(ti, 1)
        after = toks[nxt].lower() if nxt is not None else None
        return "had" if after is not None and (after in PARTICIPLE_AFTER_D or after.endswith("ed")) else "would"

    def fix_inverted_aux(ti: int) -> bool:
        """'are you' → 'is B', 'do I' → 'does A'; True when the subject was inverted (the aux
        starts a clause, or the sentence is a question: "What jobs are you thinking of?")."""
        j = adjacent(ti, -1)
        if j is None or toks[j].lower() not in INVERTING_AUX:
            return False
        if not (question or clause_start(j)):
            return False
        low = toks[j].lower()
        if low in AUX_THIRD:
            rep = AUX_THIRD[low]
            out[j] = rep.capitalize() if toks[j][:1].isupper() else rep
        return True

    for ti in words:
        tok = toks[ti]
        low = tok.lower()
        if low == "i":
            if not fix_inverted_aux(ti):
                fix_verb_after(ti)
            out[ti] = p.a
        elif low in ("i'm", "i've", "i'll", "i'd"):
            aux = d_aux(ti) if low == "i'd" else {"i'm": "is", "i've": "has", "i'll": "will"}[low]
            out[ti] = f"{p.a} {aux}"
        elif low in ("me", "myself"):
            out[ti] = p.a
        elif low in ("my", "mine"):
            out[ti] = f"{p.a}'s"
        elif p.b is not None and low == "you":
            nxt = adjacent(ti, 1)
            if nxt is not None and toks[nxt].lower() in ("guys", "all"):
                out[ti], out[nxt] = f"{p.b} and family", ""
                # drop the space between "you" and "guys"
                for k in range(ti + 1, nxt):
                    out[k] = ""
                continue
            if not fix_inverted_aux(ti) and clause_start(ti):
                fix_verb_after(ti)
            out[ti] = p.b
        elif p.b is not None and low in ("you're", "you've", "you'll", "you'd"):
            aux = d_aux(ti) if low == "you'd" else {"you're": "is", "you've": "has", "you'll": "will"}[low]
            out[ti] = f"{p.b} {aux}"
        elif p.b is not None and low in ("your", "yours"):
            out[ti] = f"{p.b}'s"
        elif p.b is not None and low in ("yourself",):
            out[ti] = p.b
        elif p.b is not None and low in ("y'all", "yourselves"):
            out[ti] = f"{p.b} and family"
        elif low in ("we", "we're", "we've", "we'll", "we'd", "our", "ours", "us", "ourselves"):
            if tok == "US":  # the country
                continue
            if p.pair is None:
                left_we = True
                continue
            out[ti] = {
                "we": p.pair, "we're": f"{p.pair} are", "we've": f"{p.pair} have", "we'll": f"{p.pair} will",
                "we'd": f"{p.pair} would", "our": f"{p.pair}'s", "ours": f"{p.pair}'s", "us": p.pair, "ourselves": p.pair,
            }[low]  # fmt: skip
        else:
            continue
        # keep sentence-initial capitalisation of replaced auxiliaries / names as they are
    s = "".join(out)
    return s, left_we
