"""Which input format a path holds, and how many conversations it has, before anything is built.

``lychee-ray build`` asks :func:`survey_input` first: the format is detected when not given, a
given format that does not match what the input looks like is refused with what it looks like, and
an input that yields no conversation is refused — all before Ray starts or the store directory is
created. Detection reads the first bytes of one file (its first line whole, for JSON lines) and asks every
registered format in turn (:mod:`.registry`): a suffix is not enough (``.jsonl`` holds canonical
conversations and chat logs alike):

* the ``PAR1`` magic → ``parquet``;
* a first object with ``sessions`` → ``jsonl`` (canonical, one conversation per line);
* a ``mapping`` tree → ``chatgpt``; ``messages`` with a top-level ``system`` or ``tool_use`` /
  ``tool_result`` blocks → ``anthropic``; other ``messages`` lists → ``openai``;
* a JSON document naming ``haystack_sessions`` → ``longmemeval``; naming ``session_1`` / ``sample_id`` /
  ``conversation`` → ``locomo``;
* a directory → the format of its files.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from lychee_ray.io.adapters.base import is_uri, list_input_files, open_input
from lychee_ray.io.adapters.registry import adapter, adapters, format_names, sniff

# Bytes of a file read to recognise it (a LoCoMo sample names its first session well within this).
SNIFF_BYTES = 64 * 1024
# A first line of JSON lines is read whole up to this many bytes (one agent log can be long).
SNIFF_LINE_BYTES = 8 * 1024 * 1024
_INPUT_SUFFIXES = {s for a in adapters() for s in a.suffixes}

InputErrorKind = Literal["not_found", "unknown_format", "format_mismatch", "no_files", "empty"]


class InputError(ValueError):
    """The input cannot be built: ``kind`` says why, the message says what to do."""

    def __init__(self, kind: InputErrorKind, message: str) -> None:
        super().__init__(message)
        self.kind: InputErrorKind = kind


@dataclass(frozen=True)
class Detection:
    """A detected format and the words that say why (``a LoCoMo directory (10 .json files)``)."""

    format: str
    looks_like: str


@dataclass(frozen=True)
class InputSurvey:
    """What a build will read: the format, its files and how many conversations they hold."""

    format: str
    files: list[str]
    conversations: int
    detected: bool  # True when the format was detected, not given


def format_name(fmt: str) -> str:
    """Human name of a format (``locomo`` → ``LoCoMo``)."""
    try:
        return adapter(fmt).title
    except ValueError:
        return fmt


def sniff_bytes(head: bytes) -> str | None:
    """Format of a file from its first bytes (None when it is none of the known ones)."""
    return sniff(head)


def _sniff_file(path: str) -> str | None:
    try:
        with open_input(path) as fh:
            head = fh.read(SNIFF_BYTES)
            if b"\n" not in head and len(head) == SNIFF_BYTES:  # a long first line: read it whole (bounded)
                head += fh.readline(SNIFF_LINE_BYTES)
    except OSError:
        return None
    return sniff_bytes(head)


def _foreign_content(path: str, fmt: str) -> str | None:
    """What a file given as ``fmt`` plainly is instead (``comma-separated text (CSV)``), or None
    when it may well be ``fmt``: a format with magic bytes needs them; a JSON format needs a line of
    its first bytes to open a JSON object or array (one bad line is the build's to report, with
    its line number, not a reason to refuse the file)."""
    try:
        with open_input(path) as fh:
            head = fh.read(SNIFF_BYTES)
    except OSError:
        return None
    if not head.strip():
        return None
    magic = adapter(fmt).magic
    text = head.decode("utf-8", errors="replace")
    lines = [ln.lstrip("\ufeff \t\r") for ln in text.splitlines() if ln.strip()]
    if head.startswith(magic) if magic is not None else any(ln.startswith(("{", "[")) for ln in lines):
        return None
    first = lines[0] if lines else ""
    if "\ufffd" in first or any(ord(ch) < 32 and ch not in "\t" for ch in first):
        return "a binary file"
    if "," in first:
        return "comma-separated text (CSV)"
    if "\t" in first:
        return "tab-separated text"
    return "plain text (not JSON)"


def _is_empty_file(path: str | Path) -> bool:
    """A file with nothing but whitespace (no format can be told from it, and none is needed)."""
    try:
        with open_input(path) as fh:
            return not fh.read(SNIFF_BYTES).strip() and not fh.read(1)
    except (OSError, IsADirectoryError):
        return False


def detect_format(path: str | Path) -> Detection | None:
    """The format ``path`` (a file or directory) looks like, or None when it cannot tell."""
    if is_uri(path) or Path(path).is_file():
        fmt = _sniff_file(str(path))
        return Detection(fmt, f"a {format_name(fmt)} file") if fmt else None
    p = Path(path)
    if not p.is_dir():
        return None
    by_suffix: dict[str, list[Path]] = {}
    for f in p.iterdir():
        if f.is_file() and f.suffix.lower() in _INPUT_SUFFIXES:
            by_suffix.setdefault(f.suffix.lower(), []).append(f)
    found: dict[str, int] = {}
    for files in by_suffix.values():  # one file of each suffix speaks for its kind
        fmt = _sniff_file(str(sorted(files)[0]))
        if fmt:
            found[fmt] = found.get(fmt, 0) + len(files)
    if len(found) != 1:
        return None
    fmt, n = next(iter(found.items()))
    suffixes = sorted(by_suffix)
    return Detection(fmt, f"a {format_name(fmt)} directory ({n} {'/'.join(suffixes)} file{'s' if n != 1 else ''})")


def count_conversations(fmt: str, files: list[str]) -> int:
    """Conversations the files hold: JSONL non-empty lines, Parquet rows, JSON samples/instances.

    Unreadable content counts as one item each (the build reports it as an error), so zero means
    the files are really empty.
    """
    count = adapter(fmt).count
    return sum(count(f) for f in files)


def survey_input(path: str | Path, fmt: str | None = None) -> InputSurvey:
    """Check ``path`` before a build; :class:`InputError` names the problem and the fix.

    ``fmt`` None: detected (``unknown_format`` when it cannot be). A given ``fmt`` that the input
    clearly is not: ``format_mismatch``. No files of the format, or no conversation in them: ``no_files``
    / ``empty`` (with the format the input looks like, when that is another one).
    """
    if not is_uri(path) and not Path(path).exists():
        raise InputError("not_found", f"input not found: {path}")
    given = fmt
    detected = detect_format(path)
    if fmt is None:
        if detected is None and _is_empty_file(path):
            raise InputError("empty", f"no conversations in {path}: the file is empty")
        if detected is None:
            raise InputError("unknown_format", f"cannot tell the format of {path}; give --format "
                                               f"({', '.join(format_names())})")
        fmt = detected.format
    elif detected is not None and detected.format != fmt:
        raise InputError("format_mismatch", f"{path} looks like {detected.looks_like}, not {fmt}: "
                                            f"use --format {detected.format} (or leave --format out)")
    suffixes = adapter(fmt).suffixes
    try:
        files = list_input_files(path, suffixes)
    except FileNotFoundError as e:
        raise InputError("not_found", str(e)) from e
    if not files:
        raise InputError("no_files", f"no {'/'.join(suffixes)} files in {path} (--format {fmt})")
    foreign = _foreign_content(files[0], fmt) if given is not None and detected is None else None
    if foreign is not None:
        where = path if len(files) == 1 else files[0]
        raise InputError("format_mismatch", f"{where} looks like {foreign}, not {fmt}: give {format_name(fmt)} input "
                                            f"(docs/data-format.md) or the --format it is in")
    n = count_conversations(fmt, files)
    if n == 0:
        what = "file is" if len(files) == 1 else f"{len(files)} files are"
        raise InputError("empty", f"no conversations in {path}: the {what} empty")
    return InputSurvey(fmt, files, n, detected=given is None)


__all__ = ["Detection", "InputError", "InputErrorKind", "InputSurvey", "SNIFF_BYTES", "count_conversations",
           "detect_format", "format_name", "sniff_bytes", "survey_input"]
