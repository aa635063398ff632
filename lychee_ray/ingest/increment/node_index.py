"""The evidence nodes of a conversation kept up to date record by record.

:func:`~lychee_ray.ingest.nodes.build_nodes` derives every node from every record; an increment
changes only the records of its tail segments, so :class:`NodeIndex` keeps what ``build_nodes``
accumulates — each key's contributions in record order, each segment's event frames — and
replaces the tail: the nodes it returns as changed, plus the unchanged ones, are exactly what
``build_nodes`` gives for the new record list (``tests/ingest/test_node_index.py`` checks it).
"""

from __future__ import annotations

from collections.abc import Iterable

from lychee_ray.ingest.nodes import _event_frames, time_keys
from lychee_ray.config import NodesConfig
from lychee_ray.core.keys import normalise_key
from lychee_ray.core.records import EvidenceNode, MemoryRecord, NodeKind

Key = tuple[NodeKind, str]  # (kind, key)


def record_keys(r: MemoryRecord, cfg: NodesConfig) -> list[tuple[NodeKind, str, str]]:
    """(kind, key, display) of every node a record adds to, in the order ``build_nodes`` adds them."""
    out: list[tuple[NodeKind, str, str]] = []
    ents = [(normalise_key(e), e) for e in r.entities]
    tops = [(normalise_key(t), t) for t in r.topics]
    out += [("entity", k, e) for k, e in ents]
    out += [("topic", k, t) for k, t in tops]
    pairs = [(ek, e, tk, t) for ek, e, tk, t in ((ek, e, tk, t) for ek, e in ents for tk, t in tops) if ek and tk and ek != tk]
    out += [("entity_topic", f"{ek}|{tk}", f"{e} — {t}") for ek, e, tk, t in pairs[: cfg.max_entity_topic_pairs]]
    out += [("time", k, disp) for k, disp in time_keys(r, cfg.max_days_per_span)]
    return [x for x in out if x[1]]


class _KeyState:
    """What ``build_nodes``' accumulator holds for one key, kept so the tail can be taken off again:
    every contribution (record id, surface form) in record order, surface counts, the capped ids."""

    __slots__ = ("contrib", "surface", "ids", "idset")

    def __init__(self) -> None:
        self.contrib: list[tuple[str, str]] = []
        self.surface: dict[str, int] = {}
        self.ids: list[str] = []
        self.idset: set[str] = set()

    def push(self, rid: str, display: str, cap: int) -> None:
        self.contrib.append((rid, display))
        self.surface[display] = self.surface.get(display, 0) + 1
        if rid not in self.idset and len(self.ids) < cap:
            self.ids.append(rid)
            self.idset.add(rid)

    def pop_tail(self, gone: set[str]) -> None:
        """Take off the contributions of ``gone`` records: the last ones (they are the last records)."""
        while self.contrib and self.contrib[-1][0] in gone:
            _, display = self.contrib.pop()
            n = self.surface[display] - 1
            if n:
                self.surface[display] = n
            else:
                del self.surface[display]
        while self.ids and self.ids[-1] in gone:
            self.idset.discard(self.ids.pop())

    def display(self) -> str:
        # as build_nodes: the most frequent surface form, ties broken alphabetically
        return min(self.surface.items(), key=lambda kv: (-kv[1], kv[0]))[0]


class NodeIndex:
    """A conversation's nodes, updated by replacing its tail records (:meth:`replace_tail`)."""

    def __init__(self, conversation_id: str, user_id: str, cfg: NodesConfig) -> None:
        self.cid, self.uid, self.cfg = conversation_id, user_id, cfg
        self._acc: dict[Key, _KeyState] = {}  # key -> its contributions, in record order
        self._keys: dict[str, list[tuple[NodeKind, str, str]]] = {}  # record id -> its (kind, key, display)
        self._order: list[str] = []  # record ids in conversation order
        self._by_segment: dict[str, list[MemoryRecord]] = {}
        self._segment_of: dict[str, str] = {}  # record id -> its segment
        self._turn_pos: dict[str, int] = {}
        self._nodes: dict[Key, EvidenceNode] = {}
        self._frames: dict[str, list[EvidenceNode]] = {}  # segment id -> its event frames

    @classmethod
    def build(cls, records: list[MemoryRecord], turn_order: list[str], cfg: NodesConfig, conversation_id: str,
              user_id: str) -> NodeIndex:
        idx = cls(conversation_id, user_id, cfg)
        idx.add_turns(turn_order)
        idx.replace_tail(0, records)
        return idx

    def add_turns(self, turn_ids: Iterable[str]) -> None:
        """Turns appended to the conversation (event frames measure closeness in turn positions)."""
        for t in turn_ids:
            self._turn_pos.setdefault(t, len(self._turn_pos))

    @property
    def record_ids(self) -> list[str]:
        return list(self._order)

    def replace_tail(self, keep: int, records: list[MemoryRecord]) -> tuple[list[EvidenceNode], list[str]]:
        """Keep the first ``keep`` records, replace the rest by ``records`` (in conversation order);
        returns the nodes new or changed, and the ids of nodes gone."""
        dirty: set[Key] = set()
        segs: set[str] = set()
        gone_ids = set(self._order[keep:])
        for rid in self._order[keep:]:
            for kind, key, _ in self._keys.pop(rid, []):
                acc = self._acc.get((kind, key))
                if acc is not None:
                    acc.pop_tail(gone_ids)
                    dirty.add((kind, key))
        for seg in {self._segment_of.pop(rid) for rid in gone_ids if rid in self._segment_of}:
            segs.add(seg)
            self._by_segment[seg] = [r for r in self._by_segment.get(seg, []) if r.record_id not in gone_ids]
        del self._order[keep:]
        for r in records:
            keys = record_keys(r, self.cfg)
            self._keys[r.record_id] = keys
            self._order.append(r.record_id)
            self._by_segment.setdefault(r.segment_id, []).append(r)
            self._segment_of[r.record_id] = r.segment_id
            segs.add(r.segment_id)
            cap = self.cfg.max_records_per_node
            for kind, key, disp in keys:
                acc = self._acc.get((kind, key))
                if acc is None:
                    acc = self._acc[(kind, key)] = _KeyState()
                acc.push(r.record_id, disp, cap)
                dirty.add((kind, key))
        changed: list[EvidenceNode] = []
        gone: list[str] = []
        for k in dirty:
            node = self._node(k)
            old = self._nodes.get(k)
            if node is None:
                self._acc.pop(k, None)
                if old is not None:
                    gone.append(old.node_id)
                    del self._nodes[k]
            elif old is None or old != node:
                self._nodes[k] = node
                changed.append(node)
        for seg in segs:
            old_frames = {f.node_id: f for f in self._frames.pop(seg, [])}
            recs = self._by_segment.get(seg) or []
            if not recs:
                self._by_segment.pop(seg, None)
            new_frames = self._segment_frames(recs)
            if new_frames:
                self._frames[seg] = new_frames
            for f in new_frames:
                if old_frames.pop(f.node_id, None) != f:
                    changed.append(f)
            gone += list(old_frames)
        return changed, gone

    def nodes(self) -> list[EvidenceNode]:
        """Every node, in ``build_nodes`` order (kind, then key)."""
        out = list(self._nodes.values()) + [f for fs in self._frames.values() for f in fs]
        out.sort(key=lambda n: (n.kind, n.key))
        return out

    def __len__(self) -> int:
        return len(self._nodes) + sum(len(fs) for fs in self._frames.values())

    def _node(self, k: Key) -> EvidenceNode | None:
        acc = self._acc.get(k)
        if acc is None or not acc.contrib:
            return None
        kind, key = k
        return EvidenceNode(node_id=EvidenceNode.make_id(self.cid, kind, key), conversation_id=self.cid,
                            user_id=self.uid, kind=kind, key=key,
                            text=acc.display(), record_ids=list(acc.ids))

    def _segment_frames(self, recs: list[MemoryRecord]) -> list[EvidenceNode]:
        cap, out = self.cfg.max_records_per_node, []
        for group in _event_frames(recs, self._turn_pos, self.cfg.event_frame_turn_gap):
            if len(group) < 2:
                continue
            first = group[0]
            key = f"frame:{first.segment_id}:{first.ordinal}"
            out.append(EvidenceNode(
                node_id=EvidenceNode.make_id(self.cid, "event_frame", key), conversation_id=self.cid,
                user_id=self.uid, kind="event_frame", key=key,
                text=" ".join(r.text for r in group)[: self.cfg.event_frame_text_chars],
                record_ids=[r.record_id for r in group][:cap]))
        return out


__all__ = ["NodeIndex", "record_keys"]
