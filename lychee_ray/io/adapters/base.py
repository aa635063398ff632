"""What every adapter yields: conversations, QA items and located input problems."""

from __future__ import annotations

import io
import re
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, BinaryIO
from collections.abc import Iterable, Iterator

from pyarrow import fs
from pydantic import ValidationError

from lychee_ray.core.conversation import Conversation, QAItem
from lychee_ray.io.adapters.clean import repair_conversation


@dataclass(frozen=True)
class InputIssue:
    """A problem in the input, located by file, line and field.

    ``level`` is ``error`` when the conversation (or QA item) could not be converted and
    ``warning`` when it was converted with something dropped or repaired.
    """

    file: str
    message: str
    line: int | None = None
    field: str | None = None
    conversation_id: str | None = None
    level: str = "error"
    # what the issue is, as data, where a consumer acts on it ("duplicate_conversation": a later
    # line repeating an id already read, skipped with a warning; None: not needed)
    kind: str | None = None

    def __str__(self) -> str:
        where = self.file + (f":{self.line}" if self.line is not None else "")
        what = f" [{self.conversation_id}]" if self.conversation_id else ""
        fld = f" field {self.field}:" if self.field else ""
        return f"{self.level}: {where}{what}{fld} {self.message}"

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class AdapterItem:
    """One unit of adapter output: a conversation with its QA, or the issues that stopped it."""

    file: str
    line: int | None = None
    conversation: Conversation | None = None
    qa: list[QAItem] = field(default_factory=list)
    issues: list[InputIssue] = field(default_factory=list)

    @property
    def where(self) -> str:
        return self.file + (f":{self.line}" if self.line is not None else "")


def issues_from_validation(
    err: ValidationError, file: str, line: int | None, conversation_id: str | None, prefix: str = ""
) -> list[InputIssue]:
    """One :class:`InputIssue` per pydantic error, naming the field path."""
    out = []
    for e in err.errors():
        loc = ".".join(str(x) for x in (prefix.split(".") if prefix else []) + list(e["loc"]))
        msg = e["msg"]
        if msg.startswith("Value error, "):
            msg = msg[len("Value error, ") :]
        out.append(InputIssue(file=file, line=line, field=loc or None, conversation_id=conversation_id, message=msg))
    return out


def canonical_item(obj: dict[str, Any], file: str, line: int | None, issues: list[InputIssue] | None = None) -> AdapterItem:
    """A canonical conversation object (JSONL line, Parquet row) → item: cleaned, repaired, validated.

    Repairs (see :mod:`lychee_ray.io.adapters.clean`) are reported as warnings; what cannot be repaired
    is reported as errors naming the field.
    """
    obj, notes = repair_conversation(obj)
    cid = obj.get("conversation_id") if isinstance(obj.get("conversation_id"), str) else None
    issues = [i if i.conversation_id else replace(i, conversation_id=cid) for i in issues or []]
    issues += [InputIssue(file, msg, line=line, field=fld, conversation_id=cid, level="warning") for fld, msg in notes.messages()]
    if notes.errors:  # ids no repair can fix (core/ids.py): the conversation is rejected, naming them
        return AdapterItem(file, line, issues=issues + [InputIssue(file, msg, line=line, field=fld, conversation_id=cid)
                                                        for fld, msg in notes.errors])
    try:
        conv = Conversation.model_validate(obj)
    except ValidationError as e:
        return AdapterItem(file, line, issues=issues + issues_from_validation(e, file, line, cid))
    return AdapterItem(file, line, conversation=conv, issues=issues)


def with_warnings(item: AdapterItem, notes: Any, extra: list[InputIssue] | None = None) -> AdapterItem:
    """Add text-cleaning notes (:class:`~lychee_ray.io.adapters.clean.Notes`) and ``extra`` issues to an item."""
    cid = item.conversation.conversation_id if item.conversation is not None else next(
        (i.conversation_id for i in item.issues if i.conversation_id), None)
    added = [replace(i, conversation_id=i.conversation_id or cid) for i in extra or []]
    added += [InputIssue(item.file, msg, line=item.line, field=fld, conversation_id=cid, level="warning") for fld, msg in notes.messages()]
    item.issues[:0] = added
    return item


def decode_text(data: bytes, file: str, line: int | None = None) -> tuple[str, list[InputIssue]]:
    """UTF-8 text (a leading BOM dropped); invalid bytes become U+FFFD and are reported as a warning."""
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        return data.decode("utf-8"), []
    except UnicodeDecodeError as e:
        text = data.decode("utf-8", errors="replace")
        bad = text.count("\ufffd") - data.count("\ufffd".encode())
        msg = f"invalid UTF-8 at byte {e.start}: {bad} undecodable byte sequence(s) replaced with U+FFFD"
        return text, [InputIssue(file, msg, line=line, level="warning")]


def is_uri(path: str | Path) -> bool:
    """True for ``scheme://...`` inputs (object storage etc., read through ``pyarrow.fs``)."""
    return "://" in str(path)


def open_input(path: str | Path) -> BinaryIO:
    """Open a local path or a ``pyarrow.fs`` URI (``s3://``, ``gs://``, ``file://`` …) for reading."""
    if is_uri(path):
        filesystem, inner = fs.FileSystem.from_uri(str(path))
        # random access (Parquet needs it) behind a buffered reader (line iteration for JSONL)
        return io.BufferedReader(filesystem.open_input_file(inner))
    return open(path, "rb")


def list_input_files(path: str | Path, suffixes: Iterable[str]) -> list[str]:
    """A file as-is, or a directory's files with the given suffixes in natural order.

    Local paths and ``pyarrow.fs`` URIs are both accepted; URIs are returned as URIs.
    """
    def natural(name: str) -> list:
        return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]

    wanted = set(suffixes)
    if is_uri(path):
        filesystem, inner = fs.FileSystem.from_uri(str(path))
        info = filesystem.get_file_info(inner)
        if info.type == fs.FileType.NotFound:
            raise FileNotFoundError(f"input not found: {path}")
        if info.type == fs.FileType.File:
            return [str(path)]
        scheme = str(path).split("://", 1)[0]
        infos = filesystem.get_file_info(fs.FileSelector(inner, recursive=False))
        names = [i.path for i in infos if i.type == fs.FileType.File and Path(i.path).suffix in wanted]
        return [f"{scheme}://{n}" for n in sorted(names, key=lambda n: natural(Path(n).name))]
    p = Path(path)
    if p.is_file():
        return [str(p)]
    if not p.exists():
        raise FileNotFoundError(f"input not found: {p}")
    files = [f for f in p.iterdir() if f.is_file() and f.suffix in wanted]
    return [str(f) for f in sorted(files, key=lambda f: natural(f.name))]


DUPLICATE_CONVERSATION = "duplicate_conversation"


def dedupe_conversations(items: Iterable[AdapterItem]) -> Iterator[AdapterItem]:
    """Skip a later occurrence of a conversation id (the first wins), with a warning naming the
    skipped line and the line that was used: the conversation itself is built, so it is not an error."""
    seen: dict[str, str] = {}
    for item in items:
        conv = item.conversation
        if conv is not None and conv.conversation_id in seen:
            issue = InputIssue(
                file=item.file,
                line=item.line,
                field="conversation_id",
                conversation_id=conv.conversation_id,
                message=f"duplicate conversation id: this line ({item.where}) skipped; the conversation is built "
                        f"from its first occurrence ({seen[conv.conversation_id]})",
                level="warning",
                kind=DUPLICATE_CONVERSATION,
            )
            yield AdapterItem(file=item.file, line=item.line, issues=[*item.issues, issue])
            continue
        if conv is not None:
            seen[conv.conversation_id] = item.where
        yield item
