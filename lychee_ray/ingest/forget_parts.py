"""What forgetting an entity takes out of one conversation, at the granularity a user means.

Forgetting "Biscuit" removes what is said about Biscuit, not the other facts that shared a record
or a turn with it (docs/erasure.md, "Forgetting"):

* :func:`split_matches` — of the records a selector matches, those that only *mention* the entity
  in their text, next to other clauses, are **rewritten** (:func:`~lychee_ray.text.mentions.strip_mentions`:
  the clauses naming it go, the rest stays, under a new id made of the new text, with the same
  provenance: conversation, segment, source turns, time, type); the others are **removed** whole
  (the entity is in their slot, their ``entities`` only, or every clause of their text);
* :func:`turn_edits` — with ``redact_turns``, each turn naming the entity has the clauses naming it
  replaced by ``[forgotten]`` (:func:`~lychee_ray.text.mentions.redact_mentions`), its ``meta``
  cleared when that names it (tool calls and results live there), and is re-embedded, its passages
  cut again; a source turn of a removed record that does not name the entity is redacted whole, as
  for the other selectors;
* :class:`StoreModels` — the store's own settings (its manifest's configuration: embedding model,
  the turn text the segmenter embeds, passages) and the embedders they name, loaded on first use:
  new texts are embedded as the build embedded them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
from pydantic import ValidationError

from lychee_ray.config import EmbeddingConfig, LLMConfig, PassagesConfig, SegmenterConfig, TokenizerConfig
from lychee_ray.core.conversation import Turn
from lychee_ray.core.records import MemoryRecord
from lychee_ray.embed import Embedder, get_embedder
from lychee_ray.ingest.passages import turn_passages
from lychee_ray.ingest.segment.conversation import turn_embedding_text
from lychee_ray.io.store.forget import REDACTED
from lychee_ray.io.store.rewrite import TurnEdit
from lychee_ray.text.mentions import redact_mentions, strip_mentions

Embed = Callable[[list[str]], np.ndarray]


def _section(cls: Any, doc: Any) -> Any:
    """A configuration section from a manifest's ``config`` (its defaults when absent or stale)."""
    try:
        return cls.model_validate(doc or {})
    except ValidationError:
        return cls()


@dataclass
class StoreModels:
    """The settings a store was built with and its embedders (module doc). ``embedder``: one given
    (tests, a process that has the store's model loaded) embeds everything."""

    embedding: EmbeddingConfig
    segmenter: SegmenterConfig
    passages: PassagesConfig
    encoding: str
    llm: LLMConfig = field(default_factory=LLMConfig)  # an API embedding model's endpoint (its key: the environment)
    embedder: Embedder | None = None
    _loaded: dict[str, Embedder] = field(default_factory=dict)

    @classmethod
    def of_manifest(cls, manifest: dict[str, Any], embedder: Embedder | None = None) -> StoreModels:
        cfg = manifest.get("config") or {}
        return cls(_section(EmbeddingConfig, cfg.get("embedding")), _section(SegmenterConfig, cfg.get("segmenter")),
                   _section(PassagesConfig, cfg.get("passages")), _section(TokenizerConfig, cfg.get("tokenizer")).encoding,
                   _section(LLMConfig, cfg.get("llm")), embedder)

    def _model(self, memory: bool) -> Embedder:
        if self.embedder is not None:
            return self.embedder
        key = "memory" if memory else "turns"
        if key not in self._loaded:
            self._loaded[key] = get_embedder(self.embedding.for_build(), self.llm, memory=memory)
        return self._loaded[key]

    def embed_memory(self, texts: list[str]) -> np.ndarray:
        """Vectors of record, node and passage texts (as the build embeds them)."""
        return np.asarray(self._model(True).encode(texts), dtype=np.float32) if texts else np.zeros((0, 0), np.float32)

    def embed_turns(self, texts: list[str]) -> np.ndarray:
        """Vectors of turn texts (as the build embeds them for the segmenter and raw-turn search)."""
        return np.asarray(self._model(False).encode(texts), dtype=np.float32) if texts else np.zeros((0, 0), np.float32)


def _named(word: str, text: str) -> bool:
    return bool(word.strip()) and re.search(r"(?<!\w)" + re.escape(word.strip()) + r"(?!\w)", text, re.IGNORECASE) is not None


def rewritten_row(row: dict[str, Any], pattern: re.Pattern[str], subject_is_entity: bool) -> dict[str, Any] | None:
    """``row`` (a record) without its clauses naming the entity, under its new id; None when it is
    to be removed whole: its slot is about the entity, nothing of its text is left, or what is
    left or its slot value still names it."""
    text = row.get("text") or ""
    if subject_is_entity or not pattern.search(text):
        return None
    new = strip_mentions(text, pattern)
    if new is None or new == text or pattern.search(new):
        return None
    value = " ".join((row.get("slot_value") or "").split())
    if value and (pattern.search(value) or (_named(value, text) and not _named(value, new))):
        return None  # the value it states was in the part that goes

    def stays(word: str) -> bool:  # an entity or topic named only in the part that goes goes with it
        return not pattern.fullmatch(" ".join(word.split())) and not (_named(word, text) and not _named(word, new))

    out = dict(row)
    out.update(text=new, entities=[e for e in row.get("entities") or [] if stays(e)],
               topics=[t for t in row.get("topics") or [] if stays(t)],
               record_id=MemoryRecord.make_id(row["conversation_id"], row["segment_id"], row["ordinal"], row["type"], new))
    return out


def split_matches(records: pa.Table, match: Callable[[dict[str, Any]], bool], pattern: re.Pattern[str] | None,
                  subject_is: Callable[[dict[str, Any]], bool]) -> tuple[set[str], dict[str, dict[str, Any]]]:
    """The records ``match`` names: (ids to remove, old id -> rewritten row). Without a ``pattern``
    (a selector other than an entity) every match is removed."""
    dead: set[str] = set()
    rewrites: dict[str, dict[str, Any]] = {}
    for r in records.to_pylist():
        if not match(r):
            continue
        new = rewritten_row(r, pattern, subject_is(r)) if pattern is not None else None
        if new is None:
            dead.add(r["record_id"])
        else:
            rewrites[r["record_id"]] = new
    return dead, rewrites


def _meta_names(meta: Any, pattern: re.Pattern[str]) -> bool:
    """Whether a turn's ``meta`` (JSON text: tool calls and results) names the entity, escaped or not."""
    if not meta:
        return False
    text = meta if isinstance(meta, str) else json.dumps(meta, ensure_ascii=False)
    if pattern.search(text):
        return True
    try:
        return bool(pattern.search(json.dumps(json.loads(text), ensure_ascii=False)))
    except ValueError:
        return False


def turn_edits(turns: pa.Table, pattern: re.Pattern[str] | None, whole: set[str], models: StoreModels,
               dim: int) -> dict[str, TurnEdit]:
    """The redactions of ``turns`` (module doc): turns naming ``pattern``'s entity in part, the
    ``whole`` ones (source turns of removed records) whole."""
    plans: dict[str, tuple[dict[str, Any], str, bool]] = {}
    for r in turns.to_pylist():
        content, meta = r.get("content") or "", r.get("meta")
        if pattern is not None and (pattern.search(content) or _meta_names(meta, pattern)):
            new = redact_mentions(content, pattern, REDACTED)
            plans[r["turn_id"]] = (r, new if new.strip() else REDACTED, _meta_names(meta, pattern))
        elif r["turn_id"] in whole and (content != REDACTED or meta):
            plans[r["turn_id"]] = (r, REDACTED, True)
    if not plans:
        return {}
    kept = {t: Turn.from_row({**r, "content": c, "meta": None if clear else r.get("meta")})
            for t, (r, c, clear) in plans.items() if c != REDACTED}
    vecs = models.embed_turns([turn_embedding_text(t, models.segmenter.max_turn_chars) for t in kept.values()])
    by_turn = dict(zip(kept, vecs, strict=True)) if kept else {}
    passages = {t: turn_passages(r["conversation_id"], r["user_id"], kept[t], models.passages, models.encoding)
                for t, (r, _, _) in plans.items() if t in kept}
    flat = [p for ps in passages.values() for p in ps]
    pvecs = models.embed_memory([p.text for p in flat]).reshape(-1, dim) if flat else np.zeros((0, dim), np.float32)
    out: dict[str, TurnEdit] = {}
    at = 0
    for t, (_, content, clear) in plans.items():
        ps = passages.get(t, [])
        out[t] = TurnEdit(content, clear, by_turn.get(t), ps, pvecs[at:at + len(ps)])
        at += len(ps)
    return out


__all__ = ["StoreModels", "rewritten_row", "split_matches", "turn_edits"]
