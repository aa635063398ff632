"""Input hygiene shared by the adapters: clean text, and repair of canonical conversation objects.

Every repair is *reported* (an :class:`~lychee_ray.io.adapters.base.InputIssue` with level
``warning``) and nothing that carries content is dropped:

* **text** (every string of the input): terminal escape sequences (ANSI CSI/OSC), C0/C1 control
  characters other than tab, newline and carriage return, and Unicode bidi embeddings, overrides
  and isolates are removed; lone UTF-16 surrogates (``"\\ud800"`` in JSON) become U+FFFD. The rest
  of the text is kept as it is (prompt-injection-looking text is ordinary content).
* **ids**: numbers become strings; a missing session or turn id is generated from its position; a
  repeated session id or turn id gets a ``#2``, ``#3`` … suffix (the source id is kept in the turn's
  ``meta.source_turn_id``) — the conversation is built instead of rejected. Every id is then held to
  the one id policy (:mod:`lychee_ray.core.ids`, the rule the HTTP API rejects by): control,
  format (bidi, zero-width) and separator characters removed and whitespace trimmed, with a
  warning; an id that cannot be repaired (empty, over ``MAX_ID_CHARS``) rejects the conversation.
* **speaker / role**: null, blank or missing speakers default to the role; null or blank roles
  default to ``user``; roles are case-folded and common aliases mapped (``human`` → ``user``,
  ``ai``/``bot``/``gpt``/``model`` → ``assistant``, ``function`` → ``tool``); an unknown role is read
  as ``user`` with the role kept as the speaker when there is none.
* **dates** (session ``started_at``, turn ``timestamp``): ISO strings are kept verbatim; other
  parseable strings (LoCoMo / LongMemEval styles, "8 May 2023") and epoch numbers (seconds, or
  milliseconds above 1e11) are normalised to ISO; an unparseable date is dropped (the session or
  turn is kept) with its raw value in the warning; a date more than a day in the future is kept and
  reported; a session that starts before the one before it, or a turn timestamp earlier than the
  turn before it, is kept and reported (:func:`time_order_notes`).
* **empty input**: ``turns: null`` reads as an empty session; ``content: null`` as empty text.
"""

from __future__ import annotations

import re
from collections import defaultdict
from datetime import datetime, timedelta, timezone
from typing import Any

from lychee_ray.core.conversation import ROLES
from lychee_ray.core.ids import InvalidId, repair_id
from lychee_ray.io.adapters.dates import parse_datetime

# Terminal escape sequences first (so their parameter bytes go with them), then single characters.
_ESCAPES = (
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI: colours, cursor movement, screen clearing
    r"|\x1b\][^\x07\x1b\n]{0,512}(?:\x07|\x1b\\)"  # OSC (window title …) terminated by BEL or ST
    r"|\x1b[@-Z\\-_]"  # other two-character escapes
    r"|\x9b[0-?]*[ -/]*[@-~]"  # C1 CSI
)
_CONTROLS = r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ufffe\uffff]"
_REMOVE = re.compile(f"{_ESCAPES}|{_CONTROLS}")
_SURROGATE = re.compile(r"[\ud800-\udfff]")
_ANY = re.compile(f"{_ESCAPES}|{_CONTROLS}|[\\ud800-\\udfff]")

ROLE_ALIASES = {"human": "user", "ai": "assistant", "bot": "assistant", "gpt": "assistant", "model": "assistant",
                "chatbot": "assistant", "function": "tool"}
# Dates further than this after the build's clock are reported (and kept).
FUTURE_SLACK = timedelta(days=1)
# At most this many field paths are named in one aggregated warning.
_MAX_FIELDS_NAMED = 5


def clean_text(text: str) -> tuple[str, int]:
    """``(cleaned text, characters removed or replaced)``; clean text comes back unchanged (fast path)."""
    if not _ANY.search(text):
        return text, 0
    removed = 0

    def _drop(m: re.Match[str]) -> str:
        nonlocal removed
        removed += len(m.group(0))
        return ""

    out = _REMOVE.sub(_drop, text)
    out, n = _SURROGATE.subn("\ufffd", out)
    return out, removed + n


class Notes:
    """Repairs of one conversation, aggregated by kind into a few warnings."""

    def __init__(self) -> None:
        self.by_kind: dict[str, list[str]] = defaultdict(list)
        self.details: dict[str, list[str]] = defaultdict(list)
        self.errors: list[tuple[str, str]] = []  # (field, message): what no repair can fix (the item is rejected)

    def add(self, kind: str, field: str, detail: str = "") -> None:
        self.by_kind[kind].append(field)
        if detail:
            self.details[kind].append(detail)

    def messages(self) -> list[tuple[str, str]]:
        """``(field of the first occurrence, message)`` per kind."""
        out = []
        for kind, fields in self.by_kind.items():
            named = ", ".join(fields[:_MAX_FIELDS_NAMED]) + (f", … ({len(fields)} in all)" if len(fields) > _MAX_FIELDS_NAMED else "")
            details = self.details.get(kind) or []
            shown = "; ".join(details[:_MAX_FIELDS_NAMED]) + (" …" if len(details) > _MAX_FIELDS_NAMED else "")
            out.append((fields[0], f"{kind} [{named}]" + (f": {shown}" if shown else "")))
        return out

    def __bool__(self) -> bool:
        return bool(self.by_kind)


# Keys whose string values are ids: the id policy repairs them (policy_id), with a warning that shows
# the id before and after, so the text cleaning leaves them alone.
ID_KEYS = frozenset({"conversation_id", "user_id", "session_id", "turn_id"})


def clean_strings(obj: Any, notes: Notes, path: str = "", keep: frozenset[str] = frozenset()) -> Any:
    """Clean every string value in a JSON-like object (dict keys are left as they are), except the
    string values of the keys in ``keep`` (ids the caller holds to the id policy itself)."""
    if isinstance(obj, str):
        out, n = clean_text(obj)
        if n:
            notes.add("control characters removed / lone surrogates replaced", path or "<root>", f"{n} chars")
        return out
    if isinstance(obj, dict):
        return {k: v if k in keep and isinstance(v, str) else clean_strings(v, notes, f"{path}.{k}" if path else str(k), keep)
                for k, v in obj.items()}
    if isinstance(obj, list):
        return [clean_strings(v, notes, f"{path}.{i}" if path else str(i), keep) for i, v in enumerate(obj)]
    return obj


def _id_text(v: Any) -> Any:
    """Numbers used as ids become strings (``4242`` → ``"4242"``); other values pass through."""
    if isinstance(v, bool):
        return v
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return v


def normalise_date(value: Any, field: str, notes: Notes, now: datetime) -> Any:
    """An ISO string (verbatim when already ISO), None when unparseable; see the module doc."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    dt: datetime | None = None
    out: Any = value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        secs = value / 1000.0 if abs(value) > 1e11 else float(value)
        try:
            dt = datetime.fromtimestamp(secs, tz=timezone.utc).replace(tzinfo=None)
        except (OverflowError, OSError, ValueError):
            notes.add("unparseable date dropped", field, repr(value))
            return None
        out = dt.isoformat()
        notes.add("epoch date normalised to ISO (UTC)", field, f"{value!r} -> {out}")
    elif isinstance(value, str):
        try:
            dt = datetime.fromisoformat(value)
        except ValueError:
            try:
                out = parse_datetime(value)
            except (ValueError, OverflowError):
                notes.add("unparseable date dropped", field, repr(value[:80]))
                return None
            dt = datetime.fromisoformat(out)
            notes.add("date normalised to ISO", field, f"{value[:80]!r} -> {out}")
    else:
        return value  # not a date at all: validation reports it
    naive = dt.astimezone(timezone.utc).replace(tzinfo=None) if dt.tzinfo else dt
    if naive > now + FUTURE_SLACK:
        notes.add("date in the future (kept)", field, out if isinstance(out, str) else repr(out))
    return out


def policy_id(value: Any, field: str, notes: Notes, blank_is_missing: bool = False) -> Any:
    """A string id held to the id policy: repaired with a warning, or an error noted (the value is
    then kept for the error report); other values pass through (validation reports them).
    ``blank_is_missing``: an id with nothing left after the repair is None (a session or turn id
    the caller then generates, as for a missing one) instead of an error."""
    if not isinstance(value, str):
        return value
    try:
        fixed, change = repair_id(value, field.rsplit(".", 1)[-1])
    except InvalidId as e:
        if blank_is_missing and e.reason == "is empty":
            return None
        notes.errors.append((field, str(e)))
        return value
    if change is not None:
        notes.add("id repaired (control/format characters removed, whitespace trimmed)", field, change)
    return fixed


def _instant(value: Any) -> datetime | None:
    """A normalised ISO date as a naive UTC datetime (None: absent or not a date)."""
    if not isinstance(value, str):
        return None
    try:
        dt = datetime.fromisoformat(value)
    except ValueError:
        return None
    return dt.astimezone(timezone.utc).replace(tzinfo=None) if dt.tzinfo else dt


def time_order_notes(sessions: list[Any], notes: Notes) -> None:
    """Report times that go backwards (kept as they are: the input may mean it, and the time
    resolution reads each turn's own date): a session starting before the session before it, a
    turn timestamp before the previous turn's. ``sessions``: canonical session dicts, dates normalised."""
    last_start: tuple[datetime, str] | None = None
    last_turn: tuple[datetime, str] | None = None
    for si, s in enumerate(sessions):
        if not isinstance(s, dict):
            continue
        start = _instant(s.get("started_at"))
        if start is not None:
            if last_start is not None and start < last_start[0]:
                notes.add("session starts before the session before it (kept)", f"sessions.{si}.started_at",
                          f"{s.get('started_at')} < {last_start[1]}")
            last_start = (start, str(s.get("started_at")))
        for ti, t in enumerate(s.get("turns") or []):
            at = _instant(t.get("timestamp")) if isinstance(t, dict) else None
            if at is None:
                continue
            if last_turn is not None and at < last_turn[0]:
                notes.add("turn timestamp before the previous turn's (kept)", f"sessions.{si}.turns.{ti}.timestamp",
                          f"{t.get('timestamp')} < {last_turn[1]}")
            last_turn = (at, str(t.get("timestamp")))


def _unique(wanted: str, taken: set[str]) -> str:
    k = 2
    while f"{wanted}#{k}" in taken:
        k += 1
    return f"{wanted}#{k}"


def repair_turn(t: dict[str, Any], field: str, notes: Notes, now: datetime) -> dict[str, Any]:
    t = dict(t)
    if "turn_id" in t:
        t["turn_id"] = _id_text(t["turn_id"])
    role = t.get("role")
    if role is None or (isinstance(role, str) and not role.strip()):
        t.pop("role", None)
    elif isinstance(role, str):
        r = role.strip().lower()
        r = ROLE_ALIASES.get(r, r)
        if r not in ROLES:
            notes.add("unknown role read as user", f"{field}.role", repr(role[:40]))
            if not (isinstance(t.get("speaker"), str) and t["speaker"].strip()):
                t["speaker"] = role.strip()
            r = "user"
        t["role"] = r
    speaker = t.get("speaker")
    if speaker is None:
        t.pop("speaker", None)
    elif isinstance(speaker, str):
        t["speaker"] = speaker.strip()
    elif isinstance(speaker, (int, float)) and not isinstance(speaker, bool):
        t["speaker"] = str(speaker)
    if "content" in t and t["content"] is None:
        notes.add("null content read as empty text", f"{field}.content")
        t["content"] = ""
    elif isinstance(t.get("content"), (int, float)) and not isinstance(t.get("content"), bool):
        t["content"] = str(t["content"])
    if "timestamp" in t:
        t["timestamp"] = normalise_date(t["timestamp"], f"{field}.timestamp", notes, now)
    if t.get("meta") is None and "meta" in t:
        t.pop("meta")
    return t


def repair_conversation(obj: dict[str, Any], now: datetime | None = None) -> tuple[dict[str, Any], Notes]:
    """Clean and repair a canonical conversation object before validation (see the module doc).

    Shapes that cannot be repaired (no sessions, a turn that is not an object …) are left for
    validation to report as errors.
    """
    now = now or datetime.now()
    notes = Notes()
    obj = clean_strings(obj, notes, keep=ID_KEYS)  # ids: repaired below, before -> after in the warning
    obj["conversation_id"] = policy_id(_id_text(obj.get("conversation_id")), "conversation_id", notes)
    if obj["conversation_id"] is None:
        del obj["conversation_id"]
    if obj.get("user_id") is None:
        obj.pop("user_id", None)
    else:
        obj["user_id"] = policy_id(_id_text(obj["user_id"]), "user_id", notes)
    if obj.get("meta") is None:
        obj.pop("meta", None)
    sessions = obj.get("sessions")
    if not isinstance(sessions, list):
        return obj, notes
    session_ids: set[str] = set()
    turn_ids: set[str] = set()
    out_sessions: list[Any] = []
    for si, s in enumerate(sessions):
        if not isinstance(s, dict):
            out_sessions.append(s)
            continue
        s = dict(s)
        sf = f"sessions.{si}"
        sid = policy_id(_id_text(s.get("session_id")), f"{sf}.session_id", notes, blank_is_missing=True) \
            if isinstance(s.get("session_id"), str) and s["session_id"].strip() else _id_text(s.get("session_id"))
        if sid is None or (isinstance(sid, str) and not sid.strip()):
            sid = f"session-{si + 1}"
            notes.add("missing session id generated", f"{sf}.session_id", sid)
        if isinstance(sid, str):
            if sid in session_ids:
                new = _unique(sid, session_ids)
                notes.add("duplicate session id renamed", f"{sf}.session_id", f"{sid!r} -> {new!r}")
                sid = new
            session_ids.add(sid)
        s["session_id"] = sid
        if "started_at" in s:
            s["started_at"] = normalise_date(s["started_at"], f"{sf}.started_at", notes, now)
        turns = s.get("turns")
        if turns is None:
            if "turns" in s:
                notes.add("null turns read as an empty session", f"{sf}.turns")
            s["turns"] = []
        elif isinstance(turns, list):
            fixed = []
            for ti, t in enumerate(turns):
                if not isinstance(t, dict):
                    fixed.append(t)
                    continue
                tf = f"{sf}.turns.{ti}"
                t = repair_turn(t, tf, notes, now)
                tid = t.get("turn_id")
                if isinstance(tid, str) and tid.strip():
                    tid = policy_id(tid, f"{tf}.turn_id", notes, blank_is_missing=True)
                if tid is None or (isinstance(tid, str) and not tid.strip()):
                    tid = f"{sid}:{ti + 1}"
                    notes.add("missing turn id generated", f"{tf}.turn_id", repr(tid))
                if isinstance(tid, str):
                    if tid in turn_ids:
                        new = _unique(tid, turn_ids)
                        meta = dict(t.get("meta") or {}) if isinstance(t.get("meta") or {}, dict) else t.get("meta")
                        if isinstance(meta, dict):
                            meta.setdefault("source_turn_id", tid)
                        t["meta"] = meta
                        notes.add("duplicate turn id renamed", f"{tf}.turn_id", f"{tid!r} -> {new!r}")
                        tid = new
                    turn_ids.add(tid)
                t["turn_id"] = tid
                fixed.append(t)
            s["turns"] = fixed
        out_sessions.append(s)
    obj["sessions"] = out_sessions
    time_order_notes(out_sessions, notes)
    return obj, notes
