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
* a JSON array of batches (``batch_number``, ``turns``) → ``beam``;
* a JSON document naming ``haystack_sessions`` → ``longmemeval``; naming ``session_1`` / ``sample_id`` /
  ``conversation`` → ``locomo``;
* a directory → the format of its files (the first file of each suffix speaks for its kind); when
  that is a folder format (:mod:`.units`), the directory is one unit of it. A directory without
  input files at its top is a folder of units: its first subfolder holding input files speaks for
  them, and only a folder format reads subfolders.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from lychee_ray.io.adapters.base import is_uri, open_input
from lychee_ray.io.adapters.registry import adapter, adapters, format_names, sniff
from lychee_ray.io.adapters.units import entries, list_units, path_kind

# Bytes of a file read to recognise it (a LoCoMo sample names its first session well within this).
SNIFF_BYTES = 64 * 1024
# A first line of JSON lines is read whole up to this many bytes (one agent log can be long).
SNIFF_LINE_BYTES = 8 * 1024 * 1024

InputErrorKind = Literal["not_found", "unknown_format", "format_mismatch", "no_files", "empty", "needs_folder"]


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
    """What a build will read: the format, its units (files, or folders for a folder format) and how
    many conversations they hold."""

    format: str
    files: list[str]  # the input units
    conversations: int
    detected: bool  # True when the format was detected, not given

    @property
    def unit(self) -> str:
        """What one unit is: ``file`` or ``folder``."""
        return adapter(self.format).unit


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


def _input_suffixes() -> set[str]:
    """Every registered format's suffixes (read on each call: formats may be registered later)."""
    return {x.lower() for a in adapters() for x in a.suffixes}


def _sniff_folder(folder: str) -> tuple[str, int, list[str]] | None:
    """(format, input files, their suffixes) of the files at a folder's top, when they agree on one
    format; the first file of each suffix (in name order) speaks for its kind."""
    by_suffix: dict[str, list[str]] = {}
    wanted = _input_suffixes()
    for f in entries(folder)[0]:
        suffix = Path(f).suffix.lower()
        if suffix in wanted:
            by_suffix.setdefault(suffix, []).append(f)
    found: dict[str, int] = {}
    for files in by_suffix.values():
        fmt = _sniff_file(files[0])
        if fmt:
            found[fmt] = found.get(fmt, 0) + len(files)
    if len(found) != 1:
        return None
    fmt, n = next(iter(found.items()))
    return fmt, n, sorted(by_suffix)


def detect_format(path: str | Path) -> Detection | None:
    """The format ``path`` (a file, a folder of files, a folder unit or a folder of units) looks
    like, or None when it cannot tell."""
    kind = path_kind(path)
    if kind == "file":
        fmt = _sniff_file(str(path))
        return Detection(fmt, f"a {format_name(fmt)} file") if fmt else None
    if kind != "folder":
        return None
    top = _sniff_folder(str(path))
    if top is not None:
        fmt, n, suffixes = top
        if adapter(fmt).unit == "folder":
            return Detection(fmt, f"a {format_name(fmt)} folder ({n} {'/'.join(suffixes)} file{'s' if n != 1 else ''})")
        return Detection(fmt, f"a {format_name(fmt)} directory ({n} {'/'.join(suffixes)} file{'s' if n != 1 else ''})")
    if any(Path(f).suffix.lower() in _input_suffixes() for f in entries(path)[0]):
        return None  # input files of several formats, or of none known
    for sub in entries(path)[1]:  # a folder of units: the first that holds input files speaks for them
        inner = _sniff_folder(sub)
        if inner is None:
            continue
        a = adapter(inner[0])
        if a.unit != "folder":
            return None  # a file format reads a folder's own files, not its subfolders'
        n = len(list_units(path, a.suffixes, a.unit))
        return Detection(a.name, f"a {a.title} directory ({n} folder{'s' if n != 1 else ''})")
    return None


def count_conversations(fmt: str, files: list[str]) -> int:
    """Conversations the units hold: JSONL non-empty lines, Parquet rows, JSON samples/instances,
    a folder format's own count per folder.

    Unreadable content counts as one item each (the build reports it as an error), so zero means
    the files are really empty.
    """
    count = adapter(fmt).count
    return sum(count(f) for f in files)


def survey_input(path: str | Path, fmt: str | None = None) -> InputSurvey:
    """Check ``path`` before a build; :class:`InputError` names the problem and the fix.

    ``fmt`` None: detected (``unknown_format`` when it cannot be). A given ``fmt`` that the input
    clearly is not: ``format_mismatch``. No files (folders) of the format, or no conversation in
    them: ``no_files`` / ``empty``; a file given to a folder format: ``needs_folder``.
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
    a = adapter(fmt)
    if a.unit == "folder" and path_kind(path) == "file":
        raise InputError("needs_folder", f"--format {fmt} reads a folder per unit ({a.title}): give the folder "
                                         f"holding {path}, or the folder of such folders")
    try:
        files = list_units(path, a.suffixes, a.unit)
    except FileNotFoundError as e:
        raise InputError("not_found", str(e)) from e
    if not files:
        what = (f"{'/'.join(a.suffixes)} files" if a.unit == "file"
                else f"{a.title} folders (folders with {'/'.join(a.suffixes)} files)")
        raise InputError("no_files", f"no {what} in {path} (--format {fmt})")
    foreign = (_foreign_content(files[0], fmt) if given is not None and detected is None and a.unit == "file"
               else None)
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
