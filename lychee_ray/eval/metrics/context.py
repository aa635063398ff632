"""What the context text actually contains, not which ids it cites (issue: content coverage).

Id coverage (:func:`lychee_ray.eval.metrics.evidence.coverage`) credits a gold turn as soon as any record
citing it is in the context, so a one-sentence fragment earns the whole turn. These metrics read
the **plain text** the answer model would see:

- **content words** of a text: its lexical terms (:func:`lychee_ray.text.lexical.lexical_terms`:
  lower-cased words and numbers, stop words dropped, light suffix stemming so that "adopted" and
  "adoption" meet), as a set;
- :func:`gold_word_coverage` — per gold turn, the share of its content words present in the text
  of the selected units that **cite** it (records from that turn, the window or turn line showing
  it; :func:`citing_texts`). Words that happen to occur elsewhere in a 2,000-token context of the
  same conversation do not count: a whole turn shown scores 1, a one-sentence record of a long
  turn only its share (a turn without content words, e.g. "Wow!", gets None and counts by its id);
- :func:`content_recall` — share of gold turns whose word coverage reaches a threshold
  (``eval.content_coverage_thresholds``: 50% headline, 80% strict);
- :func:`answer_in_context` — the gold answer's normalised token sequence occurs in the normalised
  context (LoCoMo normalisation; category-3 gold cut at ``;``), the "has answer" test of
  LoCoMo's own retrieval evaluation.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from lychee_ray.eval.metrics.locomo import locomo_gold, locomo_normalize
from lychee_ray.text.lexical import lexical_terms


def content_words(text: str) -> frozenset[str]:
    """The set of content words (lexical terms) of ``text``."""
    return frozenset(lexical_terms(text or ""))


def citing_texts(gold_ids: Sequence[str], units: Iterable[tuple[Sequence[str], str]]) -> list[str]:
    """Per gold turn id: the texts of the ``(turn ids, text)`` units citing it, joined by newlines."""
    out: dict[str, list[str]] = {g: [] for g in gold_ids}
    for turn_ids, text in units:
        for t in dict.fromkeys(turn_ids):
            if t in out:
                out[t].append(text)
    return ["\n".join(out[g]) for g in gold_ids]


def gold_word_coverage(gold_texts: Sequence[str], citing: Sequence[str]) -> list[float | None]:
    """Per gold turn text: share of its content words in its citing text (None: the turn has none)."""
    out: list[float | None] = []
    for t, c in zip(gold_texts, citing, strict=False):
        words = content_words(t)
        out.append(len(words & content_words(c)) / len(words) if words else None)
    return out


def content_recall(word_coverage: Sequence[float | None] | None, id_covered: Sequence[bool] | None,
                   threshold: float) -> float | None:
    """Share of gold turns covered at ``threshold`` (a turn without content words counts by its id).

    ``word_coverage`` and ``id_covered`` are aligned per gold turn; None when there is no gold."""
    if not word_coverage:
        return None
    ids = list(id_covered) if id_covered is not None else [False] * len(word_coverage)
    hits = [(w >= threshold) if w is not None else bool(ids[i] if i < len(ids) else False)
            for i, w in enumerate(word_coverage)]
    return sum(hits) / len(hits)


def normalized_context(context: str) -> str:
    """The context as :func:`answer_in_context` compares it (normalised, padded with spaces)."""
    return f" {locomo_normalize(context)} "


def answer_in_context(gold: object, category: str, context: str, *, normalized: str | None = None) -> bool | None:
    """The normalised gold answer (as a whole-word sequence) occurs in the normalised context; None
    without gold. ``normalized`` is :func:`normalized_context` of ``context`` when already known."""
    g = locomo_normalize(locomo_gold(gold, category))
    if not g:
        return None
    return f" {g} " in (normalized if normalized is not None else normalized_context(context))


def thresholds_key(threshold: float) -> str:
    """``content_recall_50`` for 0.5: the result key of one threshold."""
    return f"content_recall_{int(round(threshold * 100))}"


def content_scores(word_coverage: Sequence[float | None] | None, id_covered: Sequence[bool] | None,
                   thresholds: Iterable[float]) -> dict[str, float | None]:
    """``{content_recall_50: …, content_recall_80: …}`` for one question."""
    return {thresholds_key(t): content_recall(word_coverage, id_covered, t) for t in thresholds}


__all__ = ["answer_in_context", "citing_texts", "content_recall", "content_scores", "content_words", "gold_word_coverage",
           "normalized_context", "thresholds_key"]
