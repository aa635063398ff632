"""Cleaning a turn's sentences: markup, vocatives, filler, and what counts as trivial or as content."""

from __future__ import annotations

import re

from lychee_ray.ingest.encode.rules.lexicon import GENERIC_WORDS
from lychee_ray.text.stopwords import ENCODER_STOPWORDS

# Whole sentences (lowercased, punctuation and a trailing name removed) that carry no memory.
TRIVIAL_PATTERNS = re.compile(
    r"^(?:"
    r"(?:hey|hi|hello|hiya|yo|howdy|heya|good (?:morning|afternoon|evening))(?: there| again| guys| you)?(?: \w+)?"
    r"|(?:thanks|thank you|thx|ty|cheers)(?: so much| a lot| again| very much)*(?: for(?: \w+){1,4})?(?: \w+)?"
    r"|(?:take a look|have a look|check (?:it|this|that|these|them) out|check out|look at|see|here(?:'s| is| are))\b"
    r"(?:(?: \w+){0,7} (?:pics?|pictures?|photos?|snaps?|shots?|images?)(?: \w+){0,5}|(?: \w+){0,3} (?:this|these|that|it|them))"
    r"|long time no (?:see|talk|chat)|oof|ugh|phew|yikes"
    r"|(?:wow|whoa|woah|omg|oh|ah|aw|aww|awesome|cool|nice|great|amazing|yay|lol|haha|hehe|yeah|yes|yep|yup|no|nope|ok|okay|"
    r"sure|right|true|totally|absolutely|definitely|indeed|exactly|same|agreed|congrats|congratulations|bye|goodbye|hmm|"
    r"wonderful|fantastic|perfect|sweet|lovely|beautiful|incredible|brilliant|gorgeous)(?: \w+){0,2}"
    r"|(?:that|this|it|that's|this is|it's|that is|it is|what an?|how)(?: \w+)? "
    r"(?:so |really |very |pretty |super |just |truly |such an? |totally )*"
    r"(?:great|cool|awesome|amazing|nice|wonderful|fantastic|sweet|good|lovely|beautiful|fun|incredible|impressive|"
    r"inspiring|exciting|neat|brilliant|gorgeous|stunning|great news|awesome news|good news|rough|tough|hard|sad|"
    r"interesting|special|true|perfect|adorable|cute|scary|crazy|wild|fair|understandable|huge)(?: \w+)?"
    r"|good to (?:see|hear from|talk to|chat with) you(?: again| too)?"
    r"|(?:so )?(?:glad|happy|great|nice) to hear (?:that|it|from you)(?: \w+)?"
    r"|how (?:have|are|were) you(?: been| doing| holding up)?(?: lately| recently)?"
    r"|how(?:'s| is) it going|what's up(?: with you)?|what's new|anything new|what now|you too|me too|same here"
    r"|(?:talk|speak|chat)(?: to you)? (?:soon|later)|see you(?: soon| later| around)?|take care|catch you later|bye for now"
    r"|sounds (?:good|great|fun|awesome|amazing|lovely|like a plan|like fun)|keep (?:it|that) up|good luck|"
    r"have (?:a )?(?:great|good|nice|fun|lovely) (?:day|time|one|weekend)|i (?:totally )?agree|totally agree|no problem|"
    r"you're welcome|no worries|of course|for sure|i'm (?:so |really )?(?:happy|glad|proud) for you|(?:i'm )?proud of you|"
    r"you got this|you can do it|i bet|i see|makes sense|me neither|tell me more|love (?:that|it|this)|i love (?:that|it|this)"
    r")$"
)
# Leading interjections stripped from a sentence ("Wow, that's a great painting" → "that's a great painting").
LEADING_FILLER = re.compile(
    r"^(?:(?:(?:and|but|so)\s+)?(?:by the way|anyway|anyways|btw|wow|whoa|oh|ah|aw|aww|yeah|yes|yep|yup|well|so|hey|hi|hmm|"
    r"haha|lol|omg|okay|ok|oh wow|oh yeah|"
    r"totally|absolutely|definitely|sure|indeed|exactly|true|right|man|dude|gosh|geez|yay|awesome|cool|nice|oof|ugh|"
    r"phew|yikes|aw man|oh man|oh no|no way|haha|hehe)\s*[,!.]+\s*)+",
    re.I,
)
# Conversational filler inside a sentence ("It's fun, you know?").
INNER_FILLER = re.compile(r",?\s*\b(?:you know|ya know|y'know|you see|i mean)\b(?=\s*[,.!?]|\s*$)", re.I)

_MARKDOWN = re.compile(r"\*\*|__|`+|^#+\s*|^\s*(?:[-*•]|\d{1,2}[.)])\s+", re.M)
_REPEATS = re.compile(r"([a-z])\1{2,}")  # "sooo" → "so" for filler checks
_CONTENT = re.compile(r"[a-z][a-z']+")
# Content words are longer than this ("go", "tv" carry too little to keep a sentence).
_MIN_CONTENT_WORD_LEN = 2


def strip_markup(content: str) -> str:
    """A turn's text without markdown markers and list bullets, with typographic apostrophes made plain."""
    return _MARKDOWN.sub("", content.replace("’", "'"))


def clean_sentence(raw: str, vocative: re.Pattern) -> str:
    """A sentence without vocatives (", Caroline!"), inner filler (", you know?") and leading interjections."""
    s = vocative.sub("", raw).strip()
    s = INNER_FILLER.sub("", s)
    return LEADING_FILLER.sub("", s).strip()


def _norm_for_trivial(s: str, names: tuple[str, ...]) -> str:
    t = _REPEATS.sub(r"\1", s.lower().replace("’", "'"))
    t = re.sub(r"[^a-z0-9' ]+", " ", t)
    words = t.split()
    while words and words[-1] in names:  # trailing vocative
        words.pop()
    return " ".join(words)


def is_trivial(sentence: str, names: tuple[str, ...]) -> bool:
    """Whether a sentence carries no memory (a greeting, thanks, a reaction; see :data:`TRIVIAL_PATTERNS`)."""
    return TRIVIAL_PATTERNS.match(_norm_for_trivial(sentence, names)) is not None


def content_word_count(s: str, names_low: set[str]) -> int:
    """Words of ``s`` that are neither stop words, generic words nor names."""
    return sum(
        1
        for w in _CONTENT.findall(_REPEATS.sub(r"\1", s.lower().replace("’", "'")))
        if w not in ENCODER_STOPWORDS and w not in GENERIC_WORDS and w not in names_low and len(w) > _MIN_CONTENT_WORD_LEN
    )


def vocative_pattern(names_low: set[str]) -> re.Pattern:
    """A regex for the segment's names used as a vocative ("Hey Mel!", ", Caroline!")."""
    alt = "|".join(sorted((re.escape(n) for n in names_low), key=len, reverse=True)) or "(?!x)x"
    return re.compile(
        r"(?:^(?:hey|hi|hello|thanks|thank you|oh|wow|yeah|yes|congrats|congratulations)?,?\s*(?:" + alt + r")\s*[,!.]+\s*"
        r"|,\s*(?:" + alt + r")\s*(?=[.!?]|$))",
        re.I,
    )
