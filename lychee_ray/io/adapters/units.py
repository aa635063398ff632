"""An adapter's input unit: what one read of a format takes.

A format reads **files** — each file stands alone (a JSONL file, a Parquet file, a LoCoMo JSON) —
or **folders** — the files of one folder, its subfolders included, together make its
conversations (BEAM: a folder per conversation holding its chat and its questions; an export with
a folder per channel and a file per day). :func:`list_units` turns an input path into the units
that detection, ``convert``, the local build and the Ray build read (the Ray job makes one dataset
row per unit, so the files of a folder unit are always read together, by one task).

For a folder format an input is one unit or a folder of units:

* a folder holding a file of the format's suffixes at its top is **one unit**;
* a folder holding none is a folder of units: its subfolders that hold such a file, in natural
  order (``2`` before ``10``); other subfolders are not units and are left alone.

Local paths and ``pyarrow.fs`` URIs (``s3://``, ``gs://``, ``file://`` …) are both accepted; URIs
come back as URIs.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Literal
from collections.abc import Iterable

from pyarrow import fs

from lychee_ray.io.adapters.base import is_uri, list_input_files

Unit = Literal["file", "folder"]


def natural_key(name: str) -> list[int | str]:
    """Sort key that orders numbers by value (``chat2`` before ``chat10``)."""
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


def _uri_fs(path: str) -> tuple[fs.FileSystem, str, str]:
    filesystem, inner = fs.FileSystem.from_uri(path)
    return filesystem, inner, path.split("://", 1)[0]


def path_kind(path: str | Path) -> Literal["file", "folder", "missing"]:
    """Whether ``path`` (local or URI) is a file, a folder or nothing."""
    if is_uri(path):
        filesystem, inner, _ = _uri_fs(str(path))
        t = filesystem.get_file_info(inner).type
        return "file" if t == fs.FileType.File else "folder" if t == fs.FileType.Directory else "missing"
    p = Path(path)
    return "file" if p.is_file() else "folder" if p.is_dir() else "missing"


def join(folder: str | Path, *parts: str) -> str:
    """A path inside ``folder`` (a local path or a URI)."""
    if is_uri(folder):
        return "/".join([str(folder).rstrip("/"), *parts])
    return str(Path(folder).joinpath(*parts))


def entries(folder: str | Path) -> tuple[list[str], list[str]]:
    """(files, subfolders) directly under ``folder``, each in natural order of its name."""
    if is_uri(folder):
        filesystem, inner, scheme = _uri_fs(str(folder))
        infos = filesystem.get_file_info(fs.FileSelector(inner, recursive=False))
        files = [f"{scheme}://{i.path}" for i in infos if i.type == fs.FileType.File]
        dirs = [f"{scheme}://{i.path}" for i in infos if i.type == fs.FileType.Directory]
    else:
        kids = list(Path(folder).iterdir())
        files = [str(k) for k in kids if k.is_file()]
        dirs = [str(k) for k in kids if k.is_dir()]
    key = (lambda p: natural_key(p.rstrip("/").rsplit("/", 1)[-1])) if is_uri(folder) else (
        lambda p: natural_key(Path(p).name))
    return sorted(files, key=key), sorted(dirs, key=key)


def _has_suffix(path: str, wanted: set[str]) -> bool:
    return os.path.splitext(path.rstrip("/"))[1].lower() in wanted


def folder_files(folder: str | Path, suffixes: Iterable[str]) -> list[str]:
    """The files of a folder unit with the given suffixes, subfolders included, in natural order of
    their path inside the folder."""
    wanted = {s.lower() for s in suffixes}
    if is_uri(folder):
        filesystem, inner, scheme = _uri_fs(str(folder))
        infos = filesystem.get_file_info(fs.FileSelector(inner, recursive=True))
        found = [(i.path[len(inner):].lstrip("/"), f"{scheme}://{i.path}") for i in infos
                 if i.type == fs.FileType.File and _has_suffix(i.path, wanted)]
    else:
        root = Path(folder)
        found = []
        for d, _, names in os.walk(root):
            for n in names:
                full = Path(d) / n
                if _has_suffix(n, wanted) and full.is_file():
                    found.append((full.relative_to(root).as_posix(), str(full)))
    return [full for _, full in sorted(found, key=lambda p: [natural_key(part) for part in p[0].split("/")])]


def is_folder_unit(folder: str | Path, suffixes: Iterable[str]) -> bool:
    """A folder holding a file of ``suffixes`` at its top: one unit of a folder format."""
    wanted = {s.lower() for s in suffixes}
    return any(_has_suffix(f, wanted) for f in entries(folder)[0])


def list_units(path: str | Path, suffixes: Iterable[str], unit: Unit) -> list[str]:
    """The units of ``path`` for a format with ``suffixes`` read by ``unit``, in order.

    ``file``: the path itself, or a folder's files with the suffixes (not its subfolders');
    ``folder``: a file as it is (the format's reader reports it), a folder that is one unit, or the
    unit subfolders of a folder (module docstring). FileNotFoundError when ``path`` does not exist.
    """
    suffixes = tuple(suffixes)
    if unit == "file":
        return list_input_files(path, suffixes)
    kind = path_kind(path)
    if kind == "missing":
        raise FileNotFoundError(f"input not found: {path}")
    if kind == "file" or is_folder_unit(path, suffixes):
        return [str(path)]
    return [d for d in entries(path)[1] if is_folder_unit(d, suffixes)]


def count_one(unit: str) -> int:
    """Conversations of a folder unit that is one conversation: one (an unreadable folder is one
    item too: the build reports it)."""
    return 1


__all__ = ["Unit", "count_one", "entries", "folder_files", "is_folder_unit", "join", "list_units", "natural_key",
           "path_kind"]
