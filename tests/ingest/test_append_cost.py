"""What keeps a one-turn append's cost independent of the conversation's length: the slot state and
the index of what people said are kept by the appending process and continued from a copy, never
rebuilt from every stored record (docs/incremental.md, "Cost")."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

import lychee_ray.ingest.supersede as supersede
import lychee_ray.ingest.text_links as text_links
from lychee_ray.config import load_config
from lychee_ray.core.conversation import Conversation
from lychee_ray.core.records import MemoryRecord
from lychee_ray.io.adapters import read_input
from lychee_ray.io.store import StoreWriter, iter_markers, read_part
from lychee_ray.ingest.text_links import SharedLists
from lychee_ray.memory import MemoryStore
from tests.paths import LOCOMO_DIR, need
from tests.reliability.test_bad_input import HashEmbedder

CFG = load_config(env={})


@pytest.fixture(scope="module")
def turns() -> list[dict]:
    """LoCoMo conversation 26's turns (two people, every turn of role user: each one a statement)."""
    conv: Conversation = next(iter(read_input("locomo", need(LOCOMO_DIR / "26.json")))).conversation
    return [dict(turn_id=t.turn_id, role=t.role, speaker=t.speaker, content=t.content, timestamp=t.timestamp,
                 session_id=s.session_id, session_started_at=s.started_at) for _, s, _, t in conv.iter_turns()]


class _Counter:
    """Counts the statements whose text is analysed and the records replayed into a slot state."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.analysed = self.replayed = 0
        analyse, absorb = text_links._SpeakerStatements.statement, supersede.SlotState.absorb

        def counted_analyse(inner, r):
            self.analysed += 1
            return analyse(inner, r)

        def counted_absorb(state, records):
            recs = list(records)
            self.replayed += len(recs)
            return absorb(state, recs)

        monkeypatch.setattr(text_links._SpeakerStatements, "statement", counted_analyse)
        monkeypatch.setattr(supersede.SlotState, "absorb", counted_absorb)

    def take(self) -> int:
        n, self.analysed, self.replayed = self.analysed + self.replayed, 0, 0
        return n


def _appends(root: Path, turns: list[dict], base: int, count: int, counter: _Counter | None = None,
             fresh: bool = False) -> list[int]:
    """A conversation of the first ``base`` turns, then ``count`` one-turn appends (each through a new
    ``MemoryStore`` with ``fresh``: nothing kept between them); the work each append counted."""
    StoreWriter(root)
    cid, user = "c26", "u26"
    work = []
    store = MemoryStore.open(root, CFG, embedder=HashEmbedder(), llm="rules")
    store.append(cid, turns[:base], user_id=user)
    store.append(cid, turns[base:base + 1], user_id=user)  # the first increment reads the conversation whole
    for t in turns[base + 1:base + 1 + count]:
        if fresh:
            store.close()
            store = MemoryStore.open(root, CFG, embedder=HashEmbedder(), llm="rules")
        if counter is not None:
            counter.take()
        store.append(cid, [t], user_id=user)
        if counter is not None:
            work.append(counter.take())
    store.close()
    return work


def _records(root: Path) -> pa.Table:
    m = next(iter_markers(root))
    return read_part(root, "records", m)


def test_an_appends_statement_work_does_not_grow_with_the_conversation(tmp_path, monkeypatch, turns):
    counter = _Counter(monkeypatch)
    short = _appends(tmp_path / "short", turns, 40, 12, counter)
    long = _appends(tmp_path / "long", turns, 400, 12, counter)
    stored = _records(tmp_path / "long").num_rows
    # each append analyses and replays only the records of the tail it re-encodes: the same few at
    # 40 turns as at 400 (rebuilding the state from every stored record made it grow with them)
    assert max(long) <= max(max(short), 1) * 3 and max(long) < stored / 10, (short, long, stored)


SAID = ["I've reached {n}% test coverage on the billing service.",
        "My test coverage on the billing service has recently improved to {n}%.",
        "I only secured {k} interviews for producer roles this month.",
        "I've never submitted my grant proposal to Ines at the studio.",
        "I've submitted my grant proposal to Ines at the studio for review.",
        "I moved the Zoom call with the creative director to April {d} at 11 AM."]


def _chat(n: int) -> list[dict]:
    """A user's changing values, counts and denials between assistant replies, a session every 20 turns."""
    out = []
    for i in range(n):
        user = i % 2 == 0
        text = SAID[(i // 2) % len(SAID)].format(n=40 + i % 50, k=2 + i % 9, d=1 + i % 28) if user else \
            f"Noted, that is step {i} of the plan."
        t = dict(turn_id=f"t{i}", role="user" if user else "assistant", speaker="User" if user else "Assistant",
                 content=text, session_id=f"s{i // 20}")
        if i % 20 == 0:
            t["session_started_at"] = f"2024-03-{1 + i // 20:02d}T10:00:00"
        out.append(t)
    return out


def test_appends_continuing_the_kept_state_link_as_appends_that_rebuild_it(tmp_path):
    kept, fresh, chat = tmp_path / "kept", tmp_path / "fresh", _chat(112)
    _appends(kept, chat, 90, 20)
    _appends(fresh, chat, 90, 20, fresh=True)
    got, want = _records(kept), _records(fresh)
    assert got.equals(want)
    late = [c for c, t in zip(got.column("conflicts_with").to_pylist(), got.column("source_turn_ids").to_pylist(),
                              strict=True) if int(t[0][1:]) > 90]
    assert sum(bool(c) for c in late) >= 2  # the appends linked what they said to what was stored


def test_a_copy_of_shared_lists_leaves_the_original_as_it_was():
    a: SharedLists[str, int] = SharedLists()
    a.append("x", 1)
    b = a.copy()
    a.append("x", 2)  # the original changes first
    b.append("x", 3)
    b.append("y", 4)
    c = b.copy()
    c.put("x", [9])
    c.pop("y")
    assert (list(a.get("x")), list(a.get("y"))) == ([1, 2], [])
    assert (list(b.get("x")), list(b.get("y"))) == ([1, 3], [4])
    assert list(c.get("x")) == [9] and "y" not in c and len(c) == 1


def _said(i: int, text: str, slot: str | None = None, supersedes: list[str] | None = None) -> MemoryRecord:
    return MemoryRecord(record_id=f"r{i}", conversation_id="c", user_id="u", session_id="s", segment_id="c#s1",
                        ordinal=i, type="fact", text=text, source_turn_ids=[f"t{i}"], created_at="2024-05-01",
                        backend="rules", model="rules-v1", slot=slot, slot_value=f"v{i}" if slot else None,
                        supersedes=supersedes or [])


def test_a_copy_of_the_slot_state_leaves_the_kept_one_as_it_was():
    speakers = {f"t{i}": "User" for i in range(6)}
    stored = [_said(0, "I've never submitted my grant proposal to Ines."), _said(1, "I live in Lisbon.", "user · home"),
              _said(2, "I work at the studio.", "user · work")]
    later = [_said(3, "I moved to Porto.", "user · home", ["r1"]), _said(4, "I've submitted my grant proposal to Ines.")]
    kept = supersede.SlotState.of(stored, text_links.StatementIndex(CFG.encoder.currency), dict(speakers))
    before = ([e.record_id for e in kept.entries()], len(kept.statements._of("User").statements))  # type: ignore[union-attr]
    copy = kept.copy()
    copy.absorb(later)
    whole = supersede.SlotState.of(stored + later, text_links.StatementIndex(CFG.encoder.currency), dict(speakers))
    assert ([e.record_id for e in kept.entries()], len(kept.statements._of("User").statements)) == before  # type: ignore[union-attr]
    assert [e.record_id for e in copy.entries()] == [e.record_id for e in whole.entries()] == ["r2", "r3"]
    kept.absorb(later)  # the kept state goes on as the copy did
    assert [e.record_id for e in kept.entries()] == ["r2", "r3"]
