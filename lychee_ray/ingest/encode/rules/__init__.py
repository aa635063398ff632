"""The ``rules`` encode backend: deterministic, offline, sentence-level records.

No model is involved. For each turn of a segment, in order:

1. an ``[image: ...]`` caption (the LoCoMo adapter puts BLIP captions there) becomes its own record,
   "Melanie shared a photo of a sunset over a lake.";
2. the rest is cleaned (markdown markers, list bullets, leading interjections such as "Wow,",
   vocatives such as ", Caroline!", filler such as ", you know?") and split into sentences
   (:func:`~lychee_ray.text.sentences.split_sentences`: abbreviations such as Mr./Dr./e.g. and
   decimals do not end a sentence);
3. trivial sentences are dropped: greetings, thanks, reactions ("That's so cool!") — see
   :data:`~lychee_ray.ingest.encode.rules.cleaning.TRIVIAL_PATTERNS` — and sentences without a
   content word; questions need ``question_min_content_words`` content words ("What's up?" goes,
   "Did you go to the parade?" stays);
4. sentences shorter than ``min_words`` words are merged into the previous kept sentence of the same
   turn (or the next one when they come first): "It's special to me." alone means nothing;
5. relative dates are rewritten against the session date
   (:func:`~lychee_ray.text.time.rewrite.rewrite_relative`) and the first time expression becomes
   the record's time;
6. first/second person is rewritten to speaker names
   (:func:`~lychee_ray.ingest.encode.rules.persons.rewrite_persons`);
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

Modules: :mod:`~.cleaning` (markup, filler, trivial sentences), :mod:`~.units` (sentences → record
units), :mod:`~.persons` (pronouns → names), :mod:`~.speakers` (names, aliases, the resolution
note), :mod:`~.metadata` (entities, topics, type), :mod:`~.answers` (question → answer folding),
:mod:`~.captions` (image records), :mod:`~.lexicon` (shared word lists), :mod:`~.agent` (records of
tool traffic, with :mod:`~.tool_results`: a call and its result as record text) and :mod:`~.encoder`
(:class:`RulesEncoder`, which runs the steps above).
"""

from lychee_ray.ingest.encode.rules.encoder import RulesEncoder
from lychee_ray.names import WeMode
from lychee_ray.ingest.encode.rules.metadata import classify, extract_entities, extract_topics
from lychee_ray.ingest.encode.rules.persons import rewrite_persons
from lychee_ray.ingest.encode.rules.speakers import display_name

__all__ = ["RulesEncoder", "WeMode", "classify", "display_name", "extract_entities", "extract_topics", "rewrite_persons"]
