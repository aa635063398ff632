"""Keeping the complete records of an encode reply cut at the token limit.

A reply cut at ``encoder.max_completion_tokens`` (``finish_reason=length``) is not valid JSON, but
the records written before the cut are whole: :func:`salvage_cut_reply` reads them
(:func:`~lychee_ray.llm.cut_json.read_cut_object`), validates each against
:class:`~lychee_ray.ingest.encode.base.RecordDraft` and keeps the valid ones; the record the cut
fell in, and whatever would have followed, are lost. The segment is then stored as ``salvaged``
with a :class:`~lychee_ray.ingest.encode.base.SalvageNote` saying so (``encoder.truncated_reply``).
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import ValidationError

from lychee_ray.ingest.encode.base import EncodeOutput, RecordDraft, SalvageNote
from lychee_ray.llm.cut_json import read_cut_object

# The LLM error kind of a reply cut at the token limit (lychee_ray.llm.errors.ErrorKind).
TRUNCATED = "truncated"


@dataclass(frozen=True)
class Salvage:
    """What a cut encode reply still holds."""

    output: EncodeOutput
    # complete record objects that did not validate as a record draft (dropped)
    invalid: int
    # the records array closed before the cut (every record was written whole)
    complete: bool


def salvage_cut_reply(text: str) -> Salvage:
    """The valid complete records of a cut encode reply, and its resolution state when that was
    written whole before the cut (else empty: the caller keeps the previous one)."""
    cut = read_cut_object(text, "records")
    drafts: list[RecordDraft] = []
    invalid = 0
    for item in cut.items:
        try:
            drafts.append(RecordDraft.model_validate(item))
        except ValidationError:
            invalid += 1
    state = cut.members.get("resolution_state")
    return Salvage(EncodeOutput(records=drafts, resolution_state=state if isinstance(state, str) else ""),
                   invalid, cut.array_closed)


def salvage_note(s: Salvage, attempts: int, max_completion_tokens: int) -> SalvageNote:
    """The segment's note: the cause, what was kept, what was lost."""
    lost = "no record lost (the records list was complete)" if s.complete else \
        "the record being written and any after it lost"
    invalid = f", {s.invalid} invalid dropped" if s.invalid else ""
    return SalvageNote(kind=TRUNCATED, message=(
        f"salvaged: reply cut at max_completion_tokens={max_completion_tokens} (finish_reason=length) "
        f"after {attempts} attempt(s); {len(s.output.records)} complete record(s) kept{invalid}, {lost}"))


__all__ = ["Salvage", "TRUNCATED", "salvage_cut_reply", "salvage_note"]
