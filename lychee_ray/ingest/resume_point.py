"""The segmenter's resume point: what a generation saves so the next increment continues it.

Saved beside each generation as ``segstate/<key>.<gen>.json`` (docs/incremental.md); the store
keeps it as that JSON object and :class:`ResumePoint` is its typed reading, written back by
:meth:`ResumePoint.to_dict` in the same shape (so stores written before it read unchanged).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from lychee_ray.config import SegmenterConfig

# Format of the saved resume point; another version is not continued (the conversation is
# re-segmented, reusing the encodings that still hold).
SEGSTATE_VERSION = 1


class ResumePoint(BaseModel):
    """The resume point saved with a generation.

    ``segmenter``: the segmenter's own state before the end of the input (``BaseSegmenter.state_dict``;
    ingest/segment owns its shape); ``provisional``: ids of the stored segments the end of the input
    closed (the next increment re-opens them); ``num_turns``: turns the segmenter consumed;
    ``open_turn_ids``: the turns it holds undecided (``lychee-ray verify`` accepts exactly these
    outside every segment); ``speakers``: the speakers the segments were encoded with (a new speaker
    re-encodes them; None in resume points saved before it was kept).
    """

    model_config = ConfigDict(extra="ignore")

    version: int = SEGSTATE_VERSION
    segmenter: dict[str, Any]
    provisional: list[str] = Field(default_factory=list)
    num_turns: int
    open_turn_ids: list[str] = Field(default_factory=list)
    speakers: list[str] | None = None

    @classmethod
    def read(cls, raw: dict[str, Any] | None) -> ResumePoint | None:
        """The resume point a stored JSON object holds; None when there is none or it is not one
        (the next increment then re-segments the conversation)."""
        if raw is None:
            return None
        try:
            return cls.model_validate(raw)
        except ValidationError:
            return None

    def to_dict(self) -> dict[str, Any]:
        """The JSON object saved with the generation (the shape :meth:`read` takes)."""
        return self.model_dump()

    @property
    def current(self) -> bool:
        """Written in this version's format (an older one is not continued)."""
        return self.version == SEGSTATE_VERSION

    @property
    def segmenter_mode(self) -> str:
        """The exchange mode the segmenter resolved (``role`` / ``turn``...)."""
        return str(self.segmenter["mode"])

    @property
    def segmenter_config(self) -> SegmenterConfig:
        """The segmenter settings the saved state was made with."""
        return SegmenterConfig.model_validate(self.segmenter["config"])


__all__ = ["SEGSTATE_VERSION", "ResumePoint"]
