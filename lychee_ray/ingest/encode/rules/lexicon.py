"""Word lists and the tokenizer shared by the rules encoder's modules.

The stop-word list itself is :data:`lychee_ray.text.stopwords.ENCODER_STOPWORDS`.
"""

from __future__ import annotations

import re

from lychee_ray.text.dates import MONTH_NAMES
from lychee_ray.text.time.words import WEEKDAYS

# Words (letters with inner apostrophes/hyphens) and the runs between them; joined back they give the text.
WORD_TOKEN = re.compile(r"[A-Za-z]+(?:['-][A-Za-z]+)*|[^A-Za-z]+")

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
# Month and weekday names, lowercased: never entities or topics.
MONTH_WEEKDAY = frozenset(name.lower() for name in MONTH_NAMES[1:]) | frozenset(WEEKDAYS)
# Number and ordinal words: neither topics nor verbs.
NUMBER_WORDS = frozenset(
    "one two three four five six seven eight nine ten eleven twelve twenty hundred thousand first second third".split())
# Irregular past-tense verbs: they take no third-person "-s" and start no topic pair.
IRREGULAR_PAST = frozenset(
    """was were went saw made got took had did ran bought thought felt found gave told came knew left met wrote sang
    began brought caught taught won lost kept sent spent built sat stood heard held paid said became drove ate drank
    swam flew grew threw wore chose forgot fell broke spoke rode hit put set cut let hurt quit read led fed fought
    sold shot slept understood woke drew hid hung lit meant rose sought shook stuck swore tore""".split()
)
