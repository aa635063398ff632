"""Artifact records: ONE record per code block, table or drafted document of a turn.

What a later question asks about an artifact is what it was, for whom, and its specifics — the
function and table names, the file path, the port, the names and figures a letter states — so the
record says that, verbatim, and nothing of the artifact is rewritten: code, a table's cells and a
draft keep their own "I" and "you" (a cover letter's "I am eager to bring my experience" is the
user's voice, written by the assistant; it never becomes the assistant's fact).

* code → "The assistant wrote Python code for the user (Define the Transaction model): defines
  Transaction, add_transaction(); imports flask_sqlalchemy; strings 'sqlite:///budget.db'; settings
  port=5000 (14 lines)."
* table → "The assistant produced a table for the user (Weekly plan): columns Day | Task | Hours;
  rows Monday | Outline | 2; …"
* document → "The assistant drafted a cover letter for the user, addressed to Hiring Manager
  (subject: …), naming Island Media Group, Senior Producer, 35%, 2022."

Every record is type ``event`` (something produced in the conversation, on its session's date) with
``artifact`` = code / table / document (docs/llm-quality.md "Assistant chats" says why not an eighth
type).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from lychee_ray.ingest.encode.base import RecordDraft
from lychee_ray.ingest.encode.rules.blocks import Block
from lychee_ray.ingest.encode.rules.metadata import extract_topics
from lychee_ray.ingest.nodes import is_entity_name

# Code: names a block defines, imports and uses (language-agnostic patterns, in order of appearance).
_DEFINES = re.compile(
    r"\b(?:def|class|function|fn|func|interface|struct|enum|type|module)\s+([A-Za-z_$][\w$]*)"
    r"|\b(?:const|let|var)\s+([A-Za-z_$][\w$]*)\s*="
    r"|\bcreate\s+(?:table|view|index|database)\s+(?:if\s+not\s+exists\s+)?[`\"]?([\w.]+)"
    r"|^\s*([A-Za-z_][\w]*)\s*=\s*(?:lambda\b|\w+\()"
    r"|^\s*([.#]?[A-Za-z][\w-]*(?:\s+[.#]?[\w-]+)*)\s*\{\s*$",
    re.I | re.M)
_IMPORTS = re.compile(r"^\s*(?:from\s+([\w.]+)\s+import|import\s+([\w.]+)|#include\s*[<\"]([\w./]+))"
                      r"|\brequire\(\s*['\"]([^'\"]+)['\"]\)|\bfrom\s+['\"]([^'\"]+)['\"]", re.M)
_ROUTES = re.compile(r"\.(?:route|get|post|put|delete|patch)\(\s*['\"]([^'\"]+)['\"]", re.I)
_STRINGS = re.compile(r"['\"]([^'\"\s]{3,80})['\"]")
_SETTINGS = re.compile(r"\b([A-Za-z_][\w]*)\s*[=:]\s*(\d[\d_.]*)\b")
_ELEMENT_IDS = re.compile(r"\bid\s*=\s*['\"]([\w-]+)['\"]")
_LANG_HINTS = (
    ("sql", re.compile(r"^\s*(?:create|select|insert|update|delete|alter)\b", re.I | re.M)),
    ("html", re.compile(r"<(?:html|div|body|head|form|section|script|p|span|ul|button)\b", re.I)),
    ("python", re.compile(r"^\s*(?:def |class |import |from \w+ import|@\w+)", re.M)),
    ("javascript", re.compile(r"\b(?:function|const|let|=>|document\.|console\.)", re.M)),
    ("css", re.compile(r"^\s*[.#]?[\w-]+\s*\{[^}]*:\s*[^}]*\}?", re.M)),
    ("shell", re.compile(r"^\s*(?:\$ |pip |npm |git |cd |mkdir |export |sudo )", re.M)),
)
_LANG_NAMES = {"py": "Python", "python": "Python", "js": "JavaScript", "javascript": "JavaScript", "ts": "TypeScript",
               "typescript": "TypeScript", "sql": "SQL", "html": "HTML", "css": "CSS", "bash": "shell", "sh": "shell",
               "shell": "shell", "json": "JSON", "yaml": "YAML", "yml": "YAML", "java": "Java", "go": "Go",
               "rust": "Rust", "c": "C", "cpp": "C++", "jsx": "JSX", "sqlite": "SQL", "plaintext": "", "text": ""}
_PLACEHOLDER = re.compile(r"^\[[^\]]*\]$")
# Document kinds, from the document itself or the prose that introduces it ("Here's a sample cover letter:").
_DOC_KINDS = (
    ("will", re.compile(r"\b(?:last will|testament|hereby (?:declare|revoke|bequeath)|bequeath)\b", re.I)),
    ("cover letter", re.compile(r"\bcover letter\b|\bhiring manager\b", re.I)),
    ("thank-you note", re.compile(r"\bthank[- ]you (?:note|letter|message|e-?mail)\b", re.I)),
    ("e-mail", re.compile(r"\be-?mail\b|^\s*\**subject\b", re.I | re.M)),
    ("message", re.compile(r"\bmessage\b|^\s*\**(?:hi|hello|hey)\b", re.I | re.M)),
    ("letter", re.compile(r"\bletter\b|^\s*\**dear\b", re.I | re.M)),
)
_ADDRESSEE = re.compile(r"^\s*[\"“*]*(?:dear|hi|hello|hey)\s+([^,\n:!]{2,60})", re.I | re.M)
_DOC_SUBJECT = re.compile(r"^\s*\**(?:subject|re)\s*\**\s*:\s*\**\s*(.+?)\s*\**\s*$", re.I | re.M)
# A document's specifics: capitalised spans, figures (35%, $500,000, 2022), dates.
_CAP_SPAN = re.compile(r"\b[A-Z][\w'&-]*(?:[ \t]+(?:(?:of|the|and|de|for|&)[ \t]+)?[A-Z][\w'&-]*)*")
_MID_CAP = re.compile(r"(?<=[a-z,;][ \t])([A-Z][\w'&-]+)")
_OPENS_SENTENCE = re.compile(r"(?:^|[.!?:]\s+|\n\s*)[\"“*(\[]*$")
_FIGURE = re.compile(r"[$€£]?\d[\d,.:]*(?:\s?%|\s?(?:k|m|pm|am|years?|hours?|weeks?|days?|months?)\b)?", re.I)
_MONTH_DAY = re.compile(r"\b(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]*\.? \d{1,2}(?:, \d{4})?\b")
# Capitalised words that open sentences of any letter: not specifics of a document.
_COMMON_CAPS = frozenset(
    """I I'm I've I'll I'd A An The This That These Those It It's My Your Our We He She They In On At For With As
    By To From Thank Thanks Please Dear Hi Hello Hey Sincerely Best Regards Kind Warm Yours Subject Re If When
    While Throughout Over Additionally Also And But So Looking Let Just What How Why Here There Today""".split())


@dataclass
class ArtifactLimits:
    """Bounds of artifact records (``encoder.rules.assistant``)."""

    max_chars: int
    max_identifiers: int
    max_topics: int
    max_entities: int


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    head = text[:limit].rsplit(" ", 1)[0]
    return (head or text[:limit]).rstrip(",;:") + " …"


def code_language(block: Block) -> str:
    """The block's language: its fence word, else a guess from its first lines ("" when unknown)."""
    if block.lang:
        return _LANG_NAMES.get(block.lang, block.lang)
    head = "\n".join(block.text.split("\n")[:40])
    for name, pat in _LANG_HINTS:
        if pat.search(head):
            return _LANG_NAMES.get(name, name)
    return ""


def code_identifiers(code: str, limit: int) -> dict[str, list[str]]:
    """What a code block defines, imports, routes, names in strings (paths, URLs, file names) and sets
    to numbers — each list in order of appearance, verbatim, at most ``limit`` names in all."""
    groups: dict[str, list[str]] = {"defines": [], "imports": [], "routes": [], "strings": [], "settings": [], "ids": []}
    seen: set[str] = set()
    left = [limit]

    def add(group: str, name: str) -> None:
        name = name.strip()
        if name and name not in seen and left[0] > 0:
            seen.add(name)
            groups[group].append(name)
            left[0] -= 1

    for m in _DEFINES.finditer(code):
        name = next(g for g in m.groups() if g)
        is_call = re.search(rf"\b(?:def|function|fn|func)\s+{re.escape(name)}\b", code) is not None
        add("defines", f"{name}()" if is_call else name)
    for m in _IMPORTS.finditer(code):
        add("imports", next(g for g in m.groups() if g))
    for m in _ROUTES.finditer(code):
        add("routes", m.group(1))
    for m in _ELEMENT_IDS.finditer(code):
        add("ids", m.group(1))
    for m in _STRINGS.finditer(code):
        s = m.group(1)
        if any(c in s for c in "/.:_\\") and not s.startswith(("%", "{")):
            add("strings", f"'{s}'")
    for m in _SETTINGS.finditer(code):
        add("settings", f"{m.group(1)}={m.group(2)}")
    return groups


def _identifier_text(groups: dict[str, list[str]]) -> str:
    labels = {"defines": "defines", "imports": "imports", "routes": "routes", "ids": "element ids",
              "strings": "strings", "settings": "settings"}
    return "; ".join(f"{labels[k]} {', '.join(v)}" for k, v in groups.items() if v)


def _entities(names: list[str], limit: int) -> list[str]:
    """Names among ``names`` (not a table's row numbers or time slots: :func:`is_entity_name`), once each."""
    return list(dict.fromkeys(n.strip("'()") for n in names if is_entity_name(n.strip("'()"))))[:limit]


def code_record(block: Block, author: str, for_whom: str, purpose: str, turn_index: int, lim: ArtifactLimits) -> RecordDraft:
    """The one record of a code block (see the module doc); ``purpose`` is the narrative line that
    introduced it ("" when none)."""
    lang = code_language(block)
    groups = code_identifiers(block.text, lim.max_identifiers)
    lines = sum(1 for x in block.text.split("\n") if x.strip())
    what = f"{lang} code" if lang else "code"
    verb = "wrote" if author.lower() != "the user" else "shared"
    head = f"{author} {verb} {what}{for_whom}{f' ({purpose})' if purpose else ''}"
    ids = _identifier_text(groups)
    text = f"{head}: {ids} ({lines} lines)." if ids else f"{head} ({lines} lines): {_first_code_line(block.text)}"
    names = [n for k in ("defines", "routes", "strings", "imports", "ids") for n in groups[k]]
    topics = ([lang.lower()] if lang else []) + extract_topics(purpose, set(), lim.max_topics, True)
    return RecordDraft(type="event", text=_cut(text, lim.max_chars), entities=_entities(names, lim.max_entities),
                       topics=list(dict.fromkeys(["code", *topics]))[: lim.max_topics], source_turns=[turn_index],
                       artifact="code")


def _first_code_line(code: str) -> str:
    line = next((x.strip() for x in code.split("\n") if x.strip()), "")
    return line[:120]


def _cells(line: str) -> list[str]:
    return [c.strip().strip("*").strip() for c in line.strip().strip("|").split("|")]


def table_record(block: Block, author: str, for_whom: str, purpose: str, turn_index: int, lim: ArtifactLimits) -> RecordDraft:
    """The one record of a table: its columns and rows, cells verbatim, cut at ``max_chars``."""
    rows = [_cells(x) for x in block.text.split("\n") if x.strip() and not re.fullmatch(r"[\s|:\-]+", x)]
    header, body = (rows[0], rows[1:]) if rows else ([], [])
    verb = "produced" if author.lower() != "the user" else "shared"
    head = f"{author} {verb} a table{for_whom}{f' ({purpose})' if purpose else ''}"
    parts = [f"columns {' | '.join(header)}"] if header else []
    if body:
        parts.append("rows " + "; ".join(" | ".join(r) for r in body))
    text = f"{head}: {', '.join(parts)}."
    names = [c for r in rows for c in r[:1] if c]
    topics = extract_topics(" ".join([purpose, *header]), set(), lim.max_topics, True)
    return RecordDraft(type="event", text=_cut(text, lim.max_chars), entities=_entities(names, lim.max_entities),
                       topics=list(dict.fromkeys(["table", *topics]))[: lim.max_topics], source_turns=[turn_index],
                       artifact="table")


def document_kind(block: Block, intro: str) -> str:
    """"cover letter", "e-mail", "will", … from the prose that introduced it, else from the draft."""
    for source in (intro, block.text):
        for name, pat in _DOC_KINDS:
            if source and pat.search(source):
                return name
    return "document"


def document_specifics(text: str, limit: int) -> list[str]:
    """Names and figures a draft states, verbatim and in order: capitalised spans (not sentence
    openers, not ``[placeholders]``), month-day dates, numbers with their unit."""
    out: list[str] = []
    clean = re.sub(r"\[[^\]]*\]", " ", text.replace("*", " "))
    mid = set(_MID_CAP.findall(clean))
    for m in _MONTH_DAY.finditer(clean):
        out.append(m.group(0))
    for m in _CAP_SPAN.finditer(clean):
        span = m.group(0).strip()
        words = span.split()
        while words and words[0] in _COMMON_CAPS:
            words.pop(0)
        if len(words) == 1 and _OPENS_SENTENCE.search(clean[: m.start()]) and words[0] not in mid:
            continue  # "Given", "Specifically": capitalised for opening a sentence
        span = " ".join(words)
        if len(span) > 1 and not _PLACEHOLDER.match(span) and not any(span in d for d in out):
            out.append(span)
    for m in _FIGURE.finditer(clean):
        fig = m.group(0).strip().rstrip(",.:")
        if fig and any(c.isdigit() for c in fig) and not any(fig in d for d in out):
            out.append(fig)
    return list(dict.fromkeys(out))[:limit]


def document_record(block: Block, author: str, for_whom: str, intro: str, turn_index: int, lim: ArtifactLimits) -> RecordDraft:
    """The one record of a drafted document: its kind, for whom, its addressee and subject, and the
    names and figures it states; the draft's own words are never rewritten or attributed."""
    kind = document_kind(block, intro)
    to = _ADDRESSEE.search(block.text)
    raw_to = to.group(1).strip().strip("*\"”") if to else ""
    addressee = "" if raw_to.startswith("[") else raw_to
    subject = _DOC_SUBJECT.search(block.text)
    verb = "drafted" if author.lower() != "the user" else "shared"
    article = "an" if kind[:1] in "aeiou" else "a"
    text = f"{author} {verb} {article} {kind}{for_whom}"
    if addressee:
        text += f", addressed to {addressee}"
    if subject:
        text += f" (subject: {subject.group(1).strip()})"
    subj = subject.group(1) if subject else ""
    specifics = [s for s in document_specifics(block.text, lim.max_identifiers) if s != addressee and s not in subj]
    if specifics:
        text += f", naming {', '.join(specifics)}"
    topics = extract_topics(" ".join([kind, subject.group(1) if subject else ""]), set(), lim.max_topics, True)
    return RecordDraft(type="event", text=_cut(text + ".", lim.max_chars),
                       entities=_entities([addressee, *specifics] if addressee else specifics, lim.max_entities),
                       topics=list(dict.fromkeys([kind, *topics]))[: lim.max_topics], source_turns=[turn_index],
                       artifact="document")


__all__ = ["ArtifactLimits", "code_identifiers", "code_language", "code_record", "document_kind", "document_record",
           "document_specifics", "table_record"]
