"""Reading files of JSON objects, one conversation each: JSONL (one object per line) or one JSON
document (an array of objects, or a single object). Shared by the message-list formats
(``openai``, ``anthropic``, ``chatgpt``); :func:`read_samples` reads the dataset formats' JSON files
(``locomo``, ``longmemeval``: a list of samples, or one sample).

Each object comes with its position: the 1-based line for JSONL, the 1-based item for a JSON
array (reported as the issue's ``line``). A line or item that cannot be read is one located error;
the next one is read as usual. The format check (:data:`Recognise`) lets a reader refuse an object
of another format in the middle of a file with an error naming what it looks like, instead of
reading it wrongly.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from collections.abc import Callable, Iterator

from lychee_ray.io.adapters.base import AdapterItem, InputIssue, decode_text, list_input_files, open_input

# suffixes of files whose whole content is one JSON document (else: one object per line)
JSON_DOCUMENT_SUFFIXES = (".json",)

# obj -> None when the reader can read it, else what it looks like ("a canonical conversation")
Recognise = Callable[[dict[str, Any]], str | None]
Convert = Callable[[dict[str, Any], str, int], AdapterItem]
# (sample, file, index, samples in the file, the file's own issues — given with its first sample only)
ConvertSample = Callable[[dict[str, Any], str, int, int, list[InputIssue] | None], AdapterItem]


def _is_document(path: str, head: bytes) -> bool:
    """A JSON document (array or pretty-printed object) rather than JSON lines."""
    if Path(path).suffix.lower() in JSON_DOCUMENT_SUFFIXES:
        return True
    text = head.decode("utf-8", errors="replace").lstrip("\ufeff \t\r\n")
    return text.startswith("[")


def iter_objects(path: str | Path, suffixes: tuple[str, ...]) -> Iterator[tuple[str, int, dict[str, Any] | None, list[InputIssue]]]:
    """``(file, position, object or None, issues)`` for every object in the files under ``path``."""
    for file in list_input_files(path, suffixes):
        f = str(file)
        with open_input(file) as fh:
            data = fh.read()
        if _is_document(f, data[:64]):
            yield from _document_objects(f, data)
        else:
            yield from _line_objects(f, data)


def _line_objects(f: str, data: bytes) -> Iterator[tuple[str, int, dict[str, Any] | None, list[InputIssue]]]:
    for lineno, raw in enumerate(data.splitlines(), start=1):
        if not raw.strip():
            continue
        text, issues = decode_text(raw, f, lineno)
        try:
            obj = json.loads(text, strict=False)  # raw control characters in strings are read, then cleaned
        except json.JSONDecodeError as e:
            truncated = e.pos >= len(text.rstrip()) or e.msg.startswith("Unterminated")
            msg = f"malformed JSON: {e.msg}: column {e.pos + 1}" + (" (the line ends early: truncated?)" if truncated else "")
            yield f, lineno, None, [*issues, InputIssue(f, msg, line=lineno)]
            continue
        if not isinstance(obj, dict):
            yield f, lineno, None, [*issues, InputIssue(f, "line is not a JSON object", line=lineno)]
            continue
        yield f, lineno, obj, issues


def _document_objects(f: str, data: bytes) -> Iterator[tuple[str, int, dict[str, Any] | None, list[InputIssue]]]:
    text, issues = decode_text(data, f)
    if not text.strip():
        return
    try:
        doc = json.loads(text, strict=False)
    except json.JSONDecodeError as e:
        yield f, e.lineno, None, [*issues, InputIssue(f, f"not valid JSON: {e.msg} (line {e.lineno}, column {e.colno})",
                                                      line=e.lineno)]
        return
    items = doc if isinstance(doc, list) else [doc]
    for i, obj in enumerate(items, start=1):
        if not isinstance(obj, dict):
            yield f, i, None, [*issues, InputIssue(f, f"item {i} is not a JSON object", line=i)]
        else:
            yield f, i, obj, issues
        issues = []  # file-level issues (decoding) go with the first item


def read_objects_as(path: str | Path, suffixes: tuple[str, ...], recognise: Recognise, convert: Convert,
                    format_name: str) -> Iterator[AdapterItem]:
    """Every object under ``path`` converted by ``convert(obj, file, position)``; an object that
    ``recognise`` says is of another format is an error naming it (the rest of the file is read)."""
    for f, pos, obj, issues in iter_objects(path, suffixes):
        if obj is None:
            yield AdapterItem(f, pos, issues=issues)
            continue
        other = recognise(obj)
        if other is not None:
            cid = obj.get("conversation_id") or obj.get("id")
            msg = f"not a {format_name} conversation: this object looks like {other}"
            yield AdapterItem(f, pos, issues=[*issues, InputIssue(f, msg, line=pos,
                                                                  conversation_id=cid if isinstance(cid, str) else None)])
            continue
        item = convert(obj, f, pos)
        item.issues[:0] = issues
        yield item


def read_samples(path: str | Path, suffixes: tuple[str, ...], what: str, convert: ConvertSample) -> Iterator[AdapterItem]:
    """Every sample of the JSON files under ``path`` (each a list of samples, or one sample) converted
    by ``convert``; a file that is not valid JSON, or a sample that is not an object (``what`` names
    it: "sample", "instance"), is one error and the rest is read."""
    for file in list_input_files(path, suffixes):
        f = str(file)
        with open_input(file) as fh:
            text, file_issues = decode_text(fh.read(), f)
        try:
            data = json.loads(text, strict=False)
        except json.JSONDecodeError as e:
            yield AdapterItem(f, issues=[*file_issues, InputIssue(f, f"not valid JSON: {e}")])
            continue
        samples = data if isinstance(data, list) else [data]
        for i, sample in enumerate(samples):
            if not isinstance(sample, dict):
                yield AdapterItem(f, issues=[InputIssue(f, f"{what} {i} is not an object")])
                continue
            yield convert(sample, f, i, len(samples), file_issues if i == 0 else None)


def count_objects(path: str) -> int:
    """Objects one file holds (non-empty lines, or items of a JSON array); unreadable text counts one."""
    with open_input(path) as fh:
        data = fh.read()
    if not data.strip():
        return 0
    if not _is_document(path, data[:64]):
        return sum(1 for line in data.splitlines() if line.strip())
    try:
        doc = json.loads(data.decode("utf-8", errors="replace").lstrip("\ufeff"), strict=False)
    except json.JSONDecodeError:
        return 1
    return len(doc) if isinstance(doc, list) else 1


def first_object(head: bytes) -> dict[str, Any] | None:
    """The first JSON object of a file's first bytes — its first line, or the first item of an array
    when the array's first item fits — or None."""
    text = head.decode("utf-8", errors="replace").lstrip("\ufeff \t\r\n")
    if text.startswith("{"):
        try:
            obj = json.loads(text.split("\n", 1)[0], strict=False)
        except json.JSONDecodeError:
            try:  # a pretty-printed single object that fits in the head
                obj = json.loads(text, strict=False)
            except json.JSONDecodeError:
                return None
        return obj if isinstance(obj, dict) else None
    if text.startswith("["):
        try:
            obj, _ = json.JSONDecoder(strict=False).raw_decode(text[1:].lstrip())
        except json.JSONDecodeError:
            return None
        return obj if isinstance(obj, dict) else None
    return None


__all__ = ["JSON_DOCUMENT_SUFFIXES", "count_objects", "first_object", "iter_objects", "read_objects_as", "read_samples"]
