"""An append's turns, or a build's input, checked against the stored history (whether an append may
write at all is the decide step's: ingest/decide.py).

:func:`check_history`: a build's input must open with the stored turns unchanged (or be an older
copy whose turns open the stored ones). For appends, one
set of checks for every append path (docs/incremental.md "Appends"): a stored turn id with the
same content is a duplicate, with other content a :class:`HistoryConflict` ``changed``; a turn for a
session that is not the last one is ``reordered``; a malformed field is :class:`InvalidTurns` naming
it. :func:`new_turn_rows` needs only the stored turns' identities (a
:class:`~lychee_ray.ingest.increment.turn_log.TurnLog`: a queued append); :func:`merge_turns` also gives the
whole conversation after the append (an append that segments and encodes).
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from lychee_ray.ingest.increment.errors import HistoryConflict, InvalidTurns, OwnerMismatch
from lychee_ray.ingest.increment.models import AppendRequest, AppendTurn
from lychee_ray.ingest.increment.stored import StoredConversation
from lychee_ray.ingest.increment.turn_log import TurnLog
from lychee_ray.core.conversation import Conversation, Session, Turn, turn_row
from lychee_ray.core.turn_identity import TURN_IDENTITY

# Session id of a conversation created by an append whose turns name no session.
DEFAULT_SESSION_ID = "s1"

# Where a turn sits (checked as order) vs what it says (checked as content).
_POSITION = ("session_id", "session_index", "turn_index")
_CONTENT = tuple(c for c in TURN_IDENTITY if c not in _POSITION and c != "turn_id")


def _differences(row: dict[str, Any], t: AppendTurn, turn: Turn) -> list[str]:
    """Fields in which an appended turn differs from the stored turn of the same id."""
    mine = turn.row_fields()
    out = [k for k in ("role", "speaker", "content", "timestamp", "meta") if row[k] != mine[k]]
    if t.session_id is not None and t.session_id != row["session_id"]:
        out.append("session_id")
    return out


def _invalid(cid: str, e: ValidationError, turn_id: str | None) -> InvalidTurns:
    err = e.errors()[0]
    where = ".".join(str(x) for x in err.get("loc", ()))
    return InvalidTurns(cid, f"turn {turn_id!r}: {where}: {err.get('msg')}" if turn_id else f"{where}: {err.get('msg')}",
                        turn_id=turn_id, field=where or None)


def merge_turns(stored: StoredConversation | None, request: AppendRequest, user_id: str) -> tuple[Conversation, list[str], list[str]]:
    """The conversation after the append, the ids of the new turns and of the duplicates.

    A turn id already stored is a duplicate when it says the same (idempotent retry) and a
    :class:`HistoryConflict` ``changed`` otherwise; a turn for a session that is not the last one is
    ``reordered``. Nothing is partly applied: every check runs before anything is written.
    """
    cid = request.conversation_id
    log = stored.turn_log() if stored is not None else TurnLog(None)
    rows, turns, dups = new_turn_rows(log, request, user_id)
    # conversation() builds new session objects: the new turns can be added to them in place
    sessions = list(stored.conversation().sessions) if stored is not None else []
    for row, turn in zip(rows, turns, strict=False):
        if not sessions or row["session_id"] != sessions[-1].session_id:
            sessions.append(Session(session_id=row["session_id"], started_at=row["session_started_at"]))
        sessions[-1].turns.append(turn)
    if not sessions:
        raise InvalidTurns(cid, "a new conversation needs at least one turn", field="turns")
    try:
        conv = Conversation(conversation_id=cid, user_id=user_id, sessions=sessions)
    except ValidationError as e:
        raise _invalid(cid, e, None) from None
    return conv, [r["turn_id"] for r in rows], dups


def new_turn_rows(log: TurnLog, request: AppendRequest, user_id: str) -> tuple[list[dict[str, Any]], list[Turn], list[str]]:
    """:func:`merge_turns` against a :class:`TurnLog`: the new turns as turns-table rows (numbered
    after the stored ones) and as :class:`Turn` objects, and the duplicates. Same checks, same
    errors: a changed stored turn, a session that is not the last one, an invalid field."""
    cid = request.conversation_id
    sessions = list(log.sessions)
    known_sessions = set(sessions)
    started = log.session_started_at
    in_last = log.last_session_turns
    index = log.last_session_index
    seen: dict[str, AppendTurn] = {}
    rows: list[dict[str, Any]] = []
    turns: list[Turn] = []
    dups: list[str] = []
    for t in request.turns:
        if t.turn_id in seen:
            if seen[t.turn_id] != t:
                raise InvalidTurns(cid, f"turn {t.turn_id!r} appears twice in the request with different content",
                                   turn_id=t.turn_id, field="turn_id")
            continue
        seen[t.turn_id] = t
        try:
            turn = t.to_turn()
        except ValidationError as e:
            raise _invalid(cid, e, t.turn_id) from None
        row = log.rows.get(t.turn_id)
        if row is not None:
            diff = _differences(row, t, turn)
            if diff:
                raise HistoryConflict("changed", cid, t.turn_id, "fields " + ", ".join(diff))
            dups.append(t.turn_id)
            continue
        sid = t.session_id or (sessions[-1] if sessions else DEFAULT_SESSION_ID)
        if not sessions or sid != sessions[-1]:
            if sid in known_sessions:
                raise HistoryConflict("reordered", cid, t.turn_id, f"session {sid!r} is not the conversation's last session")
            try:
                started = Session(session_id=sid, started_at=t.session_started_at or t.timestamp).started_at
            except ValidationError as e:
                raise _invalid(cid, e, t.turn_id) from None
            sessions.append(sid)
            known_sessions.add(sid)
            index += 1
            in_last = 0
        rows.append(turn_row(cid, user_id, sid, index, in_last, started, turn))
        turns.append(turn)
        in_last += 1
    return rows, turns, dups


def check_history(stored: TurnLog, conv: Conversation) -> int:
    """How many turns of ``conv`` are stored ones; raises when the input rewrites history.

    The stored turns (``stored``: their identities) must open ``conv`` in the same order, at the same
    session positions, with the same content (:data:`~lychee_ray.core.turn_identity.TURN_IDENTITY`);
    then all of them are (the rest of ``conv`` is new). ``conv`` may also be an older copy: its turns
    open the stored ones, which go on (turns appended since); then it is ``conv.num_turns``, fewer
    than are stored. Anything else raises :class:`HistoryConflict` (``removed`` / ``reordered`` /
    ``changed``) naming the first stored turn that disagrees; a different owner raises
    :class:`OwnerMismatch`.
    """
    assert stored.marker is not None  # a stored conversation's log
    cid = stored.marker.conversation_id
    if conv.user_id != stored.marker.owner:
        raise OwnerMismatch(cid, stored.marker.owner, conv.user_id)
    new_rows = conv.turn_rows()
    where = {r["turn_id"]: i for i, r in enumerate(new_rows)}
    for i, tid in enumerate(stored.order):
        old = stored.rows[tid]
        j = where.get(tid)
        if j is None:
            if i == len(new_rows):  # every input turn matched the stored one at its place: an older copy
                return i
            raise HistoryConflict("removed", cid, tid)
        new = new_rows[j]
        if j != i or any(old[c] != new[c] for c in _POSITION):
            raise HistoryConflict("reordered", cid, tid,
                                  f"stored as turn {i} (session {old['session_id']!r}), now turn {j} (session {new['session_id']!r})")
        changed = [c for c in _CONTENT if old[c] != new[c]]
        if changed:
            raise HistoryConflict("changed", cid, tid, "fields " + ", ".join(changed))
    return len(stored.order)


__all__ = ["DEFAULT_SESSION_ID", "check_history", "merge_turns", "new_turn_rows"]
