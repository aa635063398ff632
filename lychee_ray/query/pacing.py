"""Pausing long CPU work for requests: a background rebuild of a search view runs in the same
process as the searches, and in CPython a thread that holds the interpreter lock for a long
stretch makes every other thread wait up to the switch interval each time it wants the lock back
(many times per search). The rebuild therefore calls a *pause* every few hundred rows, where the
cache lets searches in flight finish first (query/cache.py)."""

from __future__ import annotations

from typing import TypeVar
from collections.abc import Callable, Iterable, Iterator

T = TypeVar("T")
Pause = Callable[[], None]

# rows between pauses: a few milliseconds of Python work at most (not a tunable: a pause point
# costs a function call, so finer would not cost anything measurable either)
PAUSE_EVERY_ROWS = 256


def paced(items: Iterable[T], pause: Pause | None, every: int = PAUSE_EVERY_ROWS) -> Iterable[T]:
    """``items``, calling ``pause`` after every ``every`` of them (``items`` itself when None)."""
    if pause is None:
        return items
    return _paced(items, pause, every)


def _paced(items: Iterable[T], pause: Pause, every: int) -> Iterator[T]:
    for i, item in enumerate(items, start=1):
        yield item
        if i % every == 0:
            pause()


__all__ = ["PAUSE_EVERY_ROWS", "Pause", "paced"]
