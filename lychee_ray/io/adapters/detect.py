"""Which input format a path holds, and how many conversations it has, before anything is built.

``lychee-ray build`` asks :func:`survey_input` first: the format is detected when not given, a
given format that does not match what the input looks like is refused with what it looks like, and
an input that yields no conversation is refused — all before Ray starts or the store directory is
created. Detection reads suffixes and the first bytes of one file only:

* ``*.parquet`` (or the ``PAR1`` magic) → ``parquet``; ``*.jsonl`` / ``*.ndjson`` → ``jsonl``;
* a JSON file whose first line is a whole object with ``sessions`` → ``jsonl`` (one conversation per line);
* a JSON document naming ``haystack_sessions`` → ``longmemeval``; naming ``session_1`` / ``sample_id`` /
  ``conversation`` → ``locomo``;
* a directory → the format of its files (``.json`` files are sniffed as above).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from lychee_ray.io.adapters import jsonl, locomo, longmemeval, parquet
from lychee_ray.io.adapters.base import is_uri, list_input_files, open_input

# Bytes of a file read to recognise it (a LoCoMo sample names its first session well within this).
SNIFF_BYTES = 64 * 1024
_PARQUET_MAGIC = b"PAR1"
_NAMES = {"jsonl": "JSONL", "locomo": "LoCoMo", "longmemeval": "LongMemEval JSON",
          "parquet": "Parquet"}
_SUFFIX_FORMAT = {**{s: "jsonl" for s in jsonl.SUFFIXES}, **{s: "parquet" for s in parquet.SUFFIXES}}
_JSON_SUFFIXES = set(locomo.SUFFIXES) | set(longmemeval.SUFFIXES)

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
    return _NAMES.get(fmt, fmt)


def sniff_bytes(head: bytes) -> str | None:
    """Format of a file from its first bytes (None when it is none of the known ones)."""
    if head.startswith(_PARQUET_MAGIC):
        return "parquet"
    text = head.decode("utf-8", errors="replace").lstrip("\ufeff \t\r\n")
    if not text.startswith(("{", "[")):
        return None
    first = text.split("\n", 1)[0].strip()
    if first.startswith("{"):
        try:
            obj = json.loads(first, strict=False)
        except json.JSONDecodeError:
            obj = None
        if isinstance(obj, dict) and "sessions" in obj:
            return "jsonl"
    if '"haystack_sessions"' in text or '"haystack_session_ids"' in text:
        return "longmemeval"
    if '"session_1"' in text or '"sample_id"' in text or '"conversation"' in text:
        return "locomo"
    if '"sessions"' in text and '"conversation_id"' in text:
        return "jsonl"
    return None


def _sniff_file(path: str) -> str | None:
    suffix = Path(path).suffix.lower()
    if suffix in _SUFFIX_FORMAT:
        return _SUFFIX_FORMAT[suffix]
    try:
        with open_input(path) as fh:
            return sniff_bytes(fh.read(SNIFF_BYTES))
    except OSError:
        return None


def detect_format(path: str | Path) -> Detection | None:
    """The format ``path`` (a file or directory) looks like, or None when it cannot tell."""
    if is_uri(path):
        fmt = _SUFFIX_FORMAT.get(Path(str(path)).suffix.lower())
        return Detection(fmt, f"a {format_name(fmt)} file") if fmt else None
    p = Path(path)
    if p.is_file():
        fmt = _sniff_file(str(p))
        return Detection(fmt, f"a {format_name(fmt)} file") if fmt else None
    if not p.is_dir():
        return None
    by_suffix: dict[str, list[Path]] = {}
    for f in p.iterdir():
        if f.is_file():
            by_suffix.setdefault(f.suffix.lower(), []).append(f)
    found: dict[str, int] = {}
    for suffix, files in by_suffix.items():
        if suffix in _SUFFIX_FORMAT:
            found[_SUFFIX_FORMAT[suffix]] = found.get(_SUFFIX_FORMAT[suffix], 0) + len(files)
        elif suffix in _JSON_SUFFIXES:
            fmt = _sniff_file(str(sorted(files)[0]))
            if fmt:
                found[fmt] = found.get(fmt, 0) + len(files)
    if len(found) != 1:
        return None
    fmt, n = next(iter(found.items()))
    suffixes = sorted(s for s, fs in by_suffix.items() if s in _SUFFIX_FORMAT or s in _JSON_SUFFIXES)
    return Detection(fmt, f"a {format_name(fmt)} directory ({n} {'/'.join(suffixes)} file{'s' if n != 1 else ''})")


def count_conversations(fmt: str, files: list[str]) -> int:
    """Conversations the files hold: JSONL non-empty lines, Parquet rows, JSON samples/instances.

    Unreadable content counts as one item each (the build reports it as an error), so zero means
    the files are really empty.
    """
    n = 0
    for f in files:
        if fmt == "jsonl":
            with open_input(f) as fh:
                n += sum(1 for line in fh if line.strip())
        elif fmt == "parquet":
            import pyarrow.parquet as pq

            try:
                n += pq.ParquetFile(open_input(f)).metadata.num_rows
            except Exception:  # noqa: BLE001 — a corrupt file is reported by the build, not here
                n += 1
        else:
            with open_input(f) as fh:
                data = fh.read()
            if not data.strip():
                continue
            try:
                doc = json.loads(data.decode("utf-8", errors="replace").lstrip("\ufeff"), strict=False)
            except json.JSONDecodeError:
                n += 1
                continue
            n += len(doc) if isinstance(doc, list) else 1
    return n


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
        if detected is None:
            raise InputError("unknown_format", f"cannot tell the format of {path}; give --format "
                                               f"({', '.join(_NAMES)})")
        fmt = detected.format
    elif detected is not None and detected.format != fmt:
        raise InputError("format_mismatch", f"{path} looks like {detected.looks_like}, not {fmt}: "
                                            f"use --format {detected.format} (or leave --format out)")
    from lychee_ray.io.adapters import SUFFIXES

    try:
        files = list_input_files(path, SUFFIXES[fmt])
    except FileNotFoundError as e:
        raise InputError("not_found", str(e)) from e
    if not files:
        raise InputError("no_files", f"no {'/'.join(SUFFIXES[fmt])} files in {path} (--format {fmt})")
    n = count_conversations(fmt, files)
    if n == 0:
        what = "file is" if len(files) == 1 else f"{len(files)} files are"
        raise InputError("empty", f"no conversations in {path}: the {what} empty")
    return InputSurvey(fmt, files, n, detected=given is None)


__all__ = ["Detection", "InputError", "InputErrorKind", "InputSurvey", "SNIFF_BYTES", "count_conversations",
           "detect_format", "format_name", "sniff_bytes", "survey_input"]
