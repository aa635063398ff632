"""Stop-word lists: one base, and the purpose-specific extensions built on it.

Each caller skips words for its own reason, so the lists differ on purpose; they are defined here
as named extensions of one base so that the differences are visible in one place:

- :data:`BASE_STOPWORDS` — articles, pronouns, auxiliaries, wh-words and prepositions that no use
  of a word list wants to see.
- :data:`COMMON_STOPWORDS` — the base plus the rest of the usual English function words and chat
  filler ("yeah", "gonna", "things"); shared by the two lists below.
- :data:`ENCODER_STOPWORDS` — the rules encoder's list: never a topic, not a content word, never a
  verb to inflect. Its tokens keep their apostrophes, so it spells contractions out ("didn't"),
  and it adds hedges and interjections ("maybe", "totally", "haha").
- :data:`LEXICAL_STOPWORDS` — BM25's list. Its tokenizer splits at apostrophes, so it holds the
  contraction fragments ("didn", "t", "ll") instead, plus a few light verbs ("get", "got").
- :data:`MATCH_STOPWORDS` — words that never name an entity/topic key on their own in a question:
  the base plus question fillers, small numbers and time words ("time", "last", "first").
"""

from __future__ import annotations

BASE_STOPWORDS = frozenset(
    """a about all an and any are at be been both by can could did do does each for from had has have he her here
    his how i in is it its me more most much my no not of on or other our she should some that the their there
    these they this those to was we were what when where which who whom whose why will with would you your""".split()
)

COMMON_STOPWORDS = BASE_STOPWORDS | frozenset(
    """above after again against also am anything as because before being below between but cannot doing down
    during everything further having hers herself him himself if into itself just myself nor now off once only
    ours ourselves out over own really same so something such than theirs them themselves then through too under
    until up very while yours yourself yourselves yeah ok okay oh wow hey hi gonna wanna lot lots thing
    things""".split()
)

ENCODER_STOPWORDS = COMMON_STOPWORDS | frozenset(
    """almost although always among anyone aren't around can't couldn't didn't doesn't don't either else enough
    even ever every everyone hadn't hasn't haven't he'd he'll he's here's how's however i'd i'll i'm i've isn't
    it's let's like might must mustn't neither never one others otherwise per quite rather shall shan't she'd
    she'll she's shouldn't since someone sometimes somewhat still that's there's they'd they'll they're they've
    though thus toward towards upon us via wasn't we'd we'll we're we've weren't what's whatever when's where's
    whether who's why's within without won't wouldn't yet you'd you'll you're you've yes yep hello gotta kinda
    sorta bit stuff way ways kind sort anyway anyways maybe perhaps actually definitely totally absolutely pretty
    super truly especially ya ah aw aww um uh hmm haha lol omg btw tho""".split()
)

LEXICAL_STOPWORDS = COMMON_STOPWORDS | frozenset(
    "aren couldn didn doesn don few hadn hasn haven isn let ought shouldn wasn weren won wouldn get got getting "
    "s t ll re ve d m".split()
)

MATCH_STOPWORDS = BASE_STOPWORDS | frozenset(
    "yes many may might must shall one two time day week month year ago last next first new good great like get "
    "got go went make made".split()
)

__all__ = ["BASE_STOPWORDS", "COMMON_STOPWORDS", "ENCODER_STOPWORDS", "LEXICAL_STOPWORDS", "MATCH_STOPWORDS"]
