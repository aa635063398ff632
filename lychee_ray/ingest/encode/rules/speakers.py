"""Who is who in a segment: display names, aliases and nicknames, the other speaker, the resolution note."""

from __future__ import annotations

import re

from lychee_ray.ingest.encode.base import EncodeRequest, SegmentTurn

# A capitalised word used as a vocative ("Hey Mel!", "Thanks, Mel."): a possible nickname.
_VOCATIVE_WORD = re.compile(r"(?:\b(?i:hey|hi|hello|thanks|thank you|congrats|wow|yeah|yes)\s*,?\s+|,\s*)([A-Z][a-z]{2,})\s*[!,.?]")
# A nickname is a name prefix of at least this many letters.
_MIN_NICKNAME = 3
# A capitalised word right after a lowercase word or a comma: capitalised for being a name, not a sentence start.
_MID_SENTENCE_CAP = re.compile(r"(?<=[a-z,;]\s)([A-Z][A-Za-z'&-]+)")
_LAST_ENTITIES = re.compile(r"last entities: ([^;]*)")
# Entities the resolution note lists at most.
_NOTE_ENTITIES = 5
# Speakers named for their role ("user", "assistant") are shown capitalised.
_ROLE_NAMES = ("user", "assistant", "system", "tool")


def display_name(speaker: str, role: str = "") -> str:
    """Name used in records: role-named speakers ("user", "assistant") become "User"/"Assistant"."""
    s = speaker.strip() or role.strip() or "someone"
    return s.capitalize() if s.lower() in _ROLE_NAMES else s


# Roles that are not parties of the dialogue (a tool's output, the system prompt): never who "you" is.
_NON_PARTY_ROLES = frozenset({"tool", "system"})
_NON_PARTY_NAMES = frozenset(r.capitalize() for r in _NON_PARTY_ROLES)


def segment_names(request: EncodeRequest) -> list[str]:
    """Display names of the segment's speakers (the dialogue's parties: not tools, not the system
    prompt), in order of appearance."""
    return list(dict.fromkeys(display_name(t.speaker, t.role) for t in request.turns if t.role not in _NON_PARTY_ROLES))


def known_names(request: EncodeRequest) -> tuple[list[str], dict[str, str]]:
    """Display names in the segment and conversation (order of appearance) and a lowercase alias → name map."""
    seg = segment_names(request)
    every = list(dict.fromkeys(seg + [display_name(s) for s in request.speakers if s and display_name(s) not in _NON_PARTY_NAMES]))
    known: dict[str, str] = {}
    for name in every:
        known[name.lower()] = name
        first = name.split()[0]
        known.setdefault(first.lower(), name)
    return every, known


def add_nicknames(turns: list[SegmentTurn], all_names: list[str], known: dict[str, str]) -> set[str]:
    """Add name prefixes used as a vocative ("Hey Mel!") to ``known``; returns every lowercase alias."""
    names_low = set(known)
    for t in turns:
        for w in _VOCATIVE_WORD.findall(t.content):
            wl = w.lower()
            if wl not in known:
                for name in all_names:
                    if name.lower().startswith(wl) and len(wl) >= _MIN_NICKNAME:
                        known[wl] = name
                        names_low.add(wl)
    return names_low


def other_speaker(speaker: str, request: EncodeRequest, seg_names: list[str], all_names: list[str]) -> str | None:
    """Whom "you" means in ``speaker``'s turn: the one other speaker, when there is exactly one."""
    others = [n for n in seg_names if n != speaker]
    if len(others) == 1:
        return others[0]
    if not others:
        rest = [n for n in all_names if n != speaker]
        if len(rest) == 1:
            return rest[0]
        roles = {t.role for t in request.turns}
        if speaker == "User" and roles <= {"user"}:
            return "Assistant"
        if speaker == "Assistant":
            return "User"
    return None


def mid_sentence_caps(turns: list[SegmentTurn]) -> set[str]:
    """Words seen capitalised mid-sentence in the segment (so capitalised as names, not as sentence starts)."""
    caps: set[str] = set()
    for t in turns:
        for m in _MID_SENTENCE_CAP.finditer(t.content):
            caps.add(m.group(1).removesuffix("'s"))
    return caps


def resolution_state(seg_names: list[str], entities: list[str], topics: list[str], prev: str) -> str:
    """Short resolution note d_k: who I/you are, last third-party entities and topic."""
    parts = []
    if len(seg_names) == 2:
        a, b = seg_names
        parts.append(f"I/you = {a} or {b} (the turn's speaker / the other)")
    elif seg_names:
        parts.append("speakers: " + ", ".join(seg_names))
    if not entities and prev:
        m = _LAST_ENTITIES.search(prev)
        entities = [e.strip() for e in m.group(1).split(",")] if m else []
    if entities:
        parts.append("last entities: " + ", ".join(entities[:_NOTE_ENTITIES]))
    if topics:
        parts.append("last topic: " + ", ".join(topics))
    return "; ".join(parts)
