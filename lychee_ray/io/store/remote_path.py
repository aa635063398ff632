"""A path in a ``pyarrow.fs`` filesystem (S3, GCS, HDFS, ...): :class:`StorePath`, the remote kind of
store path (:mod:`.fs` turns a root into it or into a ``pathlib.Path``).

A :class:`StorePath` is a small ``pathlib``-like object that offers exactly the operations the store
needs (join, list, glob, read, write, delete, stat). Writes are single objects
(``open_output_stream``): an object appears whole when its upload completes, which is the only
atomicity the commit protocol needs (layout.py). Every path below a root carries that root's
``store`` settings. :func:`display_uri` removes user info and secret-looking query values before a
root is shown in a message, a log or the manifest.
"""

from __future__ import annotations

import fnmatch
import posixpath
import re
from dataclasses import dataclass, field, replace as dc_replace
from functools import lru_cache
from pathlib import Path
from collections.abc import Iterator
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import pyarrow.fs as pafs

from lychee_ray.config.store import StoreConfig

# query parameters of a pyarrow.fs URI that may carry a secret (never shown)
_SECRET_PARAMS = re.compile(r"(secret|token|password|key|credential|sas)", re.IGNORECASE)


def default_settings() -> StoreConfig:
    """The ``store`` defaults: what a root opened without
    explicit settings uses. There is no process-wide setting: whoever has a config passes its
    ``store`` section to :func:`store_root` / ``StoreLayout`` and it travels with the paths."""
    return StoreConfig()


def display_uri(root: str | Path | StorePath) -> str:
    """``root`` without user info (``s3://KEY:SECRET@bucket``) or secret-looking query values."""
    s = str(root)
    if "://" not in s:
        return s
    parts = urlsplit(s)
    netloc = parts.hostname or ""
    if parts.port:
        netloc += f":{parts.port}"
    query = urlencode([(k, "***" if _SECRET_PARAMS.search(k) else v) for k, v in parse_qsl(parts.query)])
    return urlunsplit((parts.scheme, netloc, parts.path, query, ""))


@lru_cache(maxsize=32)
def _filesystem(uri: str) -> tuple[pafs.FileSystem, str]:
    """(filesystem, base path in it) of a remote root. Cached: ``from_uri`` resolves credentials
    and regions, which costs requests."""
    fs, base = pafs.FileSystem.from_uri(uri)
    return fs, base.rstrip("/")


@dataclass(frozen=True)
class _Anchor:
    """The root URI a :class:`StorePath` descends from: paths below ``base`` map back to URIs below
    ``uri`` (every scheme spells its URIs differently; this needs none of them)."""

    uri: str  # the root URI without its query
    base: str  # the root's path inside the filesystem
    query: str  # the root URI's query (pyarrow.fs options such as endpoint_override)
    # the ``store`` settings every path below this root uses (index cache, leases, parallel reads);
    # not part of a path's identity
    settings: StoreConfig = field(default_factory=default_settings, compare=False, hash=False)

    def uri_of(self, path: str) -> str:
        rel = path[len(self.base):] if path.startswith(self.base) else "/" + path
        return self.uri.rstrip("/") + rel


@dataclass(frozen=True)
class StoreStat:
    """What :meth:`StorePath.stat` returns (the fields of ``os.stat_result`` the store uses)."""

    st_size: int
    st_mtime: float


class StorePath:
    """A path in a ``pyarrow.fs`` filesystem with the ``pathlib.Path`` methods the store uses.

    ``str(p)`` is its URI (secrets removed); ``p.path`` the path inside the filesystem. Directories
    are prefixes on object stores: ``mkdir`` creates the marker object pyarrow uses, ``is_dir`` is
    true when anything lies below.
    """

    __slots__ = ("fs", "path", "_anchor", "_type")

    def __init__(self, fs: pafs.FileSystem, path: str, anchor: _Anchor,
                 known_type: pafs.FileType | None = None) -> None:
        self.fs = fs
        self.path = path.rstrip("/")
        self._anchor = anchor
        # the type a directory listing reported (like os.DirEntry: saves one request per entry)
        self._type = known_type

    @classmethod
    def from_uri(cls, uri: str, settings: StoreConfig | None = None) -> StorePath:
        """The root of a remote store (``s3://bucket/prefix`` ...); ``settings`` (the ``store``
        config section, packaged defaults when None) go with every path below it."""
        fs, base = _filesystem(uri)
        parts = urlsplit(uri)
        return cls(fs, base, _Anchor(urlunsplit((*parts[:3], "", "")), base, parts.query,
                                     settings if settings is not None else default_settings()))

    @property
    def settings(self) -> StoreConfig:
        """The ``store`` settings this path's root was opened with."""
        return self._anchor.settings

    def with_settings(self, settings: StoreConfig) -> StorePath:
        """The same path under a root opened with ``settings``."""
        return StorePath(self.fs, self.path, dc_replace(self._anchor, settings=settings), self._type)

    # -- pure path operations -------------------------------------------------------------------
    def _with(self, path: str) -> StorePath:
        return StorePath(self.fs, path, self._anchor)

    def _from_info(self, info: pafs.FileInfo) -> StorePath:
        return StorePath(self.fs, info.path, self._anchor, info.type)

    def __truediv__(self, other: str) -> StorePath:
        return self._with(posixpath.join(self.path, str(other)))

    @property
    def name(self) -> str:
        return posixpath.basename(self.path)

    @property
    def parent(self) -> StorePath:
        return self._with(posixpath.dirname(self.path))

    @property
    def suffix(self) -> str:
        return posixpath.splitext(self.name)[1]

    @property
    def stem(self) -> str:
        return posixpath.splitext(self.name)[0]

    def with_name(self, name: str) -> StorePath:
        return self.parent / name

    def with_suffix(self, suffix: str) -> StorePath:
        return self._with(posixpath.splitext(self.path)[0] + suffix)

    def __str__(self) -> str:
        return display_uri(self.uri())

    def __repr__(self) -> str:
        return f"StorePath({str(self)!r})"

    def __fspath__(self) -> str:  # pragma: no cover - a remote path is never a local file
        raise TypeError(f"{self} is not a local path")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, StorePath) and (self._anchor.uri, self.path) == (other._anchor.uri, other.path)

    def __hash__(self) -> int:
        return hash((self._anchor.uri, self.path))

    def uri(self, with_query: bool = False) -> str:
        """This path as a URI (with the root's query when asked: pass that one to other processes)."""
        u = self._anchor.uri_of(self.path)
        return f"{u}?{self._anchor.query}" if with_query and self._anchor.query else u

    def __lt__(self, other: StorePath) -> bool:
        return self.path < other.path

    # -- queries --------------------------------------------------------------------------------
    def _info(self) -> pafs.FileInfo:
        return self.fs.get_file_info(self.path)

    def _kind(self) -> pafs.FileType:
        return self._type if self._type is not None else self._info().type

    def exists(self) -> bool:
        return self._kind() != pafs.FileType.NotFound

    def is_dir(self) -> bool:
        return self._kind() == pafs.FileType.Directory

    def is_file(self) -> bool:
        return self._kind() == pafs.FileType.File

    def stat(self) -> StoreStat:
        info = self._info()
        if info.type == pafs.FileType.NotFound:
            raise FileNotFoundError(str(self))
        mtime = info.mtime.timestamp() if info.mtime is not None else 0.0
        return StoreStat(st_size=int(info.size or 0), st_mtime=mtime)

    def _children(self, recursive: bool = False) -> list[pafs.FileInfo]:
        sel = pafs.FileSelector(self.path, recursive=recursive, allow_not_found=True)
        try:
            return self.fs.get_file_info(sel)
        except (FileNotFoundError, NotADirectoryError):
            return []

    def list_stats(self) -> list[tuple[StorePath, int, float]]:
        """(path, size, mtime) of the files directly below, from one listing."""
        return [(self._from_info(i), int(i.size or 0),
                 i.mtime.timestamp() if i.mtime is not None else 0.0)
                for i in self._children() if i.type == pafs.FileType.File]

    def iterdir(self) -> Iterator[StorePath]:
        for info in self._children():
            yield self._from_info(info)

    def glob(self, pattern: str) -> Iterator[StorePath]:
        """Paths below matching ``pattern`` (``*`` / ``?`` per level, levels split by ``/``)."""
        head, _, rest = pattern.partition("/")
        for child in self.iterdir():
            if fnmatch.fnmatchcase(child.name, head):
                if not rest:
                    yield child
                elif child.is_dir():
                    yield from child.glob(rest)

    def rglob(self, pattern: str) -> Iterator[StorePath]:
        for info in self._children(recursive=True):
            if fnmatch.fnmatchcase(posixpath.basename(info.path), pattern):
                yield self._from_info(info)

    # -- reads and writes -----------------------------------------------------------------------
    def read_bytes(self) -> bytes:
        try:
            with self.fs.open_input_stream(self.path) as f:
                return f.read()
        except FileNotFoundError:
            raise
        except OSError as e:  # pyarrow reports a missing object as OSError on some filesystems
            if not self.exists():
                raise FileNotFoundError(str(self)) from e
            raise

    def read_text(self, encoding: str = "utf-8") -> str:
        return self.read_bytes().decode(encoding)

    def write_bytes(self, data: bytes) -> int:
        """One object, complete or absent (the upload finishes before it becomes visible)."""
        with self.fs.open_output_stream(self.path) as f:
            f.write(data)
        return len(data)

    def write_text(self, text: str, encoding: str = "utf-8") -> int:
        return self.write_bytes(text.encode(encoding))

    def mkdir(self, parents: bool = True, exist_ok: bool = True) -> None:
        self.fs.create_dir(self.path, recursive=True)

    def unlink(self, missing_ok: bool = False) -> None:
        try:
            self.fs.delete_file(self.path)
        except FileNotFoundError:
            if not missing_ok:
                raise
        except OSError:
            if self.exists() or not missing_ok:
                raise

    def rmtree(self) -> None:
        """Delete this directory and everything below it (absent: nothing to do)."""
        try:
            self.fs.delete_dir(self.path)
        except FileNotFoundError:
            pass
        except OSError:
            if self.exists():
                raise


__all__ = ["StorePath", "StoreStat", "default_settings", "display_uri"]
