"""``lychee-ray eval``: build memory, answer every benchmark question, judge, report (DESIGN §5).

One run directory holds everything and every step resumes::

    RUN_DIR/input/<hash>.jsonl          the selected conversations (canonical JSONL the build reads)
    RUN_DIR/stores/<build key>/         memory stores, one per distinct build (variants share them)
    RUN_DIR/answers/<variant>/*.parquet finished answers, appended in parts (the resume unit)
    RUN_DIR/costs/<build key>.json      offline construction-token estimates (rules backend)
    RUN_DIR/state.json                  build and query wall times, store locations
    RUN_DIR/results.json                metrics and costs per variant and category
    RUN_DIR/answers.parquet             one row per (variant, question): answer, evidence, tokens, verdict
    RUN_DIR/report.md + *.png           the report (lychee_ray.report)

Steps:

1. **Questions.** LoCoMo: categories ``eval.locomo_categories`` (the paper's 1,540 questions);
   LongMemEval: every instance's question (six types; ``*_abs`` = abstention). ``--conversations``
   picks the first N conversations or named ids, ``--limit`` the first N questions per conversation.
2. **Stores.** For each distinct build (see :mod:`lychee_ray.variants`) a store whose commit markers
   carry the expected fingerprint for every selected conversation is reused — the run's own
   ``stores/<key>`` or any ``--reuse-store`` directory; otherwise the Ray build job
   (:func:`~lychee_ray.ray_build.run_ray_build`) builds the missing conversations into
   ``stores/<key>`` (finished ones are skipped, so an interrupted build resumes).
3. **Answers.** One Ray Data pipeline per variant over its unanswered questions:
   ``map_batches(QuestionWorker, compute=ActorPoolStrategy, num_cpus=eval.actor_num_cpus)``. Each
   actor opens its :class:`~lychee_ray.query.MemoryStore` once and answers
   ``eval.questions_in_flight`` questions at a time; with the ``openai`` backend every plan / answer /
   judge call goes through the one cluster-wide :class:`~lychee_ray.ray_build.RateLimiterActor`.
   Rows stream back and are appended to ``answers/<variant>/`` every ``eval.flush_every`` questions;
   a re-run skips question ids already answered with the same variant key (configuration, store
   fingerprint, backend, judge model) and redoes failed ones.
4. **Judge** (``openai`` only, :mod:`lychee_ray.judge`): CORRECT/WRONG per answer, ``stage="judge"``,
   tokens counted apart. With ``rules`` no judge runs and ``judge_accuracy`` is null.
5. **Metrics and costs** (:func:`aggregate`): evidence recall (LongMemEval: answer-session recall),
   token F1 and BLEU-1 (:mod:`lychee_ray.metrics`), judge accuracy, per category; construction tokens
   per conversation (store usage tables; for ``rules`` the offline count of the encode prompts the
   ``openai`` encoder would send for the same segments, marked estimated), query tokens per
   question (plan + answer, prompt + completion), LLM calls, wall time, store bytes, index build time.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterable

import pyarrow as pa
import pyarrow.parquet as pq

from .adapters import read_input
from .config import LycheeConfig
from .llm.backend import resolve_backend
from .metrics import bleu1, evidence_recall, is_abstention, mean, session_recall, token_f1
from .models import Conversation, QAItem
from .store import conversation_key, iter_markers, read_part
from .variants import (
    Variant,
    build_config,
    build_key,
    expected_fingerprint,
    fixed_window_for,
    query_config,
    variant_key,
)

log = logging.getLogger(__name__)

DATASETS = ("locomo", "longmemeval")
LOCOMO_CATEGORY_NAMES = {"1": "multi-hop", "2": "temporal", "3": "open-domain", "4": "single-hop", "5": "adversarial"}
LONGMEMEVAL_TYPES = ("single-session-user", "single-session-assistant", "single-session-preference", "multi-session",
                     "temporal-reasoning", "knowledge-update")

ANSWER_SCHEMA = pa.schema([
    pa.field("variant", pa.string()),
    pa.field("variant_key", pa.string()),
    pa.field("question_id", pa.string()),
    pa.field("conversation_id", pa.string()),
    pa.field("category", pa.string()),
    pa.field("question", pa.string()),
    pa.field("gold", pa.string()),
    pa.field("answer", pa.string()),
    pa.field("answer_error", pa.string()),
    pa.field("abstention", pa.bool_()),
    pa.field("evidence_ids", pa.list_(pa.string())),
    pa.field("evidence_turn_ids", pa.list_(pa.string())),
    pa.field("context_tokens", pa.int64()),
    pa.field("context_truncated", pa.bool_()),
    pa.field("plan_prompt_tokens", pa.int64()),
    pa.field("plan_completion_tokens", pa.int64()),
    pa.field("answer_prompt_tokens", pa.int64()),
    pa.field("answer_completion_tokens", pa.int64()),
    pa.field("query_tokens", pa.int64()),
    pa.field("llm_calls", pa.int64()),
    pa.field("tokens_estimated", pa.bool_()),
    pa.field("plan_fallback", pa.bool_()),
    pa.field("judge_verdict", pa.string()),
    pa.field("judge_reason", pa.string()),
    pa.field("judge_prompt_tokens", pa.int64()),
    pa.field("judge_completion_tokens", pa.int64()),
    pa.field("judge_calls", pa.int64()),
    pa.field("judge_error", pa.string()),
    pa.field("latency_ms", pa.float64()),
    pa.field("answered_at", pa.float64()),
])


class EvalError(RuntimeError):
    """The evaluation cannot run (bad data path, nothing to evaluate, ...)."""


# ------------------------------------------------------------------------------------------------
# 1. questions
# ------------------------------------------------------------------------------------------------


@dataclass
class Dataset:
    name: str
    conversations: list[Conversation]
    questions: list[QAItem]

    def turn_sessions(self) -> dict[str, dict[str, str]]:
        """conversation id → turn id → session id."""
        return {c.conversation_id: {t.turn_id: s.session_id for _, s, _, t in c.iter_turns()} for c in self.conversations}


def select_conversations(all_ids: list[str], spec: str | int | None) -> list[str]:
    """``None`` = all; ``N`` = the first N; ``ID,ID`` = those ids (an unknown id is an error)."""
    if spec is None or spec == "":
        return list(all_ids)
    s = str(spec).strip()
    if s.isdigit():
        return list(all_ids[: int(s)])
    wanted = [x.strip() for x in s.split(",") if x.strip()]
    missing = [x for x in wanted if x not in all_ids]
    if missing:
        raise EvalError(f"unknown conversation id(s): {', '.join(missing)} (known: {', '.join(all_ids[:12])}...)")
    return wanted


def load_dataset(dataset: str, data: str | Path, cfg: LycheeConfig, conversations: str | int | None = None,
                 limit: int | None = None) -> Dataset:
    """The selected conversations and their questions (LoCoMo: ``eval.locomo_categories`` only)."""
    if dataset not in DATASETS:
        raise EvalError(f"unknown dataset {dataset!r}; expected one of {DATASETS}")
    if not Path(data).exists():
        raise EvalError(f"data not found: {data}")
    convs: dict[str, Conversation] = {}
    qas: dict[str, list[QAItem]] = {}
    for item in read_input(dataset, data):
        for issue in item.issues:  # adapter warnings (e.g. repaired / dropped gold evidence ids)
            log.log(logging.WARNING if issue.level == "error" else logging.INFO, "%s: %s", item.where, issue.message)
        if item.conversation is None:
            continue
        cid = item.conversation.conversation_id
        convs[cid] = item.conversation
        qas.setdefault(cid, []).extend(item.qa)
    ids = select_conversations(list(convs), conversations)
    cats = set(cfg.eval.locomo_categories) if dataset == "locomo" else None
    questions: list[QAItem] = []
    for cid in ids:
        qs = [q for q in qas.get(cid, []) if cats is None or q.category in cats]
        questions.extend(qs[:limit] if limit else qs)
    if not questions:
        raise EvalError("no questions selected")
    return Dataset(dataset, [convs[c] for c in ids], questions)


def category_name(dataset: str, category: str) -> str:
    return LOCOMO_CATEGORY_NAMES.get(category, category) if dataset == "locomo" else category


def question_payload(q: QAItem) -> dict[str, Any]:
    return {"question_id": q.question_id, "conversation_id": q.conversation_id, "question": q.question,
            "answer": q.answer, "category": q.category, "question_date": q.question_date,
            "abstention": bool(q.meta.get("abstention")) or q.question_id.endswith("_abs")}


def write_subset(ds: Dataset, run_dir: Path) -> Path:
    """The selected conversations as canonical JSONL (what the build job reads); written once."""
    lines = [c.model_dump_json() for c in ds.conversations]
    digest = hashlib.sha256("\n".join(lines).encode()).hexdigest()[:12]
    path = run_dir / "input" / f"{ds.name}-{len(lines)}-{digest}.jsonl"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
        os.replace(tmp, path)
    return path


# ------------------------------------------------------------------------------------------------
# run state (wall times, store locations) — small JSON, rewritten atomically
# ------------------------------------------------------------------------------------------------


class RunState:
    def __init__(self, run_dir: Path) -> None:
        self.path = run_dir / "state.json"
        self.data: dict[str, Any] = {"stores": {}, "variants": {}}
        if self.path.exists():
            try:
                self.data = json.loads(self.path.read_text(encoding="utf-8"))
            except json.JSONDecodeError:
                log.warning("unreadable %s; starting a fresh state", self.path)
        self.data.setdefault("stores", {})
        self.data.setdefault("variants", {})
        self._lock = threading.Lock()

    def save(self) -> None:
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_name(f".state.{uuid.uuid4().hex}.tmp")
            tmp.write_text(json.dumps(self.data, indent=1, sort_keys=True), encoding="utf-8")
            os.replace(tmp, self.path)

    def store(self, key: str) -> dict[str, Any]:
        return self.data["stores"].setdefault(key, {})

    def variant(self, name: str, key: str) -> dict[str, Any]:
        v = self.data["variants"].get(name)
        if v is None or v.get("key") != key:  # another configuration: its timings do not apply
            v = self.data["variants"][name] = {"key": key, "query_wall_s": 0.0}
        return v


# ------------------------------------------------------------------------------------------------
# 2. stores
# ------------------------------------------------------------------------------------------------


@dataclass
class StoreInfo:
    key: str
    label: str
    backend: str
    cfg: LycheeConfig
    fingerprint: str
    path: Path | None = None
    reused_from: str | None = None
    built_now: bool = False
    build_wall_s: float = 0.0  # this run's build wall time
    build_wall_s_total: float = 0.0  # all runs' build wall time of this run's own store (state.json)
    failed: list[str] = field(default_factory=list)


def store_has(path: Path, conversation_ids: Iterable[str], fingerprint: str) -> bool:
    """Every conversation is committed in ``path`` with ``fingerprint``."""
    commits = path / "commits"
    if not commits.is_dir():
        return False
    for cid in conversation_ids:
        try:
            m = json.loads((commits / f"{conversation_key(cid)}.json").read_text(encoding="utf-8"))
        except (FileNotFoundError, json.JSONDecodeError):
            return False
        if m.get("fingerprint") != fingerprint:
            return False
    return True


def markers_for(path: Path, conversation_ids: Iterable[str]) -> dict[str, dict[str, Any]]:
    wanted = set(conversation_ids)
    return {m["conversation_id"]: m for m in iter_markers(path) if m["conversation_id"] in wanted}


def ensure_store(info: StoreInfo, ds: Dataset, input_path: Path, run_dir: Path, state: RunState,
                 reuse: list[Path], progress: bool = True) -> StoreInfo:
    """Find a matching store or build the missing conversations with the Ray job."""
    cids = [c.conversation_id for c in ds.conversations]
    own = run_dir / "stores" / info.key
    for cand in [own, *reuse]:
        if store_has(cand, cids, info.fingerprint):
            info.path = cand
            info.reused_from = None if cand == own else str(cand)
            st = state.store(info.key)
            st.update({"path": str(cand), "fingerprint": info.fingerprint, "reused_from": info.reused_from})
            state.save()
            log.info("store %s: reusing %s (fingerprint %s matches for %d conversation(s))", info.key, cand,
                     info.fingerprint, len(cids))
            return info
    from .ray_build import run_ray_build

    log.info("store %s: building %d conversation(s) with the Ray job (%s backend) into %s", info.key, len(cids),
             info.backend, own)
    t0 = time.perf_counter()
    summary = run_ray_build(info.cfg, "jsonl", input_path, own, backend=info.backend, progress=progress)
    wall = time.perf_counter() - t0
    info.path, info.built_now = own, True
    info.failed = [e.get("conversation_id") or "?" for e in summary.errors]
    if summary.failed:
        log.warning("store %s: %d conversation(s) failed to build: %s", info.key, summary.failed, info.failed[:5])
    st = state.store(info.key)
    st["build_wall_s"] = round(float(st.get("build_wall_s", 0.0)) + wall, 3)
    st.update({"path": str(own), "fingerprint": info.fingerprint, "reused_from": None,
               "last_build": {"built": summary.built, "skipped": summary.skipped, "failed": summary.failed}})
    state.save()
    info.build_wall_s = wall
    return info


def turns_per_exchange(ds: Dataset, cfg: LycheeConfig) -> float:
    """Mean turns per segmenter exchange for ``segmenter.exchange_mode`` on these conversations."""
    from .segment import resolve_exchange_mode

    turns = users = 0
    modes = set()
    for c in ds.conversations:
        roles = [t.role for *_, t in c.iter_turns()]
        modes.add(resolve_exchange_mode(cfg.segmenter.exchange_mode, roles))
        turns += len(roles)
        users += sum(r == "user" for r in roles)
    if modes == {"turn"}:
        return 1.0
    if modes == {"pair"}:
        return 2.0
    return turns / max(1, users)


def mean_turns_per_segment(path: Path, conversation_ids: Iterable[str]) -> float | None:
    ms = markers_for(path, conversation_ids).values()
    turns = sum(m.get("counts", {}).get("turns", 0) for m in ms)
    segs = sum(m.get("counts", {}).get("segments", 0) for m in ms)
    return turns / segs if segs else None


# ------------------------------------------------------------------------------------------------
# construction costs
# ------------------------------------------------------------------------------------------------


def _usage_totals(path: Path, marker: dict[str, Any]) -> dict[str, Any]:
    """Encode-stage tokens of one conversation from the store's usage table (marker tokens as fallback)."""
    out = {"prompt_tokens": 0, "completion_tokens": 0, "cached_tokens": 0, "calls": 0, "estimated": False}
    try:
        t = read_part(path, "usage", marker)
        rows = [r for r in t.to_pylist() if r.get("stage") == "encode"]
        for r in rows:
            out["prompt_tokens"] += int(r["prompt_tokens"])
            out["completion_tokens"] += int(r["completion_tokens"])
            out["cached_tokens"] += int(r["cached_tokens"])
            out["estimated"] = out["estimated"] or bool(r["estimated"])
        out["calls"] = len(rows)
        return out
    except (FileNotFoundError, OSError, KeyError, pa.ArrowInvalid):
        tok = (marker.get("tokens") or {}).get("encode") or {}
        for k in ("prompt_tokens", "completion_tokens", "cached_tokens", "calls"):
            out[k] = int(tok.get(k, 0))
        return out


def estimate_encode_tokens(conv: Conversation, records: pa.Table, segments: pa.Table, cfg: LycheeConfig) -> dict[str, Any]:
    """Offline count of what the ``openai`` encoder would spend on these segments.

    Prompt: the exact encode messages (:func:`~lychee_ray.encode_openai.build_messages`) with the
    segment's turns and the reference context built from the stored records, plus the output JSON
    schema (providers bill it). Completion: the stored records serialised as the encoder's JSON.
    """
    from .encode import EncodeOutput, EncodeRequest, SegmentTurn
    from .encode_openai import build_messages
    from .llm.client import schema_for
    from .tokens import count_message_tokens, count_tokens

    enc = cfg.tokenizer.encoding
    schema_tokens = count_tokens(json.dumps(schema_for(EncodeOutput)[0]), enc)
    where = {t.turn_id: (s, t) for _, s, _, t in conv.iter_turns()}
    speakers = list(dict.fromkeys(t.speaker for *_, t in conv.iter_turns()))
    by_seg: dict[str, list[dict[str, Any]]] = {}
    for r in sorted(records.to_pylist(), key=lambda r: (r["segment_id"], r["ordinal"])):
        by_seg.setdefault(r["segment_id"], []).append(r)
    prompt = completion = calls = 0
    prev_records: list[str] = []
    state = ""
    for seg in sorted(segments.to_pylist(), key=lambda s: s["index"]):
        turns = []
        for i, tid in enumerate(seg["turn_ids"] or []):
            if tid not in where:
                continue
            s, t = where[tid]
            turns.append(SegmentTurn(index=i, turn_id=tid, session_id=s.session_id, session_date=t.timestamp or s.started_at,
                                     speaker=t.speaker, role=t.role, content=t.content))
        if not turns:
            continue
        req = EncodeRequest(conversation_id=conv.conversation_id, user_id=conv.user_id, segment_id=seg["segment_id"],
                            segment_index=seg["index"], turns=turns, speakers=speakers, prev_resolution_state=state,
                            prev_records=prev_records[-cfg.encoder.context_records:] if cfg.encoder.context_records else [])
        prompt += count_message_tokens(build_messages(req, cfg.encoder, cfg.tokenizer), enc) + schema_tokens
        recs = by_seg.get(seg["segment_id"], [])
        local = {tid: i for i, tid in enumerate(seg["turn_ids"] or [])}
        out = {"records": [{"type": r["type"], "text": r["text"], "entities": r["entities"] or [], "topics": r["topics"] or [],
                            "time": ({"start": r["time_start"], "end": r["time_end"], "expression": r["time_expression"]}
                                     if r["time_start"] else None),
                            "source_turns": [local[t] for t in (r["source_turn_ids"] or []) if t in local]} for r in recs],
               "resolution_state": seg.get("resolution_state") or ""}
        completion += count_tokens(json.dumps(out, ensure_ascii=False), enc)
        calls += 1
        prev_records.extend(r["text"] for r in recs)
        state = seg.get("resolution_state") or state
    return {"prompt_tokens": prompt, "completion_tokens": completion, "cached_tokens": 0, "calls": calls, "estimated": True}


def construction_costs(info: StoreInfo, ds: Dataset, run_dir: Path) -> dict[str, dict[str, Any]]:
    """Per conversation: encode tokens/calls, timings, store bytes (rules: estimated tokens, cached)."""
    assert info.path is not None
    cids = [c.conversation_id for c in ds.conversations]
    markers = markers_for(info.path, cids)
    cache_path = run_dir / "costs" / f"{info.key}.json"
    cache: dict[str, Any] = {}
    if info.backend == "rules" and cache_path.exists():
        try:
            cache = json.loads(cache_path.read_text(encoding="utf-8"))
        except json.JSONDecodeError:
            cache = {}
    convs = {c.conversation_id: c for c in ds.conversations}
    out: dict[str, dict[str, Any]] = {}
    dirty = False
    for cid, m in markers.items():
        if info.backend == "rules":
            c = cache.get(cid)
            if c is None or c.get("committed_at") != m.get("committed_at"):
                tok = estimate_encode_tokens(convs[cid], read_part(info.path, "records", m), read_part(info.path, "segments", m),
                                             info.cfg)
                c = cache[cid] = {**tok, "committed_at": m.get("committed_at")}
                dirty = True
            tok = {k: v for k, v in c.items() if k != "committed_at"}
            tok["real_calls"] = 0
        else:
            tok = _usage_totals(info.path, m)
            tok["real_calls"] = tok["calls"]
        timings = m.get("timings_s") or {}
        out[cid] = {
            **tok,
            "segments": int(m.get("counts", {}).get("segments", 0)),
            "records": int(m.get("counts", {}).get("records", 0)),
            "turns": int(m.get("counts", {}).get("turns", 0)),
            "build_s": round(sum(float(timings.get(k, 0.0)) for k in ("segment", "encode", "index")), 4),
            "timings_s": {k: timings.get(k) for k in ("segment", "encode", "index")},
            "store_bytes": conversation_bytes(info.path, m),
            "turns_bytes": conversation_bytes(info.path, m, tables=("turns",), indexes=("turns",)),
        }
    if dirty:
        cache_path.parent.mkdir(parents=True, exist_ok=True)
        cache_path.write_text(json.dumps(cache, indent=1), encoding="utf-8")
    return out


def conversation_bytes(root: Path, marker: dict[str, Any], tables: Iterable[str] = ("records", "nodes", "turns", "segments", "usage"),
                       indexes: Iterable[str] | None = None) -> int:
    """On-disk bytes of one conversation: its Parquet parts (compressed row groups when compacted) + index files."""
    total = 0
    loc = marker.get("location") or {}
    for t in tables:
        if t in loc:
            try:
                rg = pq.ParquetFile(root / t / loc[t]["file"]).metadata.row_group(loc[t]["row_group"])
                total += sum(rg.column(i).total_compressed_size for i in range(rg.num_columns))
            except (OSError, IndexError):
                pass
        else:
            p = root / t / f"{marker['key']}.parquet"
            total += p.stat().st_size if p.exists() else 0
    idx = root / "index" / marker["key"]
    if idx.is_dir():
        for f in idx.iterdir():
            if indexes is None or f.stem in indexes:
                total += f.stat().st_size
    return total


# ------------------------------------------------------------------------------------------------
# 3. answering (plain Python; the Ray actor below wraps it)
# ------------------------------------------------------------------------------------------------


class QuestionAnswerer:
    """Answers (and judges) questions for one variant against one store. Thread-safe."""

    def __init__(self, spec: dict[str, Any], limiter: Any = None, *, embedder: Any = None, llm_client: Any = None,
                 judge_client: Any = None) -> None:
        from .query import MemoryStore

        self.spec = spec
        self.cfg = LycheeConfig.model_validate_json(spec["cfg_json"])
        self.backend: str = spec["backend"]
        self.kind: str = spec["kind"]
        self.variant: str = spec["variant"]
        self.key: str = spec["variant_key"]
        self.encoding = self.cfg.tokenizer.encoding
        ray_limiter = None
        if limiter is not None:
            from .ray_build import RayRateLimiter

            ray_limiter = RayRateLimiter(limiter)
        client = llm_client
        if self.backend == "openai" and client is None:
            from .llm.backend import make_llm_client

            client = make_llm_client(self.cfg, limiter=ray_limiter)
        self.client = client
        self.store = MemoryStore(spec["store"], self.cfg, embedder=embedder, llm=self.backend, llm_client=client)
        self.judge = None
        if spec.get("judge_cfg_json"):
            from .judge import LLMJudge
            from .llm.backend import make_llm_client

            jcfg = LycheeConfig.model_validate_json(spec["judge_cfg_json"])
            jc = judge_client or make_llm_client(jcfg, limiter=ray_limiter)
            self.judge = LLMJudge(jc, jcfg.eval.judge_max_completion_tokens, self.encoding)
        self._naive: dict[str, Any] = {}
        self._lock = threading.Lock()

    def close(self) -> None:
        self.store.close()

    # -- per-conversation helpers ------------------------------------------------------------------
    def _units(self, cid: str):
        """All turns of a conversation as one-turn evidence units (NaiveTurnRAG builds them once)."""
        from .retrieval_eval import NaiveTurnRAG

        with self._lock:
            n = self._naive.get(cid)
        if n is None:
            n = NaiveTurnRAG(self.store.view(cid), self.cfg.query.select.show_source_ids, self.encoding)
            with self._lock:
                self._naive[cid] = n
        return n

    def _question_date(self, q: dict[str, Any], cid: str):
        from .plan import as_datetime
        from .retrieval_eval import last_session_date

        return as_datetime(q["question_date"]) if q.get("question_date") else last_session_date(self.store.view(cid))

    # -- one question --------------------------------------------------------------------------------
    def answer(self, q: dict[str, Any]) -> dict[str, Any]:
        t0 = time.perf_counter()
        cid = q["conversation_id"]
        row: dict[str, Any] = {
            "variant": self.variant, "variant_key": self.key, "question_id": q["question_id"], "conversation_id": cid,
            "category": q["category"], "question": q["question"], "gold": q["answer"], "answer": "",
            "answer_error": None, "abstention": bool(q.get("abstention")), "evidence_ids": [], "evidence_turn_ids": [],
            "context_tokens": 0, "context_truncated": False, "plan_prompt_tokens": 0, "plan_completion_tokens": 0,
            "answer_prompt_tokens": 0, "answer_completion_tokens": 0, "query_tokens": 0, "llm_calls": 0,
            "tokens_estimated": self.backend != "openai", "plan_fallback": False, "judge_verdict": None, "judge_reason": None,
            "judge_prompt_tokens": 0, "judge_completion_tokens": 0, "judge_calls": 0, "judge_error": None,
        }
        try:
            if self.kind == "memory":
                self._memory(q, row)
            else:
                self._turns(q, row)
        except Exception as e:  # noqa: BLE001 — one failed question is recorded (and redone on resume), never fatal
            log.exception("question %s (%s) failed", q["question_id"], self.variant)
            row["answer_error"] = f"{type(e).__name__}: {e}"
        row["query_tokens"] = (row["plan_prompt_tokens"] + row["plan_completion_tokens"] + row["answer_prompt_tokens"]
                               + row["answer_completion_tokens"])
        if self.judge is not None and row["answer_error"] is None:
            j = self.judge.judge(q["question"], q["answer"], row["answer"], question_id=q["question_id"],
                                 abstention=row["abstention"], category=q["category"])
            row.update(judge_verdict=j.verdict, judge_reason=j.reason, judge_prompt_tokens=j.prompt_tokens,
                       judge_completion_tokens=j.completion_tokens, judge_calls=j.calls, judge_error=j.error)
        row["latency_ms"] = round((time.perf_counter() - t0) * 1000.0, 3)
        row["answered_at"] = time.time()
        return row

    def _memory(self, q: dict[str, Any], row: dict[str, Any]) -> None:
        cid = q["conversation_id"]
        res = self.store.query(cid, q["question"], self._question_date(q, cid), question_id=q["question_id"])
        u = res.usage
        row.update(
            answer=res.answer, answer_error=res.answer_error, evidence_ids=[e.id for e in res.evidence],
            evidence_turn_ids=sorted({t for e in res.evidence for t in e.source_turn_ids}), context_tokens=u.context_tokens,
            plan_prompt_tokens=u.plan_prompt_tokens, plan_completion_tokens=u.plan_completion_tokens,
            answer_prompt_tokens=u.answer_prompt_tokens, answer_completion_tokens=u.answer_completion_tokens,
            llm_calls=u.llm_calls, tokens_estimated=u.estimated, plan_fallback=bool(res.plan.fallback),
        )

    def _turns(self, q: dict[str, Any], row: dict[str, Any]) -> None:
        """naive_rag (top turns by cosine) and full_context (all turns that fit)."""
        import numpy as np

        from .answer import make_answerer
        from .select import render
        from .tokens import count_tokens

        cid = q["conversation_id"]
        naive = self._units(cid)
        qd = self._question_date(q, cid)
        if self.kind == "naive_rag":
            qvec = np.asarray(self.store.embedder.encode([q["question"]]), dtype=np.float32)[0]
            ids, context, tokens = naive.select(qvec, self.cfg.query.select.budget_tokens)
            pos = naive.view.turn_pos
            units = [naive.units[pos[t]] for t in ids]
            truncated = False
        else:
            limit = self.cfg.eval.full_context_max_tokens
            units, used, groups = [], 0, set()
            for u in reversed(naive.units):  # newest first: a conversation that does not fit keeps its latest turns
                cost = u.tokens + 1 + (0 if u.group in groups else naive.header_tokens[u.group] + 1)
                if used + cost > limit:
                    break
                units.append(u)
                groups.add(u.group)
                used += cost
            units.reverse()
            context = render(units, False)
            tokens = count_tokens(context, self.encoding)
            while tokens > limit and units:
                units.pop(0)
                context = render(units, False)
                tokens = count_tokens(context, self.encoding)
            truncated = len(units) < len(naive.units)
        client = self.client if self.backend == "openai" else None
        answerer = make_answerer(self.backend, self.cfg.query.answer, client, self.encoding)
        out = answerer.answer(q["question"], qd, units, context, question_id=q["question_id"])
        row.update(
            answer=out.answer, answer_error=out.error, evidence_ids=[u.id for u in units] if self.kind == "naive_rag" else [],
            evidence_turn_ids=[u.id for u in units], context_tokens=tokens, context_truncated=truncated,
            answer_prompt_tokens=out.prompt_tokens, answer_completion_tokens=out.completion_tokens, llm_calls=out.calls,
            tokens_estimated=out.estimated,
        )


class QuestionWorker:
    """Ray Data actor: one :class:`QuestionAnswerer` per actor; answers a batch with a thread pool."""

    def __init__(self, spec_json: str, limiter: Any = None) -> None:
        from .cli import configure_logging

        configure_logging()
        spec = json.loads(spec_json)
        self.answerer = QuestionAnswerer(spec, limiter)
        self.pool = ThreadPoolExecutor(max_workers=max(1, int(spec.get("in_flight", 1))), thread_name_prefix="lychee-eval")

    def __call__(self, batch: dict[str, Any]) -> dict[str, list[str]]:
        qs = [json.loads(str(x)) for x in batch["q"]]
        rows = list(self.pool.map(self.answerer.answer, qs))
        return {"result": [json.dumps(r) for r in rows]}


# ------------------------------------------------------------------------------------------------
# answer parts (resume)
# ------------------------------------------------------------------------------------------------


def answers_dir(run_dir: Path, variant: str) -> Path:
    return run_dir / "answers" / variant


def write_part(run_dir: Path, variant: str, rows: list[dict[str, Any]]) -> Path | None:
    if not rows:
        return None
    d = answers_dir(run_dir, variant)
    d.mkdir(parents=True, exist_ok=True)
    name = f"part-{int(time.time() * 1000)}-{uuid.uuid4().hex[:8]}.parquet"
    tmp = d / f".{name}.tmp"
    pq.write_table(pa.Table.from_pylist([{k: r.get(k) for k in ANSWER_SCHEMA.names} for r in rows], schema=ANSWER_SCHEMA), tmp)
    os.replace(tmp, d / name)
    return d / name


def done_ok(row: dict[str, Any], judged: bool) -> bool:
    """A finished answer that a re-run keeps (failed answers and failed verdicts are redone)."""
    if row.get("answer_error"):
        return False
    if judged and (row.get("judge_verdict") is None):
        return False
    return True


def load_answers(run_dir: Path, variant: str, key: str | None = None) -> dict[str, dict[str, Any]]:
    """Latest row per question id for ``variant`` (only rows with variant key ``key`` when given)."""
    d = answers_dir(run_dir, variant)
    rows: dict[str, dict[str, Any]] = {}
    if not d.is_dir():
        return rows
    for f in sorted(d.glob("part-*.parquet")):
        try:
            t = pq.read_table(f)
        except (OSError, pa.ArrowInvalid) as e:
            log.warning("skipping unreadable answer part %s: %s", f, e)
            continue
        for r in t.to_pylist():
            if key is not None and r.get("variant_key") != key:
                continue
            prev = rows.get(r["question_id"])
            if prev is None or (r.get("answered_at") or 0) >= (prev.get("answered_at") or 0):
                rows[r["question_id"]] = r
    return rows


# ------------------------------------------------------------------------------------------------
# the Ray Data question pipeline
# ------------------------------------------------------------------------------------------------


def answer_questions_ray(spec: dict[str, Any], questions: list[dict[str, Any]], cfg: LycheeConfig, run_dir: Path,
                         limiter: Any = None, progress: Callable[[int, int], None] | None = None) -> int:
    """Answer ``questions`` on Ray Data, appending finished rows to ``answers/<variant>/``; returns rows written."""
    import ray

    if not questions:
        return 0
    ec = cfg.eval
    rows = [{"q": json.dumps(q)} for q in questions]
    ds = ray.data.from_items(rows, override_num_blocks=max(1, min(len(rows) // ec.batch_size + 1, 64)))
    ds = ds.map_batches(
        QuestionWorker,
        batch_size=ec.batch_size,
        fn_constructor_kwargs={"spec_json": json.dumps(spec), "limiter": limiter},
        compute=ray.data.ActorPoolStrategy(min_size=ec.min_actors, max_size=max(ec.min_actors, ec.max_actors)),
        num_cpus=ec.actor_num_cpus,
    )
    buf: list[dict[str, Any]] = []
    written = 0
    for out in ds.iter_rows():
        buf.append(json.loads(out["result"]))
        if len(buf) >= ec.flush_every:
            write_part(run_dir, spec["variant"], buf)
            written += len(buf)
            buf = []
        if progress is not None:
            progress(written + len(buf), len(questions))
    write_part(run_dir, spec["variant"], buf)
    return written + len(buf)


# ------------------------------------------------------------------------------------------------
# 4./5. aggregation
# ------------------------------------------------------------------------------------------------


def score_row(row: dict[str, Any], q: QAItem, dataset: str, turn_session: dict[str, str]) -> dict[str, Any]:
    """Per-question metrics (added to answers.parquet)."""
    covered = row.get("evidence_turn_ids") or []
    abst = bool(row.get("abstention"))
    if dataset == "longmemeval":
        rec = None if abst else session_recall(q.answer_session_ids, covered, turn_session)
        turn_rec = None if abst else evidence_recall(q.evidence, covered)
    else:
        rec = evidence_recall(q.evidence, covered)
        turn_rec = rec
    f1 = b1 = None
    if not abst:
        f1, b1 = token_f1(row.get("answer"), q.answer), bleu1(row.get("answer"), q.answer)
    v = row.get("judge_verdict")
    return {
        "evidence_recall": rec, "evidence_turn_recall": turn_rec, "f1": f1, "bleu1": b1,
        "judge_correct": None if v is None else v == "CORRECT",
        "abstained": is_abstention(row.get("answer")) if abst else None,
    }


def _r(x: float | None, nd: int = 4) -> float | None:
    return None if x is None else round(x, nd)


def summarise_rows(rows: list[dict[str, Any]], judged: bool) -> dict[str, Any]:
    out = {
        "questions": len(rows),
        "evidence_recall": _r(mean(r["evidence_recall"] for r in rows)),
        "f1": _r(mean(r["f1"] for r in rows)),
        "bleu1": _r(mean(r["bleu1"] for r in rows)),
        "judge_accuracy": _r(mean(float(r["judge_correct"]) if r["judge_correct"] is not None else None for r in rows))
        if judged else None,
    }
    abst = [r for r in rows if r.get("abstention")]
    if abst:
        if judged:
            out["abstention_accuracy"] = _r(mean(float(r["judge_correct"]) if r["judge_correct"] is not None else None for r in abst))
        else:  # LLM-free: the answer declines
            out["abstention_accuracy"] = _r(mean(float(bool(r["abstained"])) for r in abst))
        out["abstention_questions"] = len(abst)
    return out


def aggregate(dataset: Dataset, variant: Variant, rows: list[dict[str, Any]], judged: bool, *, backend: str,
              costs: dict[str, dict[str, Any]] | None, store: StoreInfo | None, query_wall_s: float) -> dict[str, Any]:
    """results.json entry of one variant (``rows`` already scored)."""
    res = summarise_rows(rows, judged)
    cats = sorted({r["category"] for r in rows}, key=lambda c: (len(c), c))
    res["per_category"] = {c: {"name": category_name(dataset.name, c), **summarise_rows([r for r in rows if r["category"] == c], judged)}
                           for c in cats}
    n_conv = len(dataset.conversations)
    turns_only = variant.turns_only
    con = {"prompt_tokens": 0, "completion_tokens": 0, "cached_tokens": 0, "calls": 0, "real_calls": 0, "segments": 0,
           "build_s": 0.0, "store_bytes": 0, "estimated": False}
    for c in (costs or {}).values():
        for k in ("prompt_tokens", "completion_tokens", "cached_tokens", "calls", "real_calls", "segments", "build_s"):
            con[k] += c[k]
        con["store_bytes"] += c["turns_bytes"] if turns_only else c["store_bytes"]
        con["estimated"] = con["estimated"] or bool(c.get("estimated"))
    if turns_only:  # no LLM in its construction: raw turns + turn vectors only
        for k in ("prompt_tokens", "completion_tokens", "cached_tokens", "calls", "real_calls", "segments"):
            con[k] = 0
        con["estimated"] = False
    built = len(costs or {}) or 1
    nq = max(1, len(rows))
    q_calls = sum(int(r["llm_calls"] or 0) for r in rows)
    j_calls = sum(int(r["judge_calls"] or 0) for r in rows)
    build_wall = 0.0
    if store is not None and not turns_only:
        build_wall = con["build_s"] if store.reused_from else float(store.build_wall_s_total or con["build_s"])
    res.update({
        "construction_tokens_per_conversation": round((con["prompt_tokens"] + con["completion_tokens"]) / built, 1),
        "construction_tokens": {
            "prompt_per_conversation": round(con["prompt_tokens"] / built, 1),
            "completion_per_conversation": round(con["completion_tokens"] / built, 1),
            "cached_per_conversation": round(con["cached_tokens"] / built, 1),
            "encode_calls_per_conversation": round(con["calls"] / built, 2),
            "estimated": con["estimated"],
            "note": ("offline count of the encode prompts/records the openai encoder would send for these segments "
                     "(rules backend makes no LLM calls)") if con["estimated"] else
                    ("raw turns and turn vectors only: no LLM in construction" if turns_only else "provider-reported usage"),
        },
        "query_tokens_per_question": round(sum(int(r["query_tokens"] or 0) for r in rows) / nq, 1),
        "query_tokens": {
            "plan_prompt": round(sum(int(r["plan_prompt_tokens"] or 0) for r in rows) / nq, 1),
            "plan_completion": round(sum(int(r["plan_completion_tokens"] or 0) for r in rows) / nq, 1),
            "answer_prompt": round(sum(int(r["answer_prompt_tokens"] or 0) for r in rows) / nq, 1),
            "answer_completion": round(sum(int(r["answer_completion_tokens"] or 0) for r in rows) / nq, 1),
            "context": round(sum(int(r["context_tokens"] or 0) for r in rows) / nq, 1),
            "estimated": any(bool(r["tokens_estimated"]) for r in rows),
        },
        "judge_tokens_per_question": round(sum(int(r["judge_prompt_tokens"] or 0) + int(r["judge_completion_tokens"] or 0)
                                               for r in rows) / nq, 1) if judged else None,
        "llm_calls": int(con["real_calls"]) + q_calls,
        "llm_calls_detail": {"construction": int(con["real_calls"]), "construction_equivalent": int(con["calls"]),
                             "query": q_calls, "judge": j_calls},
        "wall_s": round(build_wall + query_wall_s, 2),
        "wall_detail_s": {"build": round(build_wall, 2), "query": round(query_wall_s, 2),
                          "build_source": ("none (raw turns only)" if turns_only or store is None else
                                           "sum of per-conversation build times in the commit markers (store reused)"
                                           if store.reused_from else "measured build wall time in this run directory")},
        "store_bytes": int(con["store_bytes"]),
        "index_build_s": round(con["build_s"], 3) if not turns_only else 0.0,
        "segments_per_conversation": round(con["segments"] / built, 2),
        "latency_ms_mean": _r(mean(r["latency_ms"] for r in rows), 1),
        "failed_questions": sum(1 for r in rows if r.get("answer_error")),
        "context_truncated": sum(1 for r in rows if r.get("context_truncated")),
        "store": str(store.path) if store is not None and store.path else None,
        "description": variant.description,
    })
    return res


# ------------------------------------------------------------------------------------------------
# the whole run
# ------------------------------------------------------------------------------------------------


@dataclass
class EvalOptions:
    dataset: str
    data: str | Path
    out: str | Path
    variants: list[Variant]
    llm: str | None = None
    judge_model: str | None = None
    judge: bool = True
    limit: int | None = None
    conversations: str | int | None = None
    reuse_stores: list[str | Path] = field(default_factory=list)
    progress: bool = True
    report: bool = True


def _progress_printer(name: str, enabled: bool) -> Callable[[int, int], None] | None:
    if not enabled:
        return None
    t0 = time.perf_counter()
    last = [0.0]

    def show(done: int, total: int) -> None:
        now = time.perf_counter()
        if done != total and now - last[0] < 10.0:
            return
        last[0] = now
        rate = done / max(1e-9, now - t0)
        eta = f"{(total - done) / rate:.0f}s" if rate > 0 and done < total else "0s"
        print(f"[eval {name}] {done}/{total} questions {rate:.2f} q/s ETA {eta}", file=sys.stderr, flush=True)

    return show


def run_eval(cfg: LycheeConfig, opts: EvalOptions) -> dict[str, Any]:
    """Everything `lychee-ray eval` does; returns the results.json content."""
    from .ray_build import RateLimiterActor, init_ray

    t_run = time.perf_counter()
    run_dir = Path(opts.out).resolve()
    run_dir.mkdir(parents=True, exist_ok=True)
    backend = resolve_backend(cfg.llm, opts.llm)
    if backend == "openai" and not (cfg.llm.base_url or cfg.llm.api_key):
        raise EvalError("--llm openai needs an endpoint: set OPENAI_BASE_URL / LYCHEE_LLM_BASE_URL or OPENAI_API_KEY "
                        "(or llm.base_url)")
    judged = backend == "openai" and opts.judge
    ds = load_dataset(opts.dataset, opts.data, cfg, opts.conversations, opts.limit)
    cids = [c.conversation_id for c in ds.conversations]
    log.info("eval %s: %d conversation(s), %d question(s), variants %s, backend %s%s", ds.name, len(cids),
             len(ds.questions), ", ".join(v.name for v in opts.variants), backend, "" if judged else " (no judge)")
    input_path = write_subset(ds, run_dir)
    state = RunState(run_dir)
    reuse = [Path(p).resolve() for p in opts.reuse_stores]
    init_ray(cfg)

    # -- stores ------------------------------------------------------------------------------------
    stores: dict[str, StoreInfo] = {}

    def store_for(label: str, bcfg: LycheeConfig, be: str) -> StoreInfo:
        key = build_key(label, bcfg, be)
        if key not in stores:
            info = StoreInfo(key=key, label=label, backend=be, cfg=bcfg, fingerprint=expected_fingerprint(bcfg, be))
            stores[key] = ensure_store(info, ds, input_path, run_dir, state, reuse, opts.progress)
        return stores[key]

    default_key = build_key("default", cfg, backend)
    default_fp = expected_fingerprint(cfg, backend)

    def complete_default() -> Path | None:
        """A store of the default build (this backend) holding every selected conversation, if any."""
        if default_key in stores and stores[default_key].path is not None:
            return stores[default_key].path
        return next((p for p in [run_dir / "stores" / default_key, *reuse] if store_has(p, cids, default_fp)), None)

    need_default = any(not v.turns_only and not v.build_sets for v in opts.variants)
    variant_store: dict[str, StoreInfo] = {}
    for v in opts.variants:  # canonical order: lychee's store exists before fixed_window reads its segment length
        if v.turns_only:
            continue
        fw = None
        if v.name == "fixed_window":
            src = complete_default()
            mtps = mean_turns_per_segment(src, cids) if src is not None else None
            fw = fixed_window_for(mtps, turns_per_exchange(ds, cfg), cfg.segmenter.fixed_window)
            log.info("fixed_window: %s exchanges per segment (lychee mean %s turns/segment)", fw,
                     f"{mtps:.2f}" if mtps else "unknown: default window")
        variant_store[v.name] = store_for(v.build_label, build_config(v, cfg, fw), backend)
    for v in opts.variants:
        if not v.turns_only:
            continue
        if backend == "rules" or need_default or complete_default() is not None:
            variant_store[v.name] = store_for("default", cfg, backend)
        else:  # only raw turns + turn vectors are read: a rules store costs no LLM call
            variant_store[v.name] = store_for("default", cfg, "rules")
    for info in stores.values():
        info.build_wall_s_total = float(state.store(info.key).get("build_wall_s", 0.0))

    # -- answers -----------------------------------------------------------------------------------
    limiter = None
    if backend == "openai":
        limiter = RateLimiterActor.options(name=f"lychee-eval-limiter-{uuid.uuid4().hex[:8]}").remote(
            cfg.llm.rate_limit.model_dump())
    from .judge import judge_config

    jcfg = judge_config(cfg, opts.judge_model) if judged else None
    judge_model = jcfg.llm.model if jcfg is not None else None
    by_qid = {q.question_id: q for q in ds.questions}
    results: dict[str, Any] = {}
    scored_rows: list[dict[str, Any]] = []
    sessions = ds.turn_sessions()
    try:
        for v in opts.variants:
            info = variant_store[v.name]
            qcfg = query_config(v, cfg)
            key = variant_key(v, qcfg, info.fingerprint, backend, judge_model)
            vstate = state.variant(v.name, key)
            have = {qid: r for qid, r in load_answers(run_dir, v.name, key).items() if done_ok(r, judged)}
            ok_cids = set(markers_for(info.path, cids)) if info.path is not None else set()
            todo = [question_payload(q) for q in ds.questions if q.question_id not in have and q.conversation_id in ok_cids]
            skipped = [q for q in ds.questions if q.conversation_id not in ok_cids]
            if skipped:
                log.warning("%s: %d question(s) skipped: their conversation is not in store %s", v.name, len(skipped), info.key)
            log.info("%s: %d answered earlier, %d to answer", v.name, len(have), len(todo))
            if todo:
                spec = {"cfg_json": qcfg.model_dump_json(), "backend": backend, "kind": v.kind, "variant": v.name,
                        "variant_key": key, "store": str(info.path), "in_flight": cfg.eval.questions_in_flight,
                        "judge_cfg_json": jcfg.model_dump_json() if jcfg is not None else None}
                t0 = time.perf_counter()
                answer_questions_ray(spec, todo, cfg, run_dir, limiter, _progress_printer(v.name, opts.progress))
                vstate["query_wall_s"] = round(float(vstate.get("query_wall_s", 0.0)) + time.perf_counter() - t0, 3)
                state.save()
            rows = [r for qid, r in load_answers(run_dir, v.name, key).items() if qid in by_qid]
            for r in rows:
                r.update(score_row(r, by_qid[r["question_id"]], ds.name, sessions.get(r["conversation_id"], {})))
            rows.sort(key=lambda r: (cids.index(r["conversation_id"]), r["question_id"]))
            costs = construction_costs(info, ds, run_dir) if info.path is not None else None
            results[v.name] = aggregate(ds, v, rows, judged, backend=backend, costs=costs, store=info,
                                        query_wall_s=float(vstate.get("query_wall_s", 0.0)))
            results[v.name]["questions_skipped"] = len(skipped)
            scored_rows.extend(rows)
    finally:
        if limiter is not None:
            import ray

            ray.kill(limiter)

    out = {
        "dataset": ds.name,
        "backend": backend,
        "judge": {"enabled": judged, "model": judge_model,
                  "note": None if judged else "no LLM judge with the rules backend: judge_accuracy is null; "
                                              "evidence recall, F1 and BLEU-1 are LLM-free"},
        "evidence_unit": "answer session" if ds.name == "longmemeval" else "turn",
        "conversations": cids,
        "questions": len(ds.questions),
        "limit_per_conversation": opts.limit,
        "variants": results,
        "stores": {k: {"path": str(s.path), "reused_from": s.reused_from, "fingerprint": s.fingerprint, "backend": s.backend,
                       "failed_conversations": s.failed} for k, s in stores.items()},
        "budget_tokens": cfg.query.select.budget_tokens,
        "written_at": datetime.now(timezone.utc).isoformat(),
        "wall_s": round(time.perf_counter() - t_run, 2),
    }
    (run_dir / "results.json").write_text(json.dumps(out, indent=1), encoding="utf-8")
    write_answers_table(run_dir, scored_rows)
    if opts.report:
        from .report import write_report

        write_report(run_dir, out)
    return out


ANSWERS_EXTRA = [pa.field("evidence_recall", pa.float64()), pa.field("evidence_turn_recall", pa.float64()),
                 pa.field("f1", pa.float64()), pa.field("bleu1", pa.float64()), pa.field("judge_correct", pa.bool_()),
                 pa.field("abstained", pa.bool_())]


def write_answers_table(run_dir: Path, rows: list[dict[str, Any]]) -> Path:
    schema = pa.schema(list(ANSWER_SCHEMA) + ANSWERS_EXTRA)
    t = pa.Table.from_pylist([{k: r.get(k) for k in schema.names} for r in rows], schema=schema)
    path = run_dir / "answers.parquet"
    tmp = run_dir / f".answers.{uuid.uuid4().hex}.tmp"
    pq.write_table(t, tmp)
    os.replace(tmp, path)
    return path


__all__ = ["ANSWER_SCHEMA", "DATASETS", "Dataset", "EvalError", "EvalOptions", "QuestionAnswerer", "QuestionWorker",
           "StoreInfo", "aggregate", "construction_costs", "estimate_encode_tokens", "load_answers", "load_dataset",
           "run_eval", "score_row", "select_conversations", "summarise_rows", "write_part"]
