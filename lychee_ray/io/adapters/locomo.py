"""LoCoMo (``locomo10`` per-sample JSON) → canonical conversations and a QA list.

Sessions are taken in numeric order; ``session_N_date_time`` becomes the session's ISO start time;
``dia_id`` is kept as ``turn_id``; an image's BLIP caption is kept as ``[image: ...]`` text. Gold
evidence lists that are malformed in the source (``"D8:6; D9:17"``, ``"D"``, ``"D:11:26"``,
``"D30:05"``) are split and repaired where the repair resolves to a real turn; the rest are dropped
from ``evidence`` and reported as warnings (kept verbatim in ``meta.evidence_raw``).

Missing fields are repaired and each repair is reported as a warning (docs/data-format.md): a turn
without ``speaker`` (read as the role), ``dia_id`` (generated ``D<session>:<position>``) or text (an
empty turn), a session without ``session_N_date_time`` (no start time); sessions whose dates go
backwards are kept and reported. A turn that is not an object rejects the sample, naming it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from collections.abc import Iterator

from pydantic import ValidationError

from lychee_ray.core.conversation import Conversation, QAItem, Session, Turn
from lychee_ray.io.adapters.adapter import Adapter
from lychee_ray.io.adapters.base import AdapterItem, InputIssue, with_warnings, issues_from_validation
from lychee_ray.io.adapters.clean import Notes, clean_strings, policy_id, time_order_notes
from lychee_ray.io.adapters.dates import parse_datetime
from lychee_ray.io.adapters.documents import read_samples
from lychee_ray.names import LOCOMO

SUFFIXES = (".json",)

_SESSION_KEY = re.compile(r"session_(\d+)")
_EVIDENCE_SPLIT = re.compile(r"[;,\s]+")
_DIA_ID = re.compile(r"D:?(\d+):0*(\d+)")

CATEGORY_NAMES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}


def _turn_text(t: dict[str, Any]) -> str:
    text = str(t.get("text") or "")
    cap = t.get("blip_caption")
    if cap:
        text = f"{text} [image: {cap}]".strip()
    return text


def _resolve_evidence(raw: list[Any], turn_ids: set[str]) -> tuple[list[str], list[str]]:
    """(resolved ids, unresolvable pieces) for one question's evidence list."""
    ok: list[str] = []
    bad: list[str] = []
    for entry in raw:
        for piece in _EVIDENCE_SPLIT.split(str(entry).strip()):
            if not piece:
                continue
            if piece in turn_ids:
                ok.append(piece)
                continue
            m = _DIA_ID.fullmatch(piece)
            fixed = f"D{m.group(1)}:{int(m.group(2))}" if m else None
            (ok.append(fixed) if fixed in turn_ids else bad.append(piece))
    return list(dict.fromkeys(ok)), bad


def _note_missing(t: dict[str, Any], field: str, generated_id: str, notes: Notes) -> None:
    """Warnings for the fields of one LoCoMo turn that are missing and repaired."""
    if not str(t.get("speaker") or "").strip():
        notes.add("missing speaker (read as the role 'user')", f"{field}.speaker")
    if not t.get("dia_id"):
        notes.add("missing dia_id generated", f"{field}.dia_id", generated_id)
    if not str(t.get("text") or "").strip() and not t.get("blip_caption"):
        notes.add("missing text (an empty turn)", f"{field}.text")


def convert_sample(sample: dict[str, Any], conversation_id: str, file: str) -> AdapterItem:
    """One LoCoMo sample to a conversation plus its QA items."""
    conv_obj = sample.get("conversation", sample)  # the combined locomo10.json nests it
    issues: list[InputIssue] = []
    notes = Notes()  # repairs of missing fields (warnings)
    kept: list[int] = []  # the session numbers of ``sessions``
    sessions: list[Session] = []
    numbers = sorted(int(m.group(1)) for k in conv_obj if (m := _SESSION_KEY.fullmatch(k)))
    for n in numbers:
        turns_raw = conv_obj.get(f"session_{n}")
        if not isinstance(turns_raw, list):
            continue
        date_raw = conv_obj.get(f"session_{n}_date_time")
        try:
            started = parse_datetime(date_raw) if date_raw else None
        except ValueError as e:
            issues.append(InputIssue(file, str(e), field=f"session_{n}_date_time", conversation_id=conversation_id))
            return AdapterItem(file, issues=issues)
        if not date_raw:
            notes.add("missing session date (no start time)", f"session_{n}_date_time")
        turns = []
        for i, t in enumerate(turns_raw):
            if not isinstance(t, dict):
                issues.append(InputIssue(file, f"a turn is a {type(t).__name__}, not an object", field=f"session_{n}.{i}",
                                         conversation_id=conversation_id))
                return AdapterItem(file, issues=issues)
            _note_missing(t, f"session_{n}.{i}", f"D{n}:{i + 1}", notes)
            meta = {k: t[k] for k in ("img_url", "query") if k in t}
            turn_id = str(t.get("dia_id") or f"D{n}:{i + 1}")
            try:
                turns.append(Turn(turn_id=turn_id, role="user", speaker=str(t.get("speaker") or ""), content=_turn_text(t), meta=meta))
            except ValidationError as e:
                issues.extend(issues_from_validation(e, file, None, conversation_id, prefix=f"session_{n}.{i}"))
                return AdapterItem(file, issues=issues)
        sessions.append(Session(session_id=f"session_{n}", started_at=started, turns=turns))
        kept.append(n)
    meta = {k: conv_obj[k] for k in ("speaker_a", "speaker_b") if k in conv_obj}
    try:
        conv = Conversation(conversation_id=conversation_id, sessions=sessions, meta=meta)
    except ValidationError as e:
        return AdapterItem(file, issues=issues + issues_from_validation(e, file, None, conversation_id))
    time_order_notes([{"started_at": s.started_at, "turns": []} for s in sessions], notes)
    fields = {f"sessions.{i}.started_at": f"session_{n}_date_time" for i, n in enumerate(kept)}
    issues += [InputIssue(file, msg, field=fields.get(fld, fld), conversation_id=conversation_id, level="warning")
               for fld, msg in notes.messages()]

    turn_ids = {t.turn_id for _, _, _, t in conv.iter_turns()}
    qa: list[QAItem] = []
    for qi, q in enumerate(sample.get("qa") or []):
        raw_ev = q.get("evidence") or []
        evidence, bad = _resolve_evidence(raw_ev, turn_ids)
        qid = f"{conversation_id}-q{qi}"
        if bad:
            issues.append(
                InputIssue(
                    file,
                    f"gold evidence {bad} does not resolve to a turn; dropped from evidence",
                    field=f"qa.{qi}.evidence",
                    conversation_id=conversation_id,
                    level="warning",
                )
            )
        cat = int(q.get("category", 0))
        answer = q.get("answer")
        qmeta: dict[str, Any] = {"category_name": CATEGORY_NAMES.get(cat, str(cat))}
        if evidence != [str(e) for e in raw_ev]:
            qmeta["evidence_raw"] = [str(e) for e in raw_ev]
        if "adversarial_answer" in q:
            qmeta["adversarial_answer"] = q["adversarial_answer"]
        qa.append(
            QAItem(
                conversation_id=conversation_id,
                question_id=qid,
                question=str(q.get("question", "")),
                answer="" if answer is None else str(answer),
                category=str(cat),
                evidence=evidence,
                meta=qmeta,
            )
        )
    return AdapterItem(file, conversation=conv, qa=qa, issues=issues)


def _sample_item(sample: dict[str, Any], f: str, i: int, count: int, file_issues: list[InputIssue] | None) -> AdapterItem:
    sid = sample.get("sample_id")
    cid = f"locomo-{sid if sid is not None else Path(f).stem}"
    if count > 1 and sid is None:
        cid = f"{cid}-{i}"
    notes = Notes()
    sample = clean_strings(sample, notes, keep=frozenset({"sample_id"}))  # the id: repaired below
    cid = policy_id(cid, "sample_id", notes)  # the one id policy (core/ids.py)
    if notes.errors:
        return AdapterItem(f, issues=[*(file_issues or []), *(InputIssue(f, msg, field=fld) for fld, msg in notes.errors)])
    return with_warnings(convert_sample(sample, cid, f), notes, file_issues)


def read_locomo(path: str | Path) -> Iterator[AdapterItem]:
    """LoCoMo files (a per-sample dict, or a list of samples as in ``locomo10.json``)."""
    return read_samples(path, SUFFIXES, "sample", _sample_item)


def sniff(obj: dict[str, Any] | None, head: str) -> bool:
    """A JSON document naming ``session_1``, ``sample_id`` or ``conversation``."""
    return '"session_1"' in head or '"sample_id"' in head or '"conversation"' in head


ADAPTER = Adapter(LOCOMO, "LoCoMo", SUFFIXES, read_locomo, sniff)
