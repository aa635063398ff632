"""What the CLI does with an exception: expected failures become one line and a documented exit code.

Exit codes (README, "Exit codes"):

* 0 — done;
* 1 — the work ran and failed (a build that built nothing, a store with problems, an unexpected error);
* 2 — the request cannot be run as given (bad argument or configuration, input not found, empty or
  in another format, not a store, unknown conversation or user);
* 130 — interrupted (Ctrl-C).

Expected error types are looked up by module and class name in :data:`sys.modules`, so this module
imports nothing heavy: an error can only come from a module that is already loaded.
"""

from __future__ import annotations

import os
import sys
from typing import Literal

from lychee_ray.core.ids import printable

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130

CliErrorKind = Literal["usage", "input", "store", "unknown_conversation", "failed"]


class CliError(Exception):
    """An expected failure of a command: ``kind`` and ``exit_code`` are data, the message is one line."""

    def __init__(self, kind: CliErrorKind, message: str, exit_code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.kind: CliErrorKind = kind
        self.exit_code = exit_code


# (module, class) of every error a command may raise on bad input; all exit with EXIT_USAGE.
EXPECTED_ERRORS: tuple[tuple[str, str], ...] = (
    ("lychee_ray.config.base", "ConfigError"),
    ("lychee_ray.io.store.layout", "NotAStoreError"),
    ("lychee_ray.io.adapters.detect", "InputError"),
    ("lychee_ray.query.errors", "UnknownConversation"),
    ("lychee_ray.query.errors", "ScopeError"),
    ("lychee_ray.eval.setup.errors", "EvalError"),
    ("lychee_ray.eval.setup.variants", "UnknownVariant"),
    ("lychee_ray.eval.runners.segmentation", "SegCorpusError"),
)


def _is_expected(e: BaseException) -> bool:
    for module, name in EXPECTED_ERRORS:
        mod = sys.modules.get(module)
        cls = getattr(mod, name, None) if mod is not None else None
        if cls is not None and isinstance(e, cls):
            return True
    return isinstance(e, FileNotFoundError)


def message_of(e: BaseException) -> str:
    """One line: the message without the quotes ``KeyError`` adds, newlines folded, characters a
    terminal would interpret (an id's escape codes) escaped."""
    text = str(e.args[0]) if isinstance(e, KeyError) and e.args else str(e)
    if isinstance(e, FileNotFoundError) and e.filename and not text.strip():
        text = f"not found: {e.filename}"
    elif isinstance(e, FileNotFoundError) and e.strerror and e.filename:
        text = f"{e.strerror.lower()}: {e.filename}"
    return printable(" ".join(text.split())) or type(e).__name__


def report(e: BaseException, prog: str) -> int:
    """Print ``e`` as one line on stderr and return its exit code (unexpected: a hint to ``--debug``)."""
    if isinstance(e, BrokenPipeError):  # the reader went away (`| head`): nothing to say to anyone
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit flush
        return EXIT_OK
    if isinstance(e, KeyboardInterrupt):
        print(f"{prog}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    if isinstance(e, CliError):
        print(f"{prog}: {message_of(e)}", file=sys.stderr)
        return e.exit_code
    if _is_expected(e):
        print(f"{prog}: {message_of(e)}", file=sys.stderr)
        return EXIT_USAGE
    print(f"{prog}: {type(e).__name__}: {message_of(e)} (run with --debug for the traceback)", file=sys.stderr)
    return EXIT_FAILED


__all__ = ["CliError", "CliErrorKind", "EXIT_FAILED", "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_USAGE", "EXPECTED_ERRORS",
           "message_of", "report"]
