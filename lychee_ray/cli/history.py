"""``lychee-ray history``: a slot's values in time order — when each held and what replaced it.

``--slot 'reservation M05KNL · flights'``, ``--subject 'reservation M05KNL'`` (every slot of it) or
``--record ID`` (that record's slot), in one conversation or all of a user's, from a store
(``--memory``) or a running service (``--url``); docs/current-memory.md.
"""

from __future__ import annotations

import argparse
import os
import sys

from lychee_ray.cli.args import add_config_args, config_from_args, id_arg
from lychee_ray.cli.errors import EXIT_OK, CliError, message_of
from lychee_ray.cli.query import TOKEN_ENV, unknown_scope_message
from lychee_ray.memory import MemoryStore
from lychee_ray.query.errors import ScopeError, UnknownConversation
from lychee_ray.query.history import HistoryQueryError, HistoryResult
from lychee_ray.serve.client import MemoryClient, RemoteError

_REQUEST_ERROR_STATUSES = frozenset({401, 404, 413, 422})


def add_arguments(p: argparse.ArgumentParser) -> None:
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--memory", help="memory store directory")
    where.add_argument("--url", help="a running `lychee-ray serve`, e.g. http://127.0.0.1:8000")
    p.add_argument("--token", default=None, help=f"bearer token for --url (default: env {TOKEN_ENV})")
    scope = p.add_mutually_exclusive_group(required=True)
    scope.add_argument("--conversation", type=id_arg, help="one conversation")
    scope.add_argument("--user", type=id_arg, help="all conversations of this user id")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--slot", help="'subject · attribute' (also 'subject | attribute'), e.g. 'user · shipping address'")
    what.add_argument("--subject", help="every slot of a subject, e.g. 'reservation M05KNL'")
    what.add_argument("--record", help="the slot of this record id")
    p.add_argument("--json", action="store_true", help="print the history as JSON (the body of GET /v1/history)")
    add_config_args(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.url:
        client = MemoryClient(args.url, args.token or os.environ.get(TOKEN_ENV))
        try:
            res = client.history(conversation_id=args.conversation, user_id=args.user, slot=args.slot,
                                 subject=args.subject, record_id=args.record)
        except RemoteError as e:
            print(f"lychee-ray history: {e}", file=sys.stderr)
            return 2 if e.status in _REQUEST_ERROR_STATUSES else 1
        return show(res, args.json)
    store = MemoryStore.open(args.memory, config_from_args(args), llm="rules")
    try:
        with store:
            res = store.history(args.conversation, user_id=args.user, slot=args.slot, subject=args.subject,
                                record_id=args.record)
    except UnknownConversation as e:
        raise CliError("unknown_conversation", unknown_scope_message(args, store.reader)) from e
    except (ScopeError, HistoryQueryError) as e:
        raise CliError("usage", message_of(e)) from e
    return show(res, args.json)


def show(res: HistoryResult, as_json: bool) -> int:
    """Print the history: per slot, one line per value, oldest first, with its status and dates."""
    if as_json:
        print(res.model_dump_json(indent=1))
        return EXIT_OK
    if not res.entries:
        print("no recorded values for that slot")
        return EXIT_OK
    many = len(res.conversation_ids) > 1
    for slot in res.slots:
        print(f"{slot}:")
        for e in (x for x in res.entries if x.slot == slot):
            when = (e.valid_from or "?")[:10] + (f" → {e.valid_until[:10]}" if e.valid_until else "")
            where = f" ({e.conversation_id})" if many else ""
            text = " ".join(e.text.split())
            print(f"  {when:23s} {e.status:11s} {e.record_id}{where}  {text[:200]}")
    return EXIT_OK


__all__ = ["add_arguments", "run", "show"]
