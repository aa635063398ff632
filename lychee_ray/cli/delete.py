"""``lychee-ray delete --memory DIR (--conversation ID | --user ID) [--yes]``: erase from a store.

Removes every trace of the conversation (or of all of the user's conversations) from the store
directory — Parquet rows of every table (also inside compacted files), FAISS indexes, commit
markers, claims and writer state, ``errors/`` rows — and updates the manifest
(:mod:`lychee_ray.io.store.erase`; docs/erasure.md). Running services drop it on their next request.

Asks for confirmation when stdin is a terminal, unless ``--yes``. Exit codes: 0 erased; 1 not
confirmed, or the erasure failed; 2 not a store, or no such conversation / user.
"""

from __future__ import annotations

import argparse
import sys

from lychee_ray.cli.errors import EXIT_FAILED, EXIT_OK, EXIT_USAGE, CliError
from lychee_ray.cli.store_view import open_layout
from lychee_ray.core.ids import id_problem, printable
from lychee_ray.io.store import conversation_key
from lychee_ray.io.store.erase import (
    EraseReport,
    NothingToErase,
    erase_conversation,
    erase_user,
)
from lychee_ray.names import CONVERSATION_SCOPE, USER_SCOPE


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.epilog = ("removes rows of every table (also in compacted files), FAISS indexes, commit markers, "
                "writer state and errors/ rows, and updates the manifest; see docs/erasure.md")
    p.add_argument("--memory", required=True, help="memory store directory")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--conversation", help="the conversation id to erase")
    what.add_argument("--user", help="erase every conversation of this user id")
    p.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")
    p.add_argument("--json", action="store_true", help="print the erasure report as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Confirm (on a terminal), erase, print what was removed."""
    layout = open_layout(args.memory)
    scope, ident = (CONVERSATION_SCOPE, args.conversation) if args.conversation is not None else (USER_SCOPE, args.user)
    if scope == CONVERSATION_SCOPE:
        found = [args.conversation] if layout.read_marker(conversation_key(args.conversation)) else []
    else:
        found = sorted(m.conversation_id for m in layout.iter_markers() if m.owner == args.user)
    problem = id_problem(ident)
    if problem is not None and not found:  # (an id an older version stored as it is can still be erased)
        raise CliError("usage", f"the {scope} id {problem}", EXIT_USAGE)
    if not args.yes and sys.stdin.isatty():
        what = (f"conversation {printable(ident)!r}" if scope == CONVERSATION_SCOPE
                else f"user {printable(ident)!r} ({len(found)} conversation{'s' if len(found) != 1 else ''}: "
                     f"{printable(', '.join(found[:5]))}"
                     f"{', ...' if len(found) > 5 else ''})")
        answer = input(f"Erase {what} from {args.memory}, with every trace of it? This cannot be undone. [y/N] ")
        if answer.strip().lower() not in ("y", "yes"):
            print("not confirmed: nothing was deleted", file=sys.stderr)
            return EXIT_FAILED
    try:
        report = erase_conversation(layout, ident) if scope == CONVERSATION_SCOPE else erase_user(layout, ident)
    except NothingToErase as e:
        raise CliError("unknown_conversation", f"unknown {e.scope} {printable(e.ident)!r} in {args.memory}: nothing deleted",
                       EXIT_USAGE) from None
    if args.json:
        print(report.model_dump_json(indent=1))
    else:
        print(summary(report, scope, ident))
    return EXIT_OK


def summary(r: EraseReport, scope: str, ident: str) -> str:
    """What was removed, in three lines."""
    rows = ", ".join(f"{t} {n}" for t, n in r.rows_removed.items())
    return (f"deleted {scope} {printable(ident)!r}: {r.conversations} conversation{'s' if r.conversations != 1 else ''}"
            f"{' (' + printable(', '.join(r.conversation_ids)) + ')' if scope == USER_SCOPE and r.conversation_ids else ''}\n"
            f"rows removed: {sum(r.rows_removed.values())} ({rows})\n"
            f"files: {r.files_removed} removed, {r.files_rewritten} rewritten; {r.bytes_freed / 1024:.1f} KiB freed "
            f"in {r.seconds:.2f} s")


__all__ = ["add_arguments", "run", "summary"]
