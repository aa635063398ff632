"""The ``rules`` encode backend: deterministic, offline, sentence-level records.

No model is involved. For each turn of a segment, in order:

1. an ``[image: ...]`` caption (the LoCoMo adapter puts BLIP captions there) becomes its own record,
   "Melanie shared a photo of a sunset over a lake.";
2. the rest is cleaned (markdown markers, list bullets, leading interjections such as "Wow,",
   vocatives such as ", Caroline!", filler such as ", you know?") and split into sentences (regex;
   abbreviations such as Mr./Dr./e.g. and decimals do not end a sentence);
3. trivial sentences are dropped: greetings, thanks, reactions ("That's so cool!") — see
   :data:`TRIVIAL_PATTERNS` — and sentences without a content word; questions need
   ``question_min_content_words`` content words ("What's up?" goes, "Did you go to the parade?" stays);
4. sentences shorter than ``min_words`` words are merged into the previous kept sentence of the same
   turn (or the next one when they come first): "It's special to me." alone means nothing;
5. relative dates are rewritten against the session date (:func:`~lychee_ray.timeparse.rewrite_relative`)
   and the first time expression becomes the record's time;
6. first/second person is rewritten to speaker names (see :func:`rewrite_persons`);
7. a sentence that does not name its speaker afterwards is attributed: "Caroline said: ..." /
   "Caroline asked: ...";
8. entities (capitalised spans), topics (keywords) and a type (cue words) are extracted;
9. question → answer pairs inside the segment: when a turn answers the other speaker's question that
   ended the previous turn, its first (short) statement — or the whole short turn, when it is only
   "Yes! It was so fun!" — is folded into the question's record, "Caroline asked: What did Melanie
   paint? Melanie answered: A sunset by the lake.", with both turns as sources. An elliptical answer
   means nothing alone; an LLM reading the segment writes it as one fact, and so do we. Pairs can
   only form inside a segment, so this is where segment boundaries matter to the rules backend.

Not handled (documented limits): third-person pronouns (he/she/they/it) are left as written — without
gender or a parser, guessing their referent does more harm than good; generic "you" ("you never
know") is read as the other speaker; "we"/"our"/"us" are only rewritten to "A and B" when the
sentence is about the two speakers' own contact (talked, chat, catch up, met ...) or ``we_mode`` is
"pair" — in LoCoMo "we" is mostly the speaker's family or group, and "A and B went camping" would be
a false memory; the sentence then keeps "we" and is attributed to its speaker instead. Verb
agreement is fixed for the verb right after a rewritten subject (am/are/have/do and their negations,
regular present-tense verbs); longer-distance agreement ("I, as a mother, am") is not.
"""

from __future__ import annotations

import re
from collections import Counter
from datetime import datetime
from typing import Literal

from .encode import EncodeOutput, EncodeRequest, EncodeResult, RecordDraft, SegmentTurn, TimeDraft, merge_to_summary
from .timeparse import rewrite_relative

WeMode = Literal["auto", "pair", "keep"]

# ---------------------------------------------------------------- word lists

# Tokens ending in "." that do not end a sentence.
ABBREVIATIONS = frozenset(
    "mr mrs ms dr prof sr jr st vs etc e.g i.e eg ie a.m p.m am pm u.s u.k no approx dept est fig inc ltd co "
    "jan feb mar apr jun jul aug sep sept oct nov dec mt ave rd blvd".split()
)

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
    r"|(?:that|this|it|that's|this is|it's|that is|it is|what an?|how)(?: \w+)? (?:so |really |very |pretty |super |just |truly |such an? |totally )*"
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
    r"^(?:(?:(?:and|but|so)\s+)?(?:by the way|anyway|anyways|btw|wow|whoa|oh|ah|aw|aww|yeah|yes|yep|yup|well|so|hey|hi|hmm|haha|lol|omg|okay|ok|oh wow|oh yeah|"
    r"totally|absolutely|definitely|sure|indeed|exactly|true|right|man|dude|gosh|geez|yay|awesome|cool|nice|oof|ugh|"
    r"phew|yikes|aw man|oh man|oh no|no way|haha|hehe)\s*[,!.]+\s*)+",
    re.I,
)
# Conversational filler inside a sentence ("It's fun, you know?").
INNER_FILLER = re.compile(r",?\s*\b(?:you know|ya know|y'know|you see|i mean)\b(?=\s*[,.!?]|\s*$)", re.I)

# Function words, pronouns, auxiliaries: never topics, not counted as content.
STOPWORDS = frozenset(
    """a about above after again against all almost also although always am among an and any anyone anything are
    aren't around as at be because been before being below between both but by can can't cannot could couldn't did
    didn't do does doesn't doing don't down during each either else enough even ever every everyone everything for
    from further had hadn't has hasn't have haven't having he he'd he'll he's her here here's hers herself him himself
    his how how's however i i'd i'll i'm i've if in into is isn't it it's its itself just let's like me might more most
    much must mustn't my myself neither never no nor not now of off on once one only or other others otherwise our ours
    ourselves out over own per quite rather really same shall shan't she she'd she'll she's should shouldn't since so
    some someone something sometimes somewhat still such than that that's the their theirs them themselves then there
    there's these they they'd they'll they're they've this those though through thus to too toward towards under
    until up upon us very via was wasn't we we'd we'll we're we've were weren't what what's whatever when when's where
    where's whether which while who who's whom whose why why's will with within without won't would wouldn't yet you
    you'd you'll you're you've your yours yourself yourselves yeah yes yep ok okay oh wow hey hi hello gonna wanna gotta
    kinda sorta lot lots bit thing things stuff way ways kind sort anyway anyways maybe perhaps actually definitely
    totally absolutely pretty super truly especially ya ah aw aww um uh hmm haha lol omg btw tho""".split()
)
# Common words that are content-bearing in grammar but not as memory topics ("great", "feel", "think").
GENERIC_WORDS = frozenset(
    """great good nice cool awesome amazing wonderful fantastic sweet lovely beautiful fun glad happy sure thanks thank
    thankful excited exciting interesting incredible impressive inspiring special true real right wrong best better bad
    worse worst big small little new old many few lots much sounds sound seems seem looks look looking feel feels
    felt feeling think thought thinking know knew knowing want wanted wants get gets got getting make makes made making
    go goes going went gone come comes came coming say says said tell told see saw seen hear heard take took give gave
    keep kept let put mean means meant need needs try tried trying time times day days today really tough hard
    wish hope hoping glad proud love loved loves like liked likes enjoy enjoyed yesterday tomorrow tonight week
    weeks month months year years ago last next soon recently lately while past""".split()
)
MONTH_WEEKDAY = frozenset(
    "january february march april may june july august september october november december monday tuesday "
    "wednesday thursday friday saturday sunday".split()
)
NUMBER_WORDS = frozenset("one two three four five six seven eight nine ten eleven twelve twenty hundred thousand first second third".split())

# Capitalised words that start sentences or are interjections, never entities on their own.
NON_ENTITY_CAPS = frozenset(
    """I I'm I've I'll I'd The A An My Your Our Their His Her Its This That These Those It It's There Here What When
    Where Why How Who Which Yes Yeah Yep No Oh Wow Hey Hi Hello Thanks Thank Well So But And Or If Also Just Maybe
    Sure Okay OK Ok Good Great Nice Cool Awesome Amazing Totally Definitely Absolutely Really Let Let's Please Haha Lol
    Omg Aw Aww Hmm On In At For From With After Before Since During Last Next Once Then Now Today Tomorrow Yesterday
    Tonight Said Asked Shared Congrats Congratulations Hope Glad Love Life Sounds Looks Mom Dad""".split()
)
ENTITY_CONNECTORS = frozenset({"of", "the", "de", "del", "da", "von", "van", "&"})

# Verbs that follow a first/second-person subject but must not get a third-person "-s".
MODALS = frozenset("can could will would shall should may might must ought".split())
IRREGULAR_PAST = frozenset(
    """was were went saw made got took had did ran bought thought felt found gave told came knew left met wrote sang
    began brought caught taught won lost kept sent spent built sat stood heard held paid said became drove ate drank
    swam flew grew threw wore chose forgot fell broke spoke rode hit put set cut let hurt quit read led fed fought
    sold shot slept understood woke drew hid hung lit meant rose sought shook stuck swore tore""".split()
)
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
PARTICIPLE_AFTER_D = frozenset("been had better gone done seen never already".split())

# Sentences about the two speakers' own contact: "we" then means both of them.
PAIR_CUES = re.compile(
    r"\b(?:talk|talked|talking|chat|chatted|chatting|spoke|speak|spoken|catch up|caught up|hang out|hung out|met up|"
    r"meet up|last time|each other|both of us|you and i|you and me|together)\b",
    re.I,
)

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

_WORD = re.compile(r"[A-Za-z]+(?:['-][A-Za-z]+)*|[^A-Za-z]+")
_IMAGE = re.compile(r"\[image:\s*([^\]]*)\]", re.I)
_MARKDOWN = re.compile(r"\*\*|__|`+|^#+\s*|^\s*(?:[-*•]|\d{1,2}[.)])\s+", re.M)
_SENT_BOUNDARY = re.compile(r"([.!?]+)([\"')\]]*)(\s+)|\n+")
_VOCATIVE_WORD = re.compile(r"(?:\b(?i:hey|hi|hello|thanks|thank you|congrats|wow|yeah|yes)\s*,?\s+|,\s*)([A-Z][a-z]{2,})\s*[!,.?]")
_REPEATS = re.compile(r"([a-z])\1{2,}")  # "sooo" → "so" for filler checks
_CONTENT = re.compile(r"[a-z][a-z']+")
_CAP_TOKEN = re.compile(r"^(?:[A-Z][a-z'’&.-]*[a-z0-9]?|[A-Z]{2,}[a-z]?s?|[A-Z][A-Za-z]*[A-Z][A-Za-z]*)$")
_PHOTOGRAPHY = re.compile(r"^an?\s+photograph(?:y)?\s+of\b", re.I)  # BLIP often says "a photography of"
_PHOTO_PREFIX = re.compile(r"^(?:a|an)\s+(?:photo|photograph|photography|picture|image|screenshot|drawing|painting|close up|closeup)\b", re.I)


# ---------------------------------------------------------------- sentences


def split_sentences(text: str) -> list[str]:
    """Split a turn into sentences; newlines always split, '.' after an abbreviation does not."""
    out: list[str] = []
    start = 0
    for m in _SENT_BOUNDARY.finditer(text):
        if m.group(0).startswith("\n"):
            cut = m.start()
            nxt = m.end()
        else:
            if m.group(1) == ".":
                before = text[max(start, m.start() - 12) : m.start()].rsplit(None, 1)  # last word only
                last = before[-1].lower().rstrip(".") if before else ""
                if last in ABBREVIATIONS or (len(last) == 1 and last.isalpha()):
                    continue  # "Dr. Smith", "J. Doe"
            cut = m.end(2)
            nxt = m.end()
        piece = text[start:cut].strip()
        if piece:
            out.append(piece)
        start = nxt
    tail = text[start:].strip()
    if tail:
        out.append(tail)
    return out


def _norm_for_trivial(s: str, names: tuple[str, ...]) -> str:
    t = _REPEATS.sub(r"\1", s.lower().replace("’", "'"))
    t = re.sub(r"[^a-z0-9' ]+", " ", t)
    words = t.split()
    while words and words[-1] in names:  # trailing vocative
        words.pop()
    return " ".join(words)


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
        low in STOPWORDS
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
    toks = _WORD.findall(text.replace("’", "'"))
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
        while j is not None and toks[j].lower() in ADVERBS and skipped < 3:
            j = adjacent(j, 1)
            skipped += 1
        if j is None:
            return
        low = toks[j].lower()
        if low in AUX_THIRD:
            out[j] = AUX_THIRD[low]
        elif _looks_like_base_verb(low):
            out[j] = _third_person(toks[j])

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
            if low == "i'd":
                nxt = adjacent(ti, 1)
                aux = "had" if nxt is not None and (toks[nxt].lower() in PARTICIPLE_AFTER_D or toks[nxt].lower().endswith("ed")) else "would"
            else:
                aux = {"i'm": "is", "i've": "has", "i'll": "will"}[low]
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
            if low == "you'd":
                nxt = adjacent(ti, 1)
                aux = "had" if nxt is not None and (toks[nxt].lower() in PARTICIPLE_AFTER_D or toks[nxt].lower().endswith("ed")) else "would"
            else:
                aux = {"you're": "is", "you've": "has", "you'll": "will"}[low]
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


# ---------------------------------------------------------------- entities, topics, type


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
    toks = _WORD.findall(text)
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
    return list(dict.fromkeys(ents))[:limit]


def extract_topics(text: str, exclude: set[str], limit: int, bigrams: bool = True) -> list[str]:
    """Keywords: lowercase content words (minus stopwords, generic words, names, months, numbers),
    plural-stripped; adjacent content-word pairs ("support group") first when ``bigrams``."""
    toks = _WORD.findall(text)
    seq: list[str | None] = []  # content lemma or None (a break)
    for tok in toks:
        if not tok[:1].isalpha():
            if not tok.isspace():
                seq.append(None)
            continue
        low = tok.lower()
        if (
            len(low) < 3
            or low in STOPWORDS
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
        for x, y in zip(seq, seq[1:]):
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


# ---------------------------------------------------------------- encoder


def display_name(speaker: str, role: str = "") -> str:
    """Name used in records: role-named speakers ("user", "assistant") become "User"/"Assistant"."""
    s = speaker.strip() or role.strip() or "someone"
    return s.capitalize() if s.lower() in ("user", "assistant", "system", "tool") else s


def _parse_ref(session_date: str | None) -> datetime | None:
    if not session_date:
        return None
    try:
        return datetime.fromisoformat(session_date)
    except ValueError:
        return None


class _Unit:
    """A record-to-be: one or more sentences of one turn."""

    __slots__ = ("sentences", "question")

    def __init__(self, sentence: str) -> None:
        self.sentences = [sentence]
        self.question = sentence.rstrip().endswith("?")

    def add(self, sentence: str, front: bool = False) -> None:
        if front:
            self.sentences.insert(0, sentence)
        else:
            self.sentences.append(sentence)
        self.question = self.question and sentence.rstrip().endswith("?")

    @property
    def text(self) -> str:
        return " ".join(self.sentences)


class RulesEncoder:
    """Deterministic offline :class:`~lychee_ray.encode.SegmentEncoder` (one record per sentence).

    Parameters (wired from the ``encoder`` config section):

    - ``min_words`` (4): sentences with fewer words are merged with a neighbouring sentence of the
      same turn, or dropped when alone and without a content word;
    - ``max_entities`` (8), ``max_topics`` (6): caps per record;
    - ``question_min_content_words`` (2): questions with fewer content words are dropped as chit-chat;
    - ``keep_questions`` (True): keep other questions as "A asked: ..." records;
    - ``we_mode`` ("auto"): "auto" rewrites we/our to "A and B" only on contact cues (talked, chat,
      catch up, ...), "pair" always, "keep" never;
    - ``image_records`` (True): a record per shared image caption;
    - ``topic_bigrams`` (True): adjacent content-word pairs as topics;
    - ``max_records_per_turn`` (0 = unlimited): cap for very long turns (assistant answers);
    - ``day_first`` (False): read "05/08/2023" as 5 August instead of May 8;
    - ``pair_answers`` (True), ``pair_max_answer_words`` (15): fold a short answer into the record of
      the question that ended the previous turn (step 9 above);
    - ``summary`` (False): ``encoder.mode: summary`` — the segment's sentences are merged into ONE
      summary record (:func:`~lychee_ray.encode.merge_to_summary`), the paper's summary-level ablation.
    """

    backend = "rules"
    model = "rules-v1"

    def __init__(
        self,
        *,
        min_words: int = 4,
        max_entities: int = 8,
        max_topics: int = 6,
        question_min_content_words: int = 2,
        keep_questions: bool = True,
        we_mode: WeMode = "auto",
        image_records: bool = True,
        topic_bigrams: bool = True,
        max_records_per_turn: int = 0,
        day_first: bool = False,
        summary: bool = False,
        pair_answers: bool = True,
        pair_max_answer_words: int = 15,
    ) -> None:
        if we_mode not in ("auto", "pair", "keep"):
            raise ValueError(f"we_mode must be auto, pair or keep, got {we_mode!r}")
        self.min_words = min_words
        self.max_entities = max_entities
        self.max_topics = max_topics
        self.question_min_content_words = question_min_content_words
        self.keep_questions = keep_questions
        self.we_mode = we_mode
        self.image_records = image_records
        self.topic_bigrams = topic_bigrams
        self.max_records_per_turn = max_records_per_turn
        self.day_first = day_first
        self.summary = summary
        self.pair_answers = pair_answers
        self.pair_max_answer_words = pair_max_answer_words

    async def encode(self, request: EncodeRequest) -> EncodeResult:
        """Encode one segment (pure CPU, well under 1 ms per chat turn; nothing to await)."""
        out = self.encode_sync(request)
        return EncodeResult(output=merge_to_summary(out) if self.summary else out, attempts=1, model=self.model)

    # ------------------------------------------------------------ helpers

    def _names(self, request: EncodeRequest) -> tuple[list[str], dict[str, str]]:
        """Display names in the segment (order of appearance) and a lowercase alias → name map."""
        seg = list(dict.fromkeys(display_name(t.speaker, t.role) for t in request.turns))
        every = list(dict.fromkeys(seg + [display_name(s) for s in request.speakers if s]))
        known: dict[str, str] = {}
        for name in every:
            known[name.lower()] = name
            first = name.split()[0]
            known.setdefault(first.lower(), name)
        return every, known

    def _other(self, speaker: str, request: EncodeRequest, seg_names: list[str], all_names: list[str]) -> str | None:
        others = [n for n in seg_names if n != speaker]
        if len(others) == 1:
            return others[0]
        if not others:
            rest = [n for n in all_names if n != speaker]
            if len(rest) == 1:
                return rest[0]
            roles = {t.role for t in request.turns}
            if speaker == "User" and roles <= {"user"}:
                return "Assistant"
            if speaker == "Assistant":
                return "User"
        return None

    def _content_words(self, s: str, names_low: set[str]) -> int:
        return sum(
            1
            for w in _CONTENT.findall(_REPEATS.sub(r"\1", s.lower().replace("’", "'")))
            if w not in STOPWORDS and w not in GENERIC_WORDS and w not in names_low and len(w) > 2
        )

    def _vocative_re(self, names_low: set[str]) -> re.Pattern:
        alt = "|".join(sorted((re.escape(n) for n in names_low), key=len, reverse=True)) or "(?!x)x"
        return re.compile(
            r"(?:^(?:hey|hi|hello|thanks|thank you|oh|wow|yeah|yes|congrats|congratulations)?,?\s*(?:" + alt + r")\s*[,!.]+\s*"
            r"|,\s*(?:" + alt + r")\s*(?=[.!?]|$))",
            re.I,
        )

    # ------------------------------------------------------------ main

    def encode_sync(self, request: EncodeRequest) -> EncodeOutput:
        """The synchronous core of :meth:`encode` (also handy for benchmarks)."""
        seg_names = list(dict.fromkeys(display_name(t.speaker, t.role) for t in request.turns))
        all_names, known = self._names(request)
        # nicknames: name prefixes of ≥3 letters used as a vocative ("Hey Mel!", "Thanks, Mel.")
        names_low = set(known)
        for t in request.turns:
            for w in _VOCATIVE_WORD.findall(t.content):
                wl = w.lower()
                if wl not in known:
                    for name in all_names:
                        if name.lower().startswith(wl) and len(wl) >= 3:
                            known[wl] = name
                            names_low.add(wl)
        vocative = self._vocative_re(names_low)
        seen_caps = self._mid_sentence_caps(request.turns)

        records: list[RecordDraft] = []
        last_entities: list[str] = []
        last_topics: list[str] = []
        # the question that ended the previous turn: (asker, index in records or None, its draft)
        open_question: tuple[str, int | None, RecordDraft] | None = None
        for turn in request.turns:
            speaker = display_name(turn.speaker, turn.role)
            other = self._other(speaker, request, seg_names, all_names)
            ref = _parse_ref(turn.session_date)
            content = turn.content
            captions: list[str] = []
            if "[image" in content.lower():
                captions = [c.strip() for c in _IMAGE.findall(content) if c.strip()]
                content = _IMAGE.sub(" ", content)
            units, trailing_question = self._units(content, vocative, names_low)
            question = open_question if open_question is not None and open_question[0] != speaker else None
            open_question = None
            made = 0
            for ui, unit in enumerate(units):
                if self.max_records_per_turn and made >= self.max_records_per_turn:
                    break
                draft = self._record(unit, speaker, other, ref, known, seen_caps, turn)
                if draft is None:
                    continue
                if ui == 0 and question is not None and not unit.question and len(unit.text.split()) <= self.pair_max_answer_words:
                    self._fold_answer(records, question, draft, speaker)
                    question = None
                else:
                    records.append(draft)
                made += 1
                last_entities = [e for e in draft.entities if e not in all_names] or last_entities
                last_topics = draft.topics[:2] or last_topics
                if ui == len(units) - 1 and unit.question and self.pair_answers:
                    open_question = (speaker, len(records) - 1, records[-1])
            if question is not None and not units:
                # a turn of only reactions ("Yes! It was so fun!") still answers the question
                answer = self._short_answer(content, speaker, other)
                if answer is not None:
                    draft = RecordDraft(type="fact", text=f"{speaker} said: {answer}", entities=[speaker], topics=[],
                                        time=None, source_turns=[turn.index])
                    self._fold_answer(records, question, draft, speaker)
            if trailing_question is not None and self.pair_answers and open_question is None:
                q = self._record(_Unit(trailing_question), speaker, other, ref, known, seen_caps, turn)
                if q is not None:
                    open_question = (speaker, None, q)
            if self.image_records:
                for cap in captions:
                    records.append(self._caption_record(cap, speaker, known, seen_caps, turn))
        state = self._state(seg_names, all_names, last_entities, last_topics, request.prev_resolution_state)
        return EncodeOutput(records=records, resolution_state=state)

    def _mid_sentence_caps(self, turns: list[SegmentTurn]) -> set[str]:
        caps: set[str] = set()
        for t in turns:
            for m in re.finditer(r"(?<=[a-z,;]\s)([A-Z][A-Za-z'&-]+)", t.content):
                caps.add(m.group(1).removesuffix("'s"))
        return caps

    def _units(self, content: str, vocative: re.Pattern, names_low: set[str]) -> tuple[list[_Unit], str | None]:
        """Clean, split, drop trivial sentences and merge short ones into record units.

        Also returns the turn's last sentence when it is a question too short to be a record on its
        own ("What did you paint?"): it still gives the next turn's answer its meaning.
        """
        text = _MARKDOWN.sub("", content.replace("’", "'"))
        names_t = tuple(names_low)
        units: list[_Unit] = []
        pending: list[str] = []  # short sentences waiting for a following unit
        trailing_question: str | None = None
        for raw in split_sentences(text):
            trailing_question = None
            s = vocative.sub("", raw).strip()
            s = INNER_FILLER.sub("", s)
            s = LEADING_FILLER.sub("", s).strip()
            if not s or not any(c.isalpha() for c in s):
                continue
            if TRIVIAL_PATTERNS.match(_norm_for_trivial(s, names_t)):
                continue
            s = s[0].upper() + s[1:]
            question = s.rstrip().endswith("?")
            n_content = self._content_words(s, names_low)
            if question and (not self.keep_questions or n_content < self.question_min_content_words):
                trailing_question = s if n_content > 0 else None
                continue
            if n_content == 0:
                continue
            if len(s.split()) < self.min_words:
                if units:
                    units[-1].add(s)
                else:
                    pending.append(s)
                continue
            unit = _Unit(s)
            for p in reversed(pending):
                unit.add(p, front=True)
            pending = []
            units.append(unit)
        if pending:
            unit = _Unit(pending[0])
            for p in pending[1:]:
                unit.add(p)
            units.append(unit)
        return units, trailing_question

    def _record(
        self,
        unit: _Unit,
        speaker: str,
        other: str | None,
        ref: datetime | None,
        known: dict[str, str],
        seen_caps: set[str],
        turn: SegmentTurn,
    ) -> RecordDraft | None:
        text, mentions = rewrite_relative(unit.text, ref, day_first=self.day_first)
        we_pair = self.we_mode == "pair" or (self.we_mode == "auto" and PAIR_CUES.search(text) is not None)
        body, _left_we = rewrite_persons(text, speaker, other, we_pair=we_pair)
        body = " ".join(body.split())
        entities = extract_entities(body, known, seen_caps, self.max_entities)
        exclude = {w.lower() for e in entities for w in e.split()} | set(known)
        topics = extract_topics(body, exclude, self.max_topics, self.topic_bigrams)
        if speaker not in entities:
            entities = [speaker] + entities[: max(0, self.max_entities - 1)]
            verb = "asked" if unit.question else "said"
            body = f"{speaker} {verb}: {body}"
        timed = [m for m in mentions if m.time.start]
        time = None
        if timed:
            t = timed[0].time
            time = TimeDraft(start=t.start, end=t.end, expression=t.expression)
        return RecordDraft(
            type=classify(text, bool(timed)),
            text=body,
            entities=entities,
            topics=topics,
            time=time,
            source_turns=[turn.index],
        )

    def _fold_answer(self, records: list[RecordDraft], question: tuple[str, int | None, RecordDraft],
                     answer: RecordDraft, speaker: str) -> None:
        """Merge an answer into the record of the question it answers (in place, or appended when the
        question was too short to be a record of its own)."""
        _, index, q = question
        text = answer.text
        if text.startswith(f"{speaker} said: "):
            text = f"{speaker} answered: " + text[len(speaker) + len(" said: "):]
        elif not text.startswith(speaker):  # "Mostly at Mount Tam with Melanie's dad." names them later
            text = f"{speaker} answered: {text}"
        merged_text = f"{q.text} {text}"
        entities = list(dict.fromkeys(q.entities + answer.entities))[: max(self.max_entities, 1)]
        topics = list(dict.fromkeys(answer.topics + q.topics))[: self.max_topics]
        time = answer.time or q.time
        merged = RecordDraft(
            type=classify(merged_text, time is not None), text=merged_text, entities=entities, topics=topics,
            time=time, source_turns=list(dict.fromkeys(q.source_turns + answer.source_turns)),
        )
        if index is None:
            records.append(merged)
        else:
            records[index] = merged

    def _short_answer(self, content: str, speaker: str, other: str | None) -> str | None:
        """The whole turn, cleaned and person-rewritten, when it is short enough to be an answer."""
        text = " ".join(_MARKDOWN.sub("", content.replace("’", "'")).split())
        if not text or not any(c.isalpha() for c in text) or len(text.split()) > self.pair_max_answer_words:
            return None
        body, _ = rewrite_persons(text, speaker, other)
        return " ".join(body.split())

    def _caption_record(self, caption: str, speaker: str, known: dict[str, str], seen_caps: set[str], turn: SegmentTurn) -> RecordDraft:
        cap = _PHOTOGRAPHY.sub("a photo of", caption.strip().rstrip("."))
        text = f"{speaker} shared {cap}." if _PHOTO_PREFIX.match(cap) else f"{speaker} shared a photo of {cap}."
        entities = extract_entities(text, known, seen_caps, self.max_entities)
        exclude = {w.lower() for e in entities for w in e.split()} | set(known) | {"photo", "picture", "image", "shared"}
        topics = extract_topics(cap, exclude, self.max_topics, self.topic_bigrams)
        return RecordDraft(type="fact", text=text, entities=entities, topics=topics, time=None, source_turns=[turn.index])

    def _state(self, seg_names: list[str], all_names: list[str], entities: list[str], topics: list[str], prev: str) -> str:
        """Short resolution note d_k: who I/you are, last third-party entities and topic."""
        parts = []
        if len(seg_names) == 2:
            a, b = seg_names
            parts.append(f"I/you = {a} or {b} (the turn's speaker / the other)")
        elif seg_names:
            parts.append("speakers: " + ", ".join(seg_names))
        if not entities and prev:
            m = re.search(r"last entities: ([^;]*)", prev)
            entities = [e.strip() for e in m.group(1).split(",")] if m else []
        if entities:
            parts.append("last entities: " + ", ".join(entities[:5]))
        if topics:
            parts.append("last topic: " + ", ".join(topics))
        return "; ".join(parts)
