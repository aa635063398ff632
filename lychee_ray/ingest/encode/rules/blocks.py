"""A turn's text as blocks: prose, fenced code, tables and drafted documents (letters, e-mails, wills).

An assistant answer is not a string of sentences: a code block is one artifact whatever its line
count, a table is one, and a letter the assistant drafted *for* the user is the user's letter, not
the assistant's statements. Splitting the text into blocks first lets the encoder write one record
per artifact and keep the narrative prose apart, the only text whose persons it may rewrite.

Rules (line-based, markdown as chat models write it):

* **code** — a fenced block (```` ``` ```` or ``~~~``, the fence's word is the language); an
  unclosed fence runs to the end of the text;
* **table** — at least two consecutive lines that start with ``|`` and hold another ``|``;
* **document** — a drafted letter, e-mail, message or will: a region between ``---`` rules (or from
  a rule to the end) that holds a salutation ("Dear …,", "Hi Leslie,"), a ``Subject:`` line, a
  closing ("Sincerely,", "Best regards,") or a will's formula ("hereby declare", "Last Will and
  Testament"); without rules, from a salutation line to its closing and the signature lines after it
  (a salutation without a closing is prose: an example phrase, not a draft);
* **prose** — everything else, in order.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

BlockKind = Literal["prose", "code", "table", "document"]

_FENCE = re.compile(r"^\s{0,3}(```+|~~~+)\s*([\w+#.-]*)")
_TABLE_LINE = re.compile(r"^\s*\|.*\|")
_RULE = re.compile(r"^\s{0,3}(?:-{3,}|\*{3,}|_{3,})\s*$")
_SALUTATION = re.compile(
    r"^\s*[\"“*]*(?:dear|hi|hello|hey|greetings|to whom it may concern)\b[^\n]{0,80}?[,:!]?[*\"”]*\s*$", re.I)
_SUBJECT = re.compile(r"^\s*\**(?:subject|re)\s*\**\s*:\s*\**\s*\S", re.I)
_CLOSING = re.compile(
    r"^\s*[\"“*]*(?:sincerely|best regards|kind regards|warm regards|warmest regards|regards|best wishes|best|"
    r"yours (?:truly|sincerely|faithfully)|yours|thank you|thanks|many thanks|cheers|respectfully|with gratitude|"
    r"warmly|all the best|love)\b[^\n]{0,30}[,.!]?[*\"”]*\s*$", re.I)
_WILL = re.compile(r"last will and testament|\bhereby (?:declare|revoke|appoint|bequeath|give)|\bbequeath\b", re.I)
# Lines after a closing that still belong to the document: a name, a placeholder, a contact line.
_SIGNATURE_LINES = 4
_SIGNATURE_MAX_CHARS = 80


@dataclass
class Block:
    """One block of a turn: its kind, its text (fences and rules removed) and, for code, its language."""

    kind: BlockKind
    text: str
    lang: str = ""


def _is_document(lines: list[str]) -> bool:
    """Whether a region reads as a drafted document (a salutation, subject, closing or will formula)."""
    body = "\n".join(lines)
    if _WILL.search(body):
        return True
    sal = any(_SALUTATION.match(x) for x in lines)
    subj = any(_SUBJECT.match(x) for x in lines)
    close = any(_CLOSING.match(x) for x in lines)
    return (sal and (close or subj)) or (subj and close) or (sal and len(lines) >= 3)


def _code_and_tables(text: str) -> list[Block]:
    """Fenced code and tables out; the rest as prose blocks (documents are found in them next)."""
    out: list[Block] = []
    prose: list[str] = []
    lines = text.split("\n")
    i = 0

    def flush() -> None:
        if any(x.strip() for x in prose):
            out.append(Block("prose", "\n".join(prose)))
        prose.clear()

    while i < len(lines):
        line = lines[i]
        fence = _FENCE.match(line)
        if fence:
            mark, lang = fence.group(1), fence.group(2)
            j = i + 1
            while j < len(lines) and not lines[j].strip().startswith(mark[:3]):
                j += 1
            flush()
            out.append(Block("code", "\n".join(lines[i + 1:j]), lang.lower()))
            i = j + 1
            continue
        if _TABLE_LINE.match(line) and i + 1 < len(lines) and _TABLE_LINE.match(lines[i + 1]):
            j = i
            while j < len(lines) and _TABLE_LINE.match(lines[j]):
                j += 1
            flush()
            out.append(Block("table", "\n".join(lines[i:j])))
            i = j
            continue
        prose.append(line)
        i += 1
    flush()
    return out


def _ruled_documents(lines: list[str]) -> list[Block] | None:
    """Regions between ``---`` rules that read as documents; None when no region does."""
    cuts = [i for i, x in enumerate(lines) if _RULE.match(x)]
    if not cuts:
        return None
    bounds = [-1, *cuts, len(lines)]
    out: list[Block] = []
    found = False
    for a, b in zip(bounds, bounds[1:], strict=False):
        region = lines[a + 1:b]
        if not any(x.strip() for x in region):
            continue
        doc = a >= 0 and _is_document(region)  # the text before the first rule introduces, never drafts
        found = found or doc
        out.append(Block("document" if doc else "prose", "\n".join(region)))
    return out if found else None


def _salutation_documents(lines: list[str]) -> list[Block]:
    """From a salutation line to its closing and signature; a salutation without a closing is prose."""
    out: list[Block] = []
    start = 0
    i = 0
    while i < len(lines):
        if _SALUTATION.match(lines[i]) or (_SUBJECT.match(lines[i]) and i + 1 < len(lines)):
            close = next((j for j in range(i + 1, len(lines)) if _CLOSING.match(lines[j])), None)
            if close is not None:
                end = close + 1
                while end < len(lines) and end - close <= _SIGNATURE_LINES and lines[end].strip() \
                        and len(lines[end]) <= _SIGNATURE_MAX_CHARS:
                    end += 1
                if any(x.strip() for x in lines[start:i]):
                    out.append(Block("prose", "\n".join(lines[start:i])))
                out.append(Block("document", "\n".join(lines[i:end])))
                start = i = end
                continue
        i += 1
    if any(x.strip() for x in lines[start:]):
        out.append(Block("prose", "\n".join(lines[start:])))
    return out


def split_blocks(text: str) -> list[Block]:
    """``text`` as blocks in order (see the module doc); a text without structure is one prose block."""
    out: list[Block] = []
    for b in _code_and_tables(text):
        if b.kind != "prose":
            out.append(b)
            continue
        lines = b.text.split("\n")
        ruled = _ruled_documents(lines)
        parts = ruled if ruled is not None else [Block("prose", b.text)]
        for p in parts:
            out.extend(_salutation_documents(p.text.split("\n")) if p.kind == "prose" else [p])
    return out


__all__ = ["Block", "BlockKind", "split_blocks"]
