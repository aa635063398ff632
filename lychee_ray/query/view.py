"""A loaded conversation prepared for querying: :class:`ConversationView` and :class:`TurnColumns`.

:class:`ConversationView` is a committed conversation as plain Python/NumPy columns, the FAISS
indexes, node key lookups and the BM25 indexes over record and turn texts (built once when the
conversation is loaded and cached with it, query/cache.py). Items are records (``id = record_id``),
raw turns (``id = turn_id``) or passages of long turns (``id = passage_id``, query/view_passages.py),
told apart by their ``kind``. Every record column is available by
name through :meth:`ConversationView.record_column` (a new record field needs nothing here). The
recall channels that search a view are in :mod:`lychee_ray.query.channels`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from lychee_ray.core.records import TimeSpan
from lychee_ray.core.tools import render_turn_text, tool_info_from_meta
from lychee_ray.io.store import ConversationData
from lychee_ray.query.bm25 import BM25Index, doc_terms
from lychee_ray.query.hits import ItemKind
from lychee_ray.query.pacing import PAUSE_EVERY_ROWS, Pause, paced
from lychee_ray.query.view_passages import PassageColumns, lexical_units
from lychee_ray.text.dates import iso_day
from lychee_ray.text.lexical import ATTRIBUTION_TERMS, lexical_terms

NO_DAY = 1 << 40  # "no date": farther than any slack


def day_ordinal(iso: str | None) -> int | None:
    """Day ordinal of an ISO date/time (None when undated)."""
    d = iso_day(iso)
    return d.toordinal() if d is not None else None


def table_columns(table: pa.Table, pause: Pause | None) -> dict[str, list]:
    """``table.to_pydict()``, converted a slice at a time with ``pause`` between slices."""
    if pause is None or table.num_rows <= PAUSE_EVERY_ROWS:
        return table.to_pydict()
    out: dict[str, list] = {name: [] for name in table.column_names}
    for start in range(0, table.num_rows, PAUSE_EVERY_ROWS):
        for name, values in table.slice(start, PAUSE_EVERY_ROWS).to_pydict().items():
            out[name].extend(values)
        pause()
    return out


def view_nbytes(data: ConversationData) -> int:
    """Approximate size of a view of ``data``: the store data plus the vectors kept as arrays
    (``data`` may hold only some tables: a lagging view's turns)."""
    rows = sum(data.tables[n].num_rows for n in ("records", "turns", "passages") if n in data.tables)
    return int(data.nbytes()) + 2 * 4 * data.dim * rows


def day_ordinals(values: Sequence[str | None]) -> np.ndarray:
    """Day ordinal of each ISO date/time (``NO_DAY`` when undated)."""
    return np.asarray([d if (d := day_ordinal(x)) is not None else NO_DAY for x in values], dtype=np.int64)


@dataclass
class TurnColumns:
    """What a view keeps per turn, derived from turn rows (``to_pydict`` form): one place for a
    view built whole (:meth:`ConversationView.from_data`) and one extended by appended turns
    (query/view_extend.py), so both derive the same values."""

    ids: list[str]
    text: list[str]
    speaker: list[str]
    role: list[str]
    tool: list[bool]  # tool traffic: a tool's result, or an assistant turn that only calls tools
    session: list[int]
    dates: list[str | None]  # the turn's time, else its session's
    segment: list[int]  # segment index (-1 = none)
    lines: list[str]  # "speaker: text", as the lexical channels index them
    tokens: list[list[str]]  # their BM25 terms (the same for both indexes; none for a turn with passages)
    terms: list[frozenset[str]]  # content terms for the selection's novelty rule (speaker included)
    said: np.ndarray  # day ordinal of each date

    @classmethod
    def of(cls, trn: dict[str, list], segment_of: dict[str, int], pause: Pause | None = None,
           split: frozenset[str] = frozenset()) -> TurnColumns:
        """``split``: turns searched by their passages (their own lexical terms are not needed)."""
        ids = [str(t) for t in trn["turn_id"]]
        # a turn's text with its tool calls rendered (agent logs), as embedded and encoded
        metas = trn.get("meta") or [None] * len(ids)
        infos = [tool_info_from_meta(m) for m in metas]
        text = [render_turn_text(str(c), info) for c, info in zip(trn["content"], infos, strict=False)]
        roles = [str(r) for r in trn["role"]]
        tool = [r == "tool" or (info is not None and bool(info.calls) and not str(c).strip())
                for r, c, info in zip(roles, trn["content"], infos, strict=False)]
        speaker = [str(s) for s in trn["speaker"]]
        dates = [ts or ss for ts, ss in zip(trn["timestamp"], trn["session_started_at"], strict=False)]
        lines = [f"{s}: {t}" for s, t in zip(speaker, text, strict=False)]
        return cls(ids=ids, text=text, speaker=speaker, role=roles, tool=tool,
                   session=list(trn["session_index"]), dates=dates,
                   segment=[segment_of.get(t, -1) for t in ids], lines=lines,
                   tokens=[[] if i in split else doc_terms(t) for i, t in paced(zip(ids, lines, strict=False), pause)],
                   terms=[frozenset(lexical_terms(f"{s} {t}")) - ATTRIBUTION_TERMS
                          for s, t in paced(zip(speaker, text, strict=False), pause)],
                   said=day_ordinals(dates))


def flat_vectors(index, n: int, dim: int, start: int = 0) -> np.ndarray:
    """``n`` vectors from row ``start`` of an ``IndexIDMap2(IndexFlatIP)`` whose ids are row positions."""
    import faiss  # as everywhere on the query path: loaded with the first view, not on import

    if n == 0:
        return np.zeros((0, dim), dtype=np.float32)
    flat = faiss.downcast_index(index.index)
    return np.ascontiguousarray(flat.reconstruct_n(start, n), dtype=np.float32)


@dataclass
class ConversationView:
    """A conversation prepared for querying (immutable after construction; shared by threads)."""

    conversation_id: str
    user_id: str
    committed_at: str | None
    dim: int
    # records, by row position (= FAISS id)
    record_ids: list[str]
    record_text: list[str]
    record_type: list[str]
    record_time: list[TimeSpan | None]
    record_span: list[tuple[int, int] | None]  # (start, end) day ordinals of the record's time
    record_session_date: list[str | None]  # created_at (session time of the source turns)
    record_sources: list[list[str]]
    record_vecs: np.ndarray
    record_index: object
    # turns, by row position (= FAISS id), in conversation order
    turn_ids: list[str]
    turn_text: list[str]
    turn_speaker: list[str]
    turn_role: list[str]
    turn_tool: list[bool]  # tool traffic (a tool result, a turn that only calls tools)
    turn_session: list[int]
    turn_session_date: list[str | None]
    turn_segment: list[int]  # index of the semantic segment each turn was encoded in (-1 = none)
    turn_vecs: np.ndarray
    turn_index: object
    # evidence nodes
    node_kind: list[str]
    node_key: list[str]
    node_records: list[np.ndarray]  # record positions per node
    node_index: object
    keys: dict[tuple[str, str], int]  # (kind, key) -> node position
    entities: dict[str, tuple[str, int]]  # entity key -> (display, linked records)
    topics: set[str]
    speakers: list[str]
    bm25: BM25Index
    turn_bm25: BM25Index  # raw turns only (channel f)
    rec_lo: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # content time, day ordinals
    rec_hi: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # (NO_DAY when undated)
    rec_said: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # session day of each record
    turn_said: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # session day of each turn
    record_pos: dict[str, int] = field(default_factory=dict)
    turn_pos: dict[str, int] = field(default_factory=dict)
    record_turns: list[list[int]] = field(default_factory=list)  # record -> its source turn positions
    turn_records: list[list[int]] = field(default_factory=list)  # turn -> records made from it
    # content terms for the selection's novelty rule (a turn's include its speaker; attribution words excluded)
    record_terms: list[frozenset[str]] = field(default_factory=list)
    turn_terms: list[frozenset[str]] = field(default_factory=list)
    nbytes: int = 0
    # derived per-conversation values computed on first use by later stages (e.g. serialised lines'
    # token counts); plain dict: concurrent writers only ever store equal values
    memo: dict = field(default_factory=dict)
    # the store data the view's turns come from: a newer commit that only added deltas is loaded on
    # top of it (io/store/reader.py load_generation), not read whole again
    source: ConversationData | None = None
    # the store data its records, nodes and segments come from: ``source`` itself, or an older
    # commit's while a rebuild runs in the background (query/cache.py; the view is then *lagging*)
    derived_from: ConversationData | None = None
    # what extending the view with appended turns needs (query/view_extend.py): each segmented
    # turn's segment index, and source turn ids records cite that are not (yet) stored turns
    segment_of: dict[str, int] = field(default_factory=dict)
    missing_sources: frozenset[str] = frozenset()
    # segments that are system prompts (agent logs): their turns and records are the agent's
    # instructions, context rather than memory (recall leaves them out unless a route asks for rules)
    context_segments: frozenset[int] = frozenset()
    # passages of long turns, by position (= FAISS id of their index); a turn with passages is
    # searched by them (turn position -> its passage positions)
    passages: PassageColumns = field(default_factory=PassageColumns)
    passage_vecs: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), np.float32))
    passage_index: object = None
    passage_pos: dict[str, int] = field(default_factory=dict)
    turn_passages: dict[int, list[int]] = field(default_factory=dict)

    def is_context_turn(self, pos: int) -> bool:
        """The turn is (part of) a system prompt."""
        return bool(self.context_segments) and self.turn_segment[pos] in self.context_segments

    def is_context_record(self, pos: int) -> bool:
        """The record was written from a system prompt (every turn it cites is one)."""
        src = self.record_turns[pos]
        return bool(self.context_segments) and bool(src) and all(self.is_context_turn(tp) for tp in src)

    def is_tool_traffic(self, pos: int) -> bool:
        """The turn is a tool's output or an assistant turn that only calls tools (agent logs)."""
        return self.turn_tool[pos]

    @classmethod
    def from_data(cls, data: ConversationData, bm25_k1: float = 1.2, bm25_b: float = 0.75,
                  committed_at: str | None = None, pause: Pause | None = None) -> ConversationView:
        """Build the view (columns, vectors, key maps, BM25) from a loaded store conversation.

        ``pause``: called every few hundred rows (a background rebuild lets searches run there)."""
        rec = table_columns(data.records, pause)
        trn = table_columns(data.turns, pause)
        nod = table_columns(data.nodes, pause)
        dim = data.dim
        n_rec, n_turn = len(rec["record_id"]), len(trn["turn_id"])
        times: list[TimeSpan | None] = []
        spans: list[tuple[int, int] | None] = []
        time_columns = zip(rec["time_start"], rec["time_end"], rec["time_granularity"], rec["time_expression"], strict=False)
        for s, e, g, x in paced(time_columns, pause):
            t = TimeSpan(start=s, end=e, granularity=g, expression=x) if (s or e) else None
            times.append(t)
            a, b = day_ordinal(s), day_ordinal(e)
            a, b = (a if a is not None else b), (b if b is not None else a)
            spans.append(None if a is None or b is None else (min(a, b), max(a, b)))
        seg_of: dict[str, int] = {}
        segment_turns = zip(data.segments.column("index").to_pylist(), data.segments.column("turn_ids").to_pylist(), strict=False)
        for idx, tids in paced(segment_turns, pause):
            for t in tids or []:
                seg_of[t] = int(idx)
        context = frozenset(int(i) for i, why in zip(data.segments.column("index").to_pylist(),
                                                     data.segments.column("close_reason").to_pylist(), strict=False)
                            if why == "system_prompt")
        pas_table = data.tables.get("passages")
        split = frozenset(pas_table.column("turn_id").to_pylist()) if pas_table is not None else frozenset()
        turn_cols = TurnColumns.of(trn, seg_of, pause, split)
        turn_pos = {t: i for i, t in enumerate(turn_cols.ids)}
        passage_cols = (PassageColumns.of(pas_table, turn_pos, turn_cols.text, turn_cols.speaker, pause) if pas_table is not None
                        else PassageColumns())
        turn_passages = passage_cols.by_turn()
        lex_kinds, lex_ids, lex_tokens = lexical_units(turn_cols.ids, turn_cols.tokens, passage_cols, turn_passages)
        record_pos = {r: i for i, r in enumerate(rec["record_id"])}
        record_turns = [[turn_pos[t] for t in (src or []) if t in turn_pos] for src in paced(rec["source_turn_ids"], pause)]
        missing = frozenset(t for src in rec["source_turn_ids"] for t in (src or []) if t not in turn_pos)
        turn_records: list[list[int]] = [[] for _ in range(n_turn)]
        for ri, positions in enumerate(record_turns):
            for pos in positions:
                turn_records[pos].append(ri)
        node_records = [np.asarray([record_pos[r] for r in (ids or []) if r in record_pos], dtype=np.int64)
                        for ids in paced(nod["record_ids"], pause)]
        keys = {(k, key): i for i, (k, key) in enumerate(zip(nod["kind"], nod["key"], strict=False))}
        entities = {key: (text, len(node_records[i]))
                    for i, (k, key, text) in enumerate(zip(nod["kind"], nod["key"], nod["text"], strict=False)) if k == "entity"}
        topics = {key for k, key in zip(nod["kind"], nod["key"], strict=False) if k == "topic"}
        rec_text = [str(t) for t in rec["text"]]
        rec_kind: ItemKind = "record"
        kinds: list[ItemKind] = [rec_kind] * n_rec + lex_kinds
        bm25 = BM25Index(
            None,
            kinds,
            list(rec["record_id"]) + lex_ids,
            bm25_k1, bm25_b,
            tokens=[doc_terms(t) for t in paced(rec_text, pause)] + lex_tokens, pause=pause,
        )
        turn_bm25 = BM25Index(None, lex_kinds, lex_ids, bm25_k1, bm25_b, tokens=lex_tokens, pause=pause)
        view = cls(
            conversation_id=data.conversation_id, user_id=data.user_id, committed_at=committed_at, dim=dim,
            record_ids=list(rec["record_id"]), record_text=rec_text, record_type=[str(t) for t in rec["type"]],
            record_time=times, record_span=spans, record_session_date=list(rec["created_at"]),
            record_sources=[list(s or []) for s in rec["source_turn_ids"]],
            record_vecs=flat_vectors(data.record_index, n_rec, dim), record_index=data.record_index,
            turn_ids=turn_cols.ids, turn_text=turn_cols.text, turn_speaker=turn_cols.speaker, turn_role=turn_cols.role,
            turn_tool=turn_cols.tool, turn_session=turn_cols.session,
            turn_session_date=turn_cols.dates, turn_segment=turn_cols.segment,
            turn_vecs=flat_vectors(data.turn_index, n_turn, dim), turn_index=data.turn_index,
            node_kind=list(nod["kind"]), node_key=list(nod["key"]), node_records=node_records, node_index=data.node_index,
            keys=keys, entities=entities, topics=topics, speakers=list(dict.fromkeys(turn_cols.speaker)), bm25=bm25,
            turn_bm25=turn_bm25,
            record_pos=record_pos, turn_pos=turn_pos, record_turns=record_turns, turn_records=turn_records,
            record_terms=[frozenset(lexical_terms(t)) - ATTRIBUTION_TERMS for t in paced(rec_text, pause)],
            turn_terms=turn_cols.terms,
        )
        view.rec_lo = np.asarray([sp[0] if sp else NO_DAY for sp in spans], dtype=np.int64)
        view.rec_hi = np.asarray([sp[1] if sp else NO_DAY for sp in spans], dtype=np.int64)
        view.rec_said = day_ordinals(view.record_session_date)
        view.turn_said = turn_cols.said
        view.nbytes = view_nbytes(data)
        view.source = view.derived_from = data
        view.segment_of = seg_of
        view.missing_sources = missing
        view.context_segments = context
        view.passages, view.turn_passages = passage_cols, turn_passages
        view.passage_pos = {p: i for i, p in enumerate(passage_cols.ids)}
        pas_index = data.indexes.get("passages")
        if pas_index is not None and len(passage_cols):
            view.passage_index = pas_index
            view.passage_vecs = flat_vectors(pas_index, len(passage_cols), dim)
        return view

    @property
    def lagging(self) -> bool:
        """True while its records, nodes and segments are an older commit's than its turns."""
        return self.derived_from is not self.source

    def record_column(self, name: str) -> list:
        """Any :data:`~lychee_ray.core.records.RECORD_SCHEMA` column by name, as a plain list by
        record position: the generic way query code reads a record field (the ``record_*`` fields
        above are the ones the recall path reads on every query, prepared when the view is built).
        Converted from the records table on first use and kept in :attr:`memo` (per-query code then
        indexes a list); KeyError for a column the records table lacks."""
        key = ("record_column", name)
        col = self.memo.get(key)
        if col is None:
            assert self.derived_from is not None, "a view built by from_data"
            col = self.memo[key] = self.derived_from.records.column(name).to_pylist()
        return col

    @property
    def num_records(self) -> int:
        return len(self.record_ids)

    @property
    def num_turns(self) -> int:
        return len(self.turn_ids)

    @property
    def num_passages(self) -> int:
        return len(self.passages)

    def vector(self, kind: ItemKind, pos: int) -> np.ndarray:
        if kind == "record":
            return self.record_vecs[pos]
        return self.passage_vecs[pos] if kind == "passage" else self.turn_vecs[pos]

    def passage_turn(self, pos: int) -> int:
        """The turn position of passage ``pos``."""
        return self.passages.turn[pos]


__all__ = ["NO_DAY", "ConversationView", "TurnColumns", "day_ordinal", "day_ordinals", "flat_vectors", "table_columns",
           "view_nbytes"]
