"""LongMemEval (list of instances) → one conversation per instance plus its question.

Each instance's haystack sessions become sessions (dates like "2023/05/20 (Sat) 02:21"), sorted
chronologically with a stable sort; turn ids are ``<session_id>:<index>``; turn-level ``has_answer``
is kept in ``meta`` and the ``has_answer`` turns become the question's gold evidence.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from collections.abc import Iterator

from pydantic import ValidationError

from lychee_ray.core.conversation import Conversation, QAItem, Session, Turn
from lychee_ray.io.adapters.adapter import Adapter
from lychee_ray.io.adapters.base import AdapterItem, InputIssue, with_warnings, issues_from_validation
from lychee_ray.io.adapters.clean import Notes, clean_strings
from lychee_ray.io.adapters.dates import parse_datetime
from lychee_ray.io.adapters.documents import read_samples
from lychee_ray.names import LONGMEMEVAL

SUFFIXES = (".json",)


def convert_instance(inst: dict[str, Any], file: str, index: int) -> AdapterItem:
    """One LongMemEval instance to a conversation and its QA item."""
    qid = str(inst.get("question_id") or f"instance-{index}")
    cid = f"lme-{qid}"
    ids = inst.get("haystack_session_ids") or []
    dates = inst.get("haystack_dates") or []
    sessions_raw = inst.get("haystack_sessions") or []
    if not (len(ids) == len(dates) == len(sessions_raw)):
        msg = f"haystack lengths differ: {len(ids)} ids, {len(dates)} dates, {len(sessions_raw)} sessions"
        return AdapterItem(file, issues=[InputIssue(file, msg, field="haystack_sessions", conversation_id=cid)])
    sessions: list[tuple[str, Session]] = []
    evidence: list[str] = []
    for si, (sid, date_raw, turns_raw) in enumerate(zip(ids, dates, sessions_raw, strict=False)):
        try:
            started = parse_datetime(date_raw)
        except ValueError as e:
            return AdapterItem(file, issues=[InputIssue(file, str(e), field=f"haystack_dates.{si}", conversation_id=cid)])
        turns = []
        for ti, t in enumerate(turns_raw or []):
            meta = {"has_answer": bool(t["has_answer"])} if "has_answer" in t else {}
            tid = f"{sid}:{ti}"
            try:
                turns.append(Turn(turn_id=tid, role=t.get("role", "user"), content=str(t.get("content", "")), meta=meta))
            except ValidationError as e:
                return AdapterItem(file, issues=issues_from_validation(e, file, None, cid, prefix=f"haystack_sessions.{si}.{ti}"))
            if meta.get("has_answer"):
                evidence.append(tid)
        sessions.append((started, Session(session_id=str(sid), started_at=started, turns=turns)))
    sessions.sort(key=lambda p: p[0])
    try:
        conv = Conversation(conversation_id=cid, sessions=[s for _, s in sessions], meta={"source": LONGMEMEVAL})
    except ValidationError as e:
        return AdapterItem(file, issues=issues_from_validation(e, file, None, cid))
    issues: list[InputIssue] = []
    qdate = None
    if inst.get("question_date"):
        try:
            qdate = parse_datetime(inst["question_date"])
        except ValueError as e:
            issues.append(InputIssue(file, str(e), field="question_date", conversation_id=cid, level="warning"))
    qtype = str(inst.get("question_type", ""))
    qa = QAItem(
        conversation_id=cid,
        question_id=qid,
        question=str(inst.get("question", "")),
        answer=str(inst.get("answer", "")),
        category=qtype,
        evidence=evidence,
        question_date=qdate,
        answer_session_ids=[str(x) for x in inst.get("answer_session_ids") or []],
        meta={"abstention": qid.endswith("_abs")},
    )
    return AdapterItem(file, conversation=conv, qa=[qa], issues=issues)


def _instance_item(inst: dict[str, Any], f: str, i: int, count: int, file_issues: list[InputIssue] | None) -> AdapterItem:
    notes = Notes()
    inst = clean_strings(inst, notes)
    return with_warnings(convert_instance(inst, f, i), notes, file_issues)


def read_longmemeval(path: str | Path) -> Iterator[AdapterItem]:
    """LongMemEval JSON files (each a list of instances, or one instance)."""
    return read_samples(path, SUFFIXES, "instance", _instance_item)


def sniff(obj: dict[str, Any] | None, head: str) -> bool:
    """A JSON document naming ``haystack_sessions``."""
    return '"haystack_sessions"' in head or '"haystack_session_ids"' in head


ADAPTER = Adapter(LONGMEMEVAL, "LongMemEval JSON", SUFFIXES, read_longmemeval, sniff)
