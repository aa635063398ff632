"""LoCoMo's answer scoring, as the benchmark's authors and the published Mem0 evaluation define it.

**F1** (LoCoMo, ``task_eval/evaluation.py`` of snap-research/locomo):

- normalisation: commas deleted; lowercase; every ``string.punctuation`` character deleted (not
  replaced by a space: "self-care" → "selfcare"); the words *a*, *an*, *the* **and** *and*
  removed; whitespace collapsed; then every token Porter-stemmed (nltk's ``PorterStemmer``);
- token F1 over the multiset of stemmed tokens; no common token → 0 (so two empty strings score 0);
- per category: **1** (multi-hop) splits prediction and gold on commas and averages, over the gold
  parts, the best F1 of any prediction part; **2, 3, 4** use the plain F1, with the category-3 gold
  cut at its first ``;`` (what follows is a rationale); **5** (adversarial) is not scored here —
  it is excluded from the evaluated categories, as before.

**BLEU-1** (Mem0's ``evaluation/metrics/utils.py``, itself taken from A-Mem): nltk's
``sentence_bleu`` with weights ``(1, 0, 0, 0)`` and ``SmoothingFunction().method1`` on the
lower-cased prediction and gold tokenised like ``nltk.word_tokenize``. ``word_tokenize`` needs the
``punkt`` data files, which nothing here downloads: sentences are split at ``.``/``!``/``?``
followed by whitespace instead of by punkt, then each sentence goes through the same
``NLTKWordTokenizer`` ``word_tokenize`` uses (identical for answer-length texts that punkt would
not split differently). An empty prediction or gold scores 0, as in Mem0.

Both need only nltk's code (``PorterStemmer`` and ``sentence_bleu`` read no data files).
"""

from __future__ import annotations

import re
import string
from collections import Counter
from functools import lru_cache

from nltk.stem import PorterStemmer
from nltk.tokenize import NLTKWordTokenizer
from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu

# LoCoMo categories with special handling (the dataset's own numbers).
MULTI_ANSWER_CATEGORY = "1"  # gold lists several answers separated by commas
RATIONALE_CATEGORY = "3"  # gold is "answer; rationale"
BLEU1_WEIGHTS = (1.0, 0.0, 0.0, 0.0)
# Distinct words stemmed per process (answers reuse a small vocabulary).
_STEM_CACHE = 65536

_PUNCT = frozenset(string.punctuation)
_DROP_WORDS = re.compile(r"\b(a|an|the|and)\b")
_SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+")
_STEMMER = PorterStemmer()
_WORD_TOKENIZER = NLTKWordTokenizer()
_SMOOTHING = SmoothingFunction().method1


def locomo_normalize(text: object) -> str:
    """LoCoMo's ``normalize_answer``: commas and punctuation deleted, lowercase, a/an/the/and removed."""
    s = str(text if text is not None else "").replace(",", "").lower()
    s = "".join(ch for ch in s if ch not in _PUNCT)
    s = _DROP_WORDS.sub(" ", s)
    return " ".join(s.split())


@lru_cache(maxsize=_STEM_CACHE)
def _stem(word: str) -> str:
    return _STEMMER.stem(word)


def locomo_tokens(text: object) -> list[str]:
    """Porter stems of the normalised text's words."""
    return [_stem(w) for w in locomo_normalize(text).split()]


def locomo_f1_single(prediction: object, gold: object) -> float:
    """LoCoMo's ``f1_score``: stemmed-token F1 (0 when nothing is shared, also for two empty strings)."""
    p, g = locomo_tokens(prediction), locomo_tokens(gold)
    same = sum((Counter(p) & Counter(g)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(p), same / len(g)
    return 2 * precision * recall / (precision + recall)


def locomo_f1_multi(prediction: object, gold: object) -> float:
    """LoCoMo's ``f1`` (category 1): mean over comma-separated gold parts of the best part-wise F1."""
    preds = [p.strip() for p in str(prediction if prediction is not None else "").split(",")]
    golds = [g.strip() for g in str(gold if gold is not None else "").split(",")]
    return sum(max(locomo_f1_single(p, g) for p in preds) for g in golds) / len(golds)


def locomo_gold(gold: object, category: str) -> str:
    """The gold answer as LoCoMo scores it: category 3 keeps what precedes the first ``;``."""
    s = str(gold if gold is not None else "")
    return s.split(";")[0].strip() if str(category) == RATIONALE_CATEGORY else s


def locomo_f1(prediction: object, gold: object, category: str) -> float:
    """F1 of one answer exactly as LoCoMo's ``eval_question_answering`` scores its category (1–4)."""
    g = locomo_gold(gold, category)
    if str(category) == MULTI_ANSWER_CATEGORY:
        return locomo_f1_multi(prediction, g)
    return locomo_f1_single(prediction, g)


def word_tokens(text: object) -> list[str]:
    """``nltk.word_tokenize`` of lower-cased text, with a regex sentence split instead of punkt."""
    s = str(text if text is not None else "").lower()
    return [t for sent in _SENTENCE_BREAK.split(s) if sent for t in _WORD_TOKENIZER.tokenize(sent)]


def bleu1(prediction: object, gold: object) -> float:
    """Mem0/A-Mem BLEU-1: ``sentence_bleu([gold], pred, weights=(1,0,0,0), method1 smoothing)``."""
    if not prediction or not gold or not str(prediction).strip() or not str(gold).strip():
        return 0.0  # Mem0 scores an empty prediction or reference 0
    hyp, ref = word_tokens(prediction), word_tokens(gold)
    if not hyp or not ref:
        return 0.0
    return float(sentence_bleu([ref], hyp, weights=BLEU1_WEIGHTS, smoothing_function=_SMOOTHING))


__all__ = ["BLEU1_WEIGHTS", "MULTI_ANSWER_CATEGORY", "RATIONALE_CATEGORY", "bleu1", "locomo_f1", "locomo_f1_multi",
           "locomo_f1_single", "locomo_gold", "locomo_normalize", "locomo_tokens", "word_tokens"]
