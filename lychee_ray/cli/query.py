"""``lychee-ray query``: ask one question against a memory store (or only search it), in this
process (``--memory``) or through a running service (``--url``, :class:`lychee_ray.serve.MemoryClient`)."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from pydantic import ValidationError

from lychee_ray.cli.args import add_config_args, config_from_args, id_arg
from lychee_ray.cli.errors import EXIT_FAILED, EXIT_OK, CliError, message_of
from lychee_ray.cli.store_view import error_rows
from lychee_ray.core.ids import printable
from lychee_ray.query.engine import QueryEngine
from lychee_ray.query.errors import ScopeError, UnknownConversation
from lychee_ray.query.request import QueryRequest, RecentTurn
from lychee_ray.query.results import result_json
from lychee_ray.names import EXTRACTIVE_ANSWER, LLM_BACKENDS
from lychee_ray.core.status import CURRENT_STATUS

# Environment variable holding the service's bearer token (as for `lychee-ray serve`).
TOKEN_ENV = "LYCHEE_SERVE_TOKEN"
# Error statuses that mean the request itself is wrong (exit 2, like a usage error); others exit 1.
_REQUEST_ERROR_STATUSES = frozenset({401, 404, 413, 422})


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("question")
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--memory", help="memory store directory (query in this process)")
    where.add_argument("--url", help="a running `lychee-ray serve`, e.g. http://127.0.0.1:8000")
    p.add_argument("--token", default=None, help=f"bearer token for --url (default: env {TOKEN_ENV})")
    p.add_argument("--timeout", type=float, default=None, help="seconds to wait for --url (default 120)")
    scope = p.add_mutually_exclusive_group(required=True)
    scope.add_argument("--conversation", type=id_arg, help="conversation id to query")
    scope.add_argument("--user", type=id_arg, help="query all conversations of this user id")
    p.add_argument("--question-date", default=None, help="ISO date/datetime that anchors relative times (default: now)")
    p.add_argument("--budget-tokens", type=int, default=None, help="context token budget (default: query.select.budget_tokens)")
    p.add_argument("--llm", choices=LLM_BACKENDS, default=None, help="LLM backend for plan + answer (default: auto)")
    p.add_argument("--recent", action="append", default=None, metavar="'ROLE: TEXT'",
                   help="one of the asking agent's recent turns, oldest first (repeatable): what the question may "
                        "refer to; shown to the planner")
    p.add_argument("--search-only", "--search", dest="search_only", action="store_true", help="stop before the answer call")
    p.add_argument("--json", action="store_true", help="print the full result as JSON (evidence by score, as in the text)")
    add_config_args(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run the command; the exit code (2: bad request or unknown scope, 1: the service failed)."""
    if args.url:
        return _run_remote(args)
    cfg = config_from_args(args)
    # the query engine alone, not MemoryStore: a query appends nothing, so the build and append code stays unloaded
    store = QueryEngine.open(args.memory, cfg, llm=args.llm)  # not a store: one line, exit 2 (cli.errors)
    call = store.search if args.search_only else store.query
    try:
        req = request_of(args)
        with store:
            res = call(req)
    except UnknownConversation as e:
        raise CliError("unknown_conversation", unknown_scope_message(args, store.reader)) from e
    except (ScopeError, ValueError) as e:
        raise CliError("usage", message_of(e)) from e
    return print_result(res, args)


def request_of(args: argparse.Namespace) -> QueryRequest:
    """The query request the arguments describe (a bad one: ValueError naming the argument's field)."""
    try:
        return QueryRequest(question=args.question, conversation_id=args.conversation, user_id=args.user,
                            question_date=args.question_date, budget_tokens=args.budget_tokens,
                            recent_turns=recent_turns(args.recent))
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(x) for x in err.get("loc", ()))
        raise ValueError(f"{where}: {err.get('msg')}" if where else str(err.get("msg"))) from None


def recent_turns(values: list[str] | None) -> list[RecentTurn]:
    """``--recent 'user: my order is 123'`` values as recent turns (a known role before the first colon)."""
    out = []
    for v in values or []:
        role, sep, text = v.partition(":")
        if sep and role.strip().lower() in ("user", "assistant", "tool", "system"):
            out.append(RecentTurn(role=role.strip().lower(), content=text.strip()))
        else:
            out.append(RecentTurn(content=v.strip()))
    return out


def unknown_scope_message(args: argparse.Namespace, reader: Any) -> str:
    """Why the conversation (or user) is not there, and where the ids are: a close id, a failed build."""
    hint = f"`lychee-ray list --memory {args.memory}` shows the ids"
    if args.user is not None:
        return f"unknown user '{args.user}' — {hint}"
    cid = args.conversation
    failed = [e for e in error_rows(reader.layout) if e.get("conversation_id") == cid]
    if failed:
        return (f"conversation '{cid}' failed to build ({failed[-1]['stage']}: {' '.join(str(failed[-1]['message']).split())})"
                f" — `lychee-ray errors --memory {args.memory}` shows the errors")
    close = [k for k in reader.conversation_ids() if k.endswith(f"-{cid}") or k.lower() == cid.lower()]
    maybe = f" (did you mean '{close[0]}'?)" if len(close) == 1 else ""
    return f"unknown conversation '{cid}'{maybe} — {hint}"


def _run_remote(args: argparse.Namespace) -> int:
    """The service does the work: POST the question to ``args.url``."""
    # here, not at the top: the client's package loads the service's web framework, which a query
    # in this process (--memory) never needs
    from lychee_ray.serve.client import MemoryClient, RemoteError

    if args.llm:
        print("lychee-ray query: --llm is ignored with --url (the service's configuration decides)", file=sys.stderr)
    client = MemoryClient(args.url, args.token or os.environ.get(TOKEN_ENV), timeout=args.timeout)
    ask = client.search if args.search_only else client.query
    try:
        req = request_of(args)
    except ValueError as e:
        raise CliError("usage", message_of(e)) from e
    try:
        res = ask(req)
    except RemoteError as e:
        print(f"lychee-ray query: {e}", file=sys.stderr)
        return 2 if e.status in _REQUEST_ERROR_STATUSES else 1
    return print_result(res, args)


def evidence_line(e: Any, qualified: bool) -> str:
    """One evidence item: score, kind, type, the day it was said, its turns (``conversation:turns``
    when several conversations are in scope: turn ids repeat across conversations), its status when
    not current (``SUPERSEDED until 2024-05-15:``) and its text."""
    src = ",".join(e.source_turn_ids[:4]) + ("…" if len(e.source_turn_ids) > 4 else "")
    ref = f"{printable(e.conversation_id)}:{src}" if qualified else src
    day = (e.session_date or "")[:10] or "undated"
    text = " ".join(e.text.split())
    status = getattr(e, "status", "current")
    mark = "" if status == CURRENT_STATUS else f"{status.upper()}{' until ' + e.valid_until[:10] if e.valid_until else ''}: "
    return f"{e.score:.3f} {e.kind:7s} {e.type:10s} {day:10s} [{ref}] ({'+'.join(e.channels)}) {mark}{text[:160]}"


def counted(n: int, noun: str) -> str:
    """``1 item``, ``2 items`` (the nouns counted here take a plain -s)."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def print_result(res: Any, args: argparse.Namespace) -> int:
    """Print a search/query result (``--json``: all of it) and return exit code 0."""
    if args.json:
        # the service's JSON: the same fields as the body of POST /v1/query (or /v1/search)
        print(result_json(res, indent=1).decode("utf-8"))
        if getattr(res, "answer_error", None):  # not a JSON field (HTTP answers 502/503): said here
            print(f"lychee-ray query: the answer call failed ({res.answer_error_kind or 'unknown'}): {res.answer_error}",
                  file=sys.stderr)
        return EXIT_FAILED if getattr(res, "answer_error", None) else EXIT_OK
    if not args.search_only:
        extractive = getattr(res, "answer_kind", None) == EXTRACTIVE_ANSWER
        label = "Answer (extractive, quoted from memory)" if extractive else "Answer"
        print(f"{label}: {res.answer}" + (f"   [answer failed: {res.answer_error}]" if res.answer_error else ""))
    p = res.plan
    print(f"Plan ({p.backend}{', fallback: ' + str(p.fallback_reason) if p.fallback else ''}): {p.question_type}, "
          f"{counted(len(p.routes), 'route')}: " + "; ".join(r.search_texts[0] for r in p.routes))
    several = len(res.conversation_ids) > 1
    scope = (f"{len(res.conversation_ids)} conversations" if several
             else f"conversation {printable(res.conversation_ids[0])}" if res.conversation_ids else "no conversation")
    print(f"Evidence ({counted(len(res.evidence), 'item')}, {res.usage.context_tokens}/{res.budget_tokens} tokens, "
          f"pool {res.pool_size}; {scope}):")
    for e in res.evidence:  # by score, highest first: the result's order (the JSON lists it the same way)
        print("  " + evidence_line(e, several))
    u = res.usage
    print(f"Query prompt tokens: {u.query_prompt_tokens} (plan {u.plan_prompt_tokens} + answer {u.answer_prompt_tokens})"
          f"{' (offline estimate)' if u.estimated else ''}; LLM calls: {u.llm_calls}")
    if res.rerank.error:
        print(f"Rerank failed (fused order kept): {res.rerank.error}")
    print("Timings (ms): " + ", ".join(f"{k} {v:.1f}" for k, v in res.timings_ms.items()))
    # like HTTP's 502/503: the evidence is printed, but the answer the user asked for is missing
    return EXIT_FAILED if getattr(res, "answer_error", None) else EXIT_OK
