"""Record metadata from its text: entities (capitalised spans), topics (keywords) and a type (cue words)."""

from __future__ import annotations

import re
from collections import Counter
from itertools import pairwise

from lychee_ray.ingest.encode.rules.lexicon import GENERIC_WORDS, IRREGULAR_PAST, MONTH_WEEKDAY, NUMBER_WORDS, WORD_TOKEN
from lychee_ray.ingest.nodes import is_entity_name
from lychee_ray.text.stopwords import ENCODER_STOPWORDS

# Capitalised words that start sentences or are interjections, never entities on their own.
NON_ENTITY_CAPS = frozenset(
    """I I'm I've I'll I'd The A An My Your Our Their His Her Its This That These Those It It's There Here What When
    Where Why How Who Which Yes Yeah Yep No Oh Wow Hey Hi Hello Thanks Thank Well So But And Or If Also Just Maybe
    Sure Okay OK Ok Good Great Nice Cool Awesome Amazing Totally Definitely Absolutely Really Let Let's Please Haha Lol
    Omg Aw Aww Hmm On In At For From With After Before Since During Last Next Once Then Now Today Tomorrow Yesterday
    Tonight Said Asked Shared Congrats Congratulations Hope Glad Love Life Sounds Looks Mom Dad ID IDs""".split()
)
# Lowercase words that may join the capitalised words of one entity ("University of Michigan").
ENTITY_CONNECTORS = frozenset({"of", "the", "de", "del", "da", "von", "van", "&"})
# A token that can be part of a name: Capitalised, an acronym ("LGBTQ", "LGBTQs") or "McDonald"-like.
_CAP_TOKEN = re.compile(r"^(?:[A-Z][a-z'’&.-]*[a-z0-9]?|[A-Z]{2,}[a-z]?s?|[A-Z][A-Za-z]*[A-Z][A-Za-z]*)$")
# Topic words are at least this long.
_MIN_TOPIC_LEN = 3

# Record type cues (lowercased text). Checked in this order: constraint, procedure, a time expression
# (event), preference (present tense), event verbs, preference (past tense), else fact.
CONSTRAINT_CUES = re.compile(
    r"\b(?:must(?! be\b)|mustn't|allergic|intolerant|can't (?:eat|have|drink|stand|do|go|use)|cannot (?:eat|have|drink|do|go|use)|"
    r"need to|needs to|have to|has to|had to|not allowed|forbidden|avoid|avoids|never (?:eat|eats|drink|drinks|use|uses)|"
    r"vegan|vegetarian|gluten|deadline|required to|requires|should not|shouldn't|mustn't|"
    r"(?:don't|doesn't|do not|does not|never|can't|cannot) (?:eat|drink|eats|drinks))\b"
)
PROCEDURE_CUES = re.compile(
    r"\b(?:how to|step by step|steps|step \d|instructions|recipe|tutorial|first,|first you|then you|after that,|"
    r"make sure to|the trick is|the key is to|you need to first|first\b[^.!?]*\bthen)\b"
)
PREFERENCE_CUES = re.compile(
    r"\b(?:loves?|adores?|enjoys?|prefers?|favou?rite|hates?|dislikes?|can't stand|passionate about|fan of|keen on|"
    r"fond of|obsessed with|(?<!look )(?<!looks )(?<!feel )(?<!feels )(?<!seem )(?<!seems )(?<!sound )(?<!sounds )"
    r"(?<!just )(?<!something )(?<!more )likes?)\b"
)
PREFERENCE_PAST_CUES = re.compile(r"\b(?:loved|enjoyed|preferred|hated|disliked|liked)\b")
EVENT_CUES = re.compile(
    r"\b(?:went|visited|started|finished|bought|attended|made|painted|ran|joined|adopted|took|traveled|travelled|"
    r"moved|met|won|lost|celebrated|graduated|signed up|volunteered|hiked|camped|played|saw|watched|wrote|cooked|"
    r"baked|built|created|performed|participated|organized|organised|hosted|completed|launched|received|gave|"
    r"married|learned|learnt|began|opened|quit|retired|released|published|drew|sang|danced|flew|drove|visited|"
    r"swam|read|passed|failed|broke|fell|tried|planted|raised|donated|applied|interviewed|recorded|launched|"
    r"going to|planning to|plans to|plan to|gonna|about to|signed|scheduled|will be|is going)\b"
)


def _crude_lemma(w: str) -> str:
    """Plural stripping only: stories → story, boxes → box, kids → kid (not -ss/-us/-is)."""
    if len(w) > 4 and w.endswith("ies"):
        return w[:-3] + "y"
    if len(w) > 4 and w.endswith(("sses", "shes", "ches", "xes", "zes")):
        return w[:-2]
    if len(w) > 3 and w.endswith("s") and not w.endswith(("ss", "us", "is", "'s")):
        return w[:-1]
    return w


def extract_entities(text: str, known: dict[str, str], seen_caps: set[str], limit: int) -> list[str]:
    """Capitalised spans ("New York", "LGBTQ", "University of Michigan") plus known names/aliases.

    ``known`` maps lowercased names and aliases to the canonical name; ``seen_caps`` holds words seen
    capitalised mid-sentence in the segment (a sentence-initial capital only counts if seen there).
    Month and weekday names, numbers and interjections are not entities.
    """
    toks = WORD_TOKEN.findall(text)
    ents: list[str] = []
    span: list[str] = []
    span_initial = False
    at_start = True

    def close() -> None:
        nonlocal span
        while span and span[-1].lower() in ENTITY_CONNECTORS:
            span.pop()
        while span and (span[0] in NON_ENTITY_CAPS or span[0].lower() in MONTH_WEEKDAY):
            span.pop(0)
        while span and span[-1].lower() in MONTH_WEEKDAY:
            span.pop()
        if span and span_initial and len(span) > 1 and span[0].lower() not in known and span[0] not in seen_caps:
            span.pop(0)  # "Broadening Dave": a sentence-initial capital is just capitalisation
        if span:
            name = " ".join(span)
            if name.endswith("'s"):
                name = name[:-2]
            canon = known.get(name.lower())
            if canon is not None:
                ents.append(canon)
            elif len(span) > 1 or not span_initial or name in seen_caps:
                if name.lower() not in MONTH_WEEKDAY and name not in NON_ENTITY_CAPS and len(name) > 1:
                    ents.append(name)
        span = []

    for tok in toks:
        if tok[:1].isalpha():
            if _CAP_TOKEN.match(tok) and tok not in ("I",):
                if not span:
                    span_initial = at_start
                span.append(tok)
            elif span and tok.lower() in ENTITY_CONNECTORS and tok.islower():
                span.append(tok)
            else:
                close()
            at_start = False
        else:
            if not tok.isspace():
                close()
                if any(c in tok for c in ".!?:\"\n"):
                    at_start = True
    close()
    return list(dict.fromkeys(e for e in ents if is_entity_name(e)))[:limit]


def extract_topics(text: str, exclude: set[str], limit: int, bigrams: bool = True) -> list[str]:
    """Keywords: lowercase content words (minus stopwords, generic words, names, months, numbers),
    plural-stripped; adjacent content-word pairs ("support group") first when ``bigrams``."""
    toks = WORD_TOKEN.findall(text)
    seq: list[str | None] = []  # content lemma or None (a break)
    for tok in toks:
        if not tok[:1].isalpha():
            if not tok.isspace():
                seq.append(None)
            continue
        low = tok.lower()
        if (
            len(low) < _MIN_TOPIC_LEN
            or low in ENCODER_STOPWORDS
            or low in GENERIC_WORDS
            or low in MONTH_WEEKDAY
            or low in NUMBER_WORDS
            or low in exclude
            or "'" in low
        ):
            seq.append(None)
            continue
        seq.append(_crude_lemma(low))
    counts = Counter(w for w in seq if w)
    order = {w: i for i, w in reversed(list(enumerate(w for w in seq if w)))}
    unigrams = sorted(counts, key=lambda w: (-counts[w], order[w]))
    pairs: list[str] = []
    if bigrams:
        for x, y in pairwise(seq):
            # "adoption agency" yes, "researched adoption" no: a past-tense verb does not start a topic
            if x and y and x != y and not x.endswith("ed") and x not in IRREGULAR_PAST:
                pairs.append(f"{x} {y}")
    return list(dict.fromkeys(pairs + unigrams))[:limit]


def classify(text: str, has_time: bool) -> str:
    """Record type from cue words (see the ``*_CUES`` constants for the order)."""
    low = text.lower()
    if CONSTRAINT_CUES.search(low):
        return "constraint"
    if PROCEDURE_CUES.search(low):
        return "procedure"
    if has_time:
        return "event"
    if PREFERENCE_CUES.search(low):
        return "preference"
    if EVENT_CUES.search(low):
        return "event"
    if PREFERENCE_PAST_CUES.search(low):
        return "preference"
    return "fact"
