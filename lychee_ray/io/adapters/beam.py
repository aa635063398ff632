"""BEAM (a folder per conversation) → one conversation and its probing questions.

A folder format (:mod:`.units`): an input is one conversation folder, or a folder of them (the
benchmark's ``chats/100K/`` with ``1/``, ``2/`` …). In a conversation folder:

* the chat: ``chat_trunecated.json`` (sic) when present — the authors' loaders read it instead of
  ``chat.json``, and every gold id lies inside it — else ``chat.json``: a list of batches
  ``{batch_number, time_anchor, turns}``, ``turns`` a list of exchanges, each a list of messages
  ``{role, id, content, time_anchor?, index?, question_type?}``;
* ``probing_questions/probing_questions.json``: ``{ability: [question, ...]}``, each question with
  ``question``, ``answer`` (or ``ideal_answer`` / ``ideal_response`` / ``ideal_summary``), ``rubric``
  and ``source_chat_ids``.

The conversation is ``beam-<folder name>``; a batch is a session ``batch-<n>`` whose date is the
batch's ``time_anchor`` or else the first one a message of it carries (``March-15-2024``); a
message is a turn whose id is its global message id. Messages keep ``time_anchor`` / ``index`` /
``question_type`` in the turn's ``meta``. Content is kept verbatim (a code-only turn, a turn that
is one table, a long mostly blank turn alike: the build reports turns over
``segmenter.max_turn_chars``); ``content: null`` is read as empty text and a batch without messages
becomes no session, both reported as warnings (docs/data-format.md "BEAM").

A question's gold is its ``source_chat_ids`` flattened to message ids in order: a list, nested lists
(flattened, reported), or a dict of lists keyed by what the ids hold (``original_info`` /
``updated_info``, ``first_statement`` / ``second_statement`` …: kept in ``meta.gold_groups``). Ids the
chat does not hold are dropped from ``evidence`` and reported; an empty or missing
``source_chat_ids`` is reported too, except on ``abstention`` questions, which have no evidence by
design. The raw value stays in ``meta.source_chat_ids``.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path, PurePosixPath
from typing import Any
from collections.abc import Iterator

from lychee_ray.core.conversation import QAItem
from lychee_ray.io.adapters.adapter import Adapter
from lychee_ray.io.adapters.base import AdapterItem, InputIssue, canonical_item, decode_text, open_input
from lychee_ray.io.adapters.units import count_one, entries, join, path_kind
from lychee_ray.names import BEAM

NAME = BEAM
SUFFIXES = (".json",)
CHAT_FILES = ("chat_trunecated.json", "chat.json")  # preferred first, as the authors' loaders read them
QUESTIONS_FILE = ("probing_questions", "probing_questions.json")
ANSWER_KEYS = ("answer", "ideal_answer", "ideal_response", "ideal_summary")
ABSTENTION = "abstention"
# a BEAM date: "March-15-2024"
DATE_FORMAT = "%B-%d-%Y"
MESSAGE_META = ("time_anchor", "index", "question_type")


def _name(path: str) -> str:
    return PurePosixPath(path.replace("\\", "/").rstrip("/")).name


def _load_json(path: str) -> tuple[Any, list[InputIssue]]:
    """(document, issues); the document is None when the file cannot be read as JSON."""
    try:
        with open_input(path) as fh:
            text, issues = decode_text(fh.read(), path)
    except OSError as e:
        return None, [InputIssue(path, f"cannot read: {e}")]
    try:
        return json.loads(text, strict=False), issues
    except json.JSONDecodeError as e:
        return None, [*issues, InputIssue(path, f"not valid JSON: {e.msg} (line {e.lineno}, column {e.colno})",
                                          line=e.lineno)]


def _date(value: Any) -> Any:
    """A BEAM date as ISO; anything else as it is (the canonical repair parses or reports it)."""
    if isinstance(value, str):
        try:
            return datetime.strptime(value.strip(), DATE_FORMAT).isoformat()
        except ValueError:
            return value
    return value


def _sessions(chat: Any, file: str, cid: str) -> tuple[list[dict[str, Any]] | None, list[InputIssue]]:
    """Canonical sessions of a chat document, or None with the error that rejects it."""
    if not isinstance(chat, list):
        return None, [InputIssue(file, f"the chat is a {type(chat).__name__}, not a list of batches",
                                 conversation_id=cid)]
    issues: list[InputIssue] = []
    sessions: list[dict[str, Any]] = []
    for bi, batch in enumerate(chat):
        if not isinstance(batch, dict):
            return None, [InputIssue(file, f"batch {bi} is a {type(batch).__name__}, not an object", field=str(bi),
                                     conversation_id=cid)]
        number = batch.get("batch_number", bi + 1)
        exchanges = batch.get("turns") or []
        if not isinstance(exchanges, list):
            return None, [InputIssue(file, "turns is not a list of exchanges", field=f"{bi}.turns", conversation_id=cid)]
        turns: list[dict[str, Any]] = []
        anchor = batch.get("time_anchor")
        for ei, exchange in enumerate(exchanges):
            for mi, m in enumerate(exchange if isinstance(exchange, list) else [exchange]):
                if not isinstance(m, dict):
                    return None, [InputIssue(file, f"a message is a {type(m).__name__}, not an object",
                                             field=f"{bi}.turns.{ei}.{mi}", conversation_id=cid)]
                anchor = anchor or m.get("time_anchor")
                turns.append({"turn_id": m.get("id"), "role": m.get("role"), "content": m.get("content"),
                              "meta": {k: m[k] for k in MESSAGE_META if m.get(k) is not None}})
        if not turns:
            issues.append(InputIssue(file, f"batch {number} has no messages: no session", field=f"{bi}.turns",
                                     conversation_id=cid, level="warning"))
            continue
        sessions.append({"session_id": f"batch-{number}", "started_at": _date(anchor), "turns": turns})
    return sessions, issues


def _flatten(value: Any) -> tuple[list[Any], bool]:
    """(the ids of a list, nested lists or a scalar, in order; whether a list was nested)."""
    if isinstance(value, list):
        out: list[Any] = []
        nested = False
        for v in value:
            ids, inner = _flatten(v)
            nested = nested or inner or isinstance(v, list)
            out += ids
        return out, nested
    return ([] if value is None else [value]), False


def _message_id(value: Any) -> str | None:
    """A message id as the chat's turn ids spell it (ints and digit strings), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str) and value.strip().isdigit():
        return str(int(value.strip()))
    return None


def gold_ids(source: Any) -> tuple[list[str], dict[str, list[str]] | None, list[str], list[Any]]:
    """(message ids in order, ids per group for a dict, problems, values that are no message id).

    Problems: ``empty`` (no id at all), ``nested`` (a list inside a list, flattened)."""
    groups: dict[str, list[str]] | None = None
    problems: list[str] = []
    if isinstance(source, dict):
        groups, raw = {}, []
        for key, value in source.items():
            ids, nested = _flatten(value)
            problems += ["nested"] if nested and "nested" not in problems else []
            groups[str(key)] = [i for i in (_message_id(v) for v in ids) if i is not None]
            raw += ids
    else:
        raw, nested = _flatten(source)
        if nested:
            problems.append("nested")
    ids = [i for i in (_message_id(v) for v in raw) if i is not None]
    bad = [v for v in raw if _message_id(v) is None]
    if not raw:
        problems.append("empty")
    return list(dict.fromkeys(ids)), groups, problems, bad


def _question(q: dict[str, Any], ability: str, i: int, cid: str, turn_ids: set[str], file: str,
              issues: list[InputIssue]) -> QAItem | None:
    where = f"{ability}.{i}"
    text = q.get("question")
    if not isinstance(text, str) or not text.strip():
        issues.append(InputIssue(file, "a question without question text: skipped", field=f"{where}.question",
                                 conversation_id=cid, level="warning"))
        return None
    source = q.get("source_chat_ids")
    ids, groups, problems, bad = gold_ids(source)
    missing = [t for t in ids if t not in turn_ids]
    evidence = [t for t in ids if t in turn_ids]
    if ability == ABSTENTION and source is None:
        problems = []  # no evidence by design
    for p in problems:
        msg = ("source_chat_ids holds no message id: the question has no gold" if p == "empty"
               else "source_chat_ids nests lists: flattened")
        issues.append(InputIssue(file, msg, field=f"{where}.source_chat_ids", conversation_id=cid, level="warning",
                                 kind=f"gold_{p}"))
    if bad:
        issues.append(InputIssue(file, f"source_chat_ids values {bad[:5]} are no message ids: dropped",
                                 field=f"{where}.source_chat_ids", conversation_id=cid, level="warning",
                                 kind="gold_not_an_id"))
    if missing:
        issues.append(InputIssue(file, f"gold message ids {missing[:5]} are not in the chat: dropped from evidence",
                                 field=f"{where}.source_chat_ids", conversation_id=cid, level="warning",
                                 kind="gold_missing"))
    answer = next((q[k] for k in ANSWER_KEYS if isinstance(q.get(k), str)), "")
    rubric = q.get("rubric")
    meta: dict[str, Any] = {"rubric": [str(r) for r in rubric] if isinstance(rubric, list) else [],
                            "source_chat_ids": source, "abstention": ability == ABSTENTION}
    if groups is not None:
        meta["gold_groups"] = {k: [t for t in v if t in turn_ids] for k, v in groups.items()}
    if problems or missing or bad:
        meta["gold_problems"] = problems + (["missing"] if missing else []) + (["not_an_id"] if bad else [])
    return QAItem(conversation_id=cid, question_id=f"{cid}:{ability}:{i}", question=text.strip(), answer=answer,
                  category=ability, evidence=evidence, meta=meta)


def _questions(folder: str, cid: str, turn_ids: set[str]) -> tuple[list[QAItem], list[InputIssue]]:
    path = join(folder, *QUESTIONS_FILE)
    if path_kind(path) != "file":
        return [], [InputIssue(path, "no probing questions file: the conversation has no questions",
                               conversation_id=cid, level="warning")]
    doc, issues = _load_json(path)
    issues = [i if i.level == "warning" else InputIssue(i.file, i.message + ": no questions read", line=i.line,
                                                        conversation_id=cid, level="warning") for i in issues]
    if doc is None:
        return [], issues
    if not isinstance(doc, dict):
        return [], [*issues, InputIssue(path, "not an object of abilities: no questions read", conversation_id=cid,
                                        level="warning")]
    out: list[QAItem] = []
    for ability, qs in doc.items():
        for i, q in enumerate(qs if isinstance(qs, list) else []):
            if not isinstance(q, dict):
                issues.append(InputIssue(path, "a question that is not an object: skipped", field=f"{ability}.{i}",
                                         conversation_id=cid, level="warning"))
                continue
            item = _question(q, str(ability), i, cid, turn_ids, path, issues)
            if item is not None:
                out.append(item)
    return out, issues


def chat_file(folder: str) -> str | None:
    """The chat a folder's conversation is read from (module docstring), or None."""
    files = {_name(f): f for f in entries(folder)[0]}
    return next((files[n] for n in CHAT_FILES if n in files), None)


def read_beam(unit: str | Path) -> Iterator[AdapterItem]:
    """One BEAM conversation folder → one item (the conversation and its questions, or the error)."""
    unit = str(unit)
    cid = f"beam-{_name(unit)}"
    if path_kind(unit) != "folder":
        yield AdapterItem(unit, issues=[InputIssue(unit, "a BEAM input is a conversation folder (chat.json and "
                                                         "probing_questions/), not a file", conversation_id=cid)])
        return
    chat_path = chat_file(unit)
    if chat_path is None:
        yield AdapterItem(unit, issues=[InputIssue(unit, f"no {' or '.join(CHAT_FILES)} in this folder",
                                                   conversation_id=cid)])
        return
    chat, file_issues = _load_json(chat_path)
    sessions, issues = _sessions(chat, chat_path, cid) if chat is not None else (None, [])
    if sessions is None:
        yield AdapterItem(chat_path, issues=file_issues + issues)
        return
    item = canonical_item({"conversation_id": cid, "sessions": sessions, "meta": {"source": NAME,
                                                                                 "chat_file": _name(chat_path)}},
                          chat_path, None, file_issues + issues)
    if item.conversation is not None:
        turn_ids = {t.turn_id for *_, t in item.conversation.iter_turns()}
        item.qa, q_issues = _questions(unit, cid, turn_ids)
        item.issues += q_issues
    yield item


def sniff(obj: dict[str, Any] | None, head: str) -> bool:
    """A BEAM chat: a JSON array of batches (``batch_number``, ``turns``)."""
    if obj is not None:
        return "batch_number" in obj and isinstance(obj.get("turns"), list)
    return head.startswith("[") and '"batch_number"' in head and '"turns"' in head


ADAPTER = Adapter(NAME, "BEAM", SUFFIXES, read_beam, sniff, count_one, unit="folder")
