"""Collateral supersession on agent logs, judged from structure: links that mark as replaced a record
whose value still held (docs/current-memory.md).

Every supersession link a store holds (``supersedes`` on the newer record) is judged against the
log itself, independently of how the encoder grouped fields:

* both records must come from tool results (else the link is ``not_judged``: a text link, judged by
  hand on chats);
* a newer record from a call whose tool name's first word is one of :data:`END_WORDS` ended the
  object (a cancellation): every old record of it stopped holding (``ended``);
* otherwise the old record shows some top-level fields of its result (named in its text as
  ``field:`` or ``field 1:``); the link is **collateral** when every one of them has the same value
  in the newer record's result — the old record still held.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from typing import Any
from collections.abc import Iterable

from lychee_ray.core.conversation import Conversation, Turn

END_WORDS = frozenset({"cancel", "delete", "remove", "close", "terminate", "revoke", "deactivate"})
_WORDS = re.compile(r"[_\W]+|(?<=[a-z0-9])(?=[A-Z])")


@dataclass
class CollateralCounts:
    """Judged links of a store (or of one conversation)."""

    links: int = 0
    judged: int = 0
    collateral: int = 0
    ended: int = 0
    not_judged: int = 0

    def add(self, other: CollateralCounts) -> CollateralCounts:
        for k, v in asdict(other).items():
            setattr(self, k, getattr(self, k) + v)
        return self

    def report(self) -> dict[str, Any]:
        out: dict[str, Any] = asdict(self)
        out["collateral_share"] = round(self.collateral / self.judged, 4) if self.judged else None
        return out


def _parse(text: str) -> Any:
    try:
        return json.loads(text)
    except (json.JSONDecodeError, TypeError):
        return None


def _human(key: str) -> str:
    return " ".join(w for w in _WORDS.split(key) if w).lower()


def _shown_fields(text: str, value: dict[str, Any]) -> list[str]:
    low = text.lower()
    return [k for k in value if re.search(rf"(?:^|[\s:;(]){re.escape(_human(k))}(?: \d+)?:", low)]


def _canon(v: Any) -> str:
    return json.dumps(v, sort_keys=True)


def conversation_collateral(conv: Conversation, records: Iterable[dict[str, Any]]) -> CollateralCounts:
    """Judge the supersession links of one conversation's stored records (rows of the records table)."""
    rows = list(records)
    by_id = {r["record_id"]: r for r in rows}
    turns: dict[str, Turn] = {t.turn_id: t for *_, t in conv.iter_turns()}
    # a result's tool: the last call before it with its id (some models reuse ids once answered)
    tool_of: dict[str, str] = {}
    open_calls: dict[str, str] = {}
    for *_, t in conv.iter_turns():
        for c in t.tool_calls:
            open_calls[c.call_id] = c.name
        if t.role == "tool" and t.tool_call_id in open_calls:
            tool_of[t.turn_id] = open_calls.pop(t.tool_call_id)

    def result_of(rec: dict[str, Any]) -> tuple[dict[str, Any], str] | None:
        for tid in rec.get("source_turn_ids") or []:
            t = turns.get(tid)
            if t is not None and t.role == "tool":
                v = _parse(t.content)
                if isinstance(v, dict):
                    return v, tool_of.get(tid, t.tool_name or "")
        return None

    out = CollateralCounts()
    for r in rows:
        for old_id in r.get("supersedes") or []:
            old = by_id.get(old_id)
            if old is None:
                continue
            out.links += 1
            new_res, old_res = result_of(r), result_of(old)
            if new_res is None or old_res is None:
                out.not_judged += 1
                continue
            (new_value, new_tool), (old_value, _) = new_res, old_res
            words = [w.lower() for w in _WORDS.split(new_tool) if w]
            if words and words[0] in END_WORDS:
                out.ended += 1
                continue
            shown = _shown_fields(old["text"], old_value)
            if not shown:
                out.not_judged += 1
                continue
            out.judged += 1
            if all(_canon(old_value.get(k)) == _canon(new_value.get(k)) for k in shown):
                out.collateral += 1
    return out


__all__ = ["END_WORDS", "CollateralCounts", "conversation_collateral"]
