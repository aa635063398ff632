"""``lychee-ray forget --memory DIR --user U (--record ID | --slot S | --entity E | --expired)``:
forget memory records of one user (:mod:`lychee_ray.ingest.forget`; docs/erasure.md, "Forgetting").

Removes the records from every table, index and node of the store (also inside compacted files) and
keeps them out of later commits; ``--entity`` rewrites a record that also holds other facts without
the entity's clauses instead. ``--redact-turns`` also blanks the removed records' source turns and,
with ``--entity``, the clauses naming it in every turn (on its own too, when no record is left to
forget). ``--expired`` applies ``store.retention_days`` (``--set store.retention_days='{event: 365}'``).
Asks for confirmation when stdin is a terminal, unless ``--yes``. Exit codes: 0 forgotten; 1 not
confirmed; 2 not a store, bad arguments, or nothing matched (unknown record, empty slot, an entity
no record — and with ``--redact-turns`` no turn — names).
"""

from __future__ import annotations

import argparse
import sys

from lychee_ray.cli.args import add_config_args, config_from_args
from lychee_ray.cli.errors import EXIT_FAILED, EXIT_OK, EXIT_USAGE, CliError
from lychee_ray.cli.store_view import open_layout
from lychee_ray.core.ids import printable
from lychee_ray.ingest.forget import ForgetError, ForgetSelector, forget_records


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.epilog = "removes the records everywhere in the store and keeps them out of later commits; see docs/erasure.md"
    p.add_argument("--memory", required=True, help="memory store directory")
    p.add_argument("--user", required=True, help="the user whose records are forgotten")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--record", help="one record id")
    what.add_argument("--slot", help="every record of this slot ('subject · attribute')")
    what.add_argument("--entity", help="every record naming this entity (entities, slot subject, or text)")
    what.add_argument("--expired", action="store_true", help="records older than store.retention_days for their type")
    p.add_argument("--conversation", help="only in this conversation")
    p.add_argument("--redact-turns", action="store_true",
                   help="also replace the removed records' source turns' text; with --entity, the clauses naming it "
                        "in every turn")
    p.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    add_config_args(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Confirm (on a terminal), forget, print what was removed."""
    cfg = config_from_args(args)
    layout = open_layout(args.memory, cfg.store)
    selector = ForgetSelector(record_id=args.record, slot=args.slot, entity=args.entity,
                              retention_days=cfg.store.retention_days if args.expired else None)
    if not args.yes and sys.stdin.isatty():
        answer = input(f"Forget the matching records of user {printable(args.user)!r} in {args.memory}"
                       f"{' and redact their source turns' if args.redact_turns else ''}? This cannot be undone. [y/N] ")
        if answer.strip().lower() not in ("y", "yes"):
            print("not confirmed: nothing was forgotten", file=sys.stderr)
            return EXIT_FAILED
    try:
        r = forget_records(layout, args.user, selector, conversation_id=args.conversation, redact_turns=args.redact_turns)
    except ForgetError as e:
        raise CliError("usage" if e.kind == "invalid_request" else "input", f"{e}: nothing forgotten", EXIT_USAGE) from None
    if args.json:
        print(r.model_dump_json(indent=1))
    else:
        rewrote = f", rewrote {_n(r.records_rewritten, 'record')} without it (their other facts kept)" \
            if r.records_rewritten else ""
        print(f"forgot {_n(r.records_removed, 'record')}{rewrote} of user {printable(args.user)!r} ({r.selector}) in "
              f"{_n(len(r.conversation_ids), 'conversation')}\n"
              f"turns redacted: {r.turns_redacted}; nodes: {r.nodes_removed} removed, {r.nodes_changed} changed; "
              f"shared files rewritten: {r.files_rewritten}")
    return EXIT_OK


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}{'s' if count != 1 else ''}"
