"""LongMemEval (list of instances) → one conversation per instance plus its question.

Each instance's haystack sessions become sessions (dates like "2023/05/20 (Sat) 02:21"), sorted
chronologically with a stable sort; turn ids are ``<session_id>:<index>``; turn-level ``has_answer``
is kept in ``meta`` and the ``has_answer`` turns become the question's gold evidence.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from collections.abc import Iterator

from pydantic import ValidationError

from lychee_ray.core.conversation import Conversation, QAItem, Session, Turn
from lychee_ray.io.adapters.base import AdapterItem, InputIssue, decode_text, with_warnings, issues_from_validation, list_input_files, open_input
from lychee_ray.io.adapters.clean import Notes, clean_strings
from lychee_ray.io.adapters.dates import parse_datetime

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
        conv = Conversation(conversation_id=cid, sessions=[s for _, s in sessions], meta={"source": "longmemeval"})
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


def read_longmemeval(path: str | Path) -> Iterator[AdapterItem]:
    """LongMemEval JSON files (each a list of instances, or one instance)."""
    for file in list_input_files(path, SUFFIXES):
        f = str(file)
        with open_input(file) as fh:
            text, file_issues = decode_text(fh.read(), f)
        try:
            data = json.loads(text, strict=False)
        except json.JSONDecodeError as e:
            yield AdapterItem(f, issues=[*file_issues, InputIssue(f, f"not valid JSON: {e}")])
            continue
        for i, inst in enumerate(data if isinstance(data, list) else [data]):
            if not isinstance(inst, dict):
                yield AdapterItem(f, issues=[InputIssue(f, f"instance {i} is not an object")])
                continue
            notes = Notes()
            inst = clean_strings(inst, notes)
            yield with_warnings(convert_instance(inst, f, i), notes, file_issues if i == 0 else None)
