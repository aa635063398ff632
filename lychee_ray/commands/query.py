"""``lychee-ray query``: ask one question against a memory store (or only search it)."""

from __future__ import annotations

import argparse
import json
import sys

from ..cli import add_config_args, config_from_args


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("query", help="answer a question from a memory store")
    p.add_argument("question")
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--memory", help="memory store directory (query in this process)")
    where.add_argument("--url", help="a running `lychee-ray serve`, e.g. http://127.0.0.1:8000")
    p.add_argument("--token", default=None, help="bearer token for --url (default: env LYCHEE_SERVE_TOKEN)")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for --url")
    scope = p.add_mutually_exclusive_group(required=True)
    scope.add_argument("--conversation", help="conversation id to query")
    scope.add_argument("--user", help="query all conversations of this user id")
    p.add_argument("--question-date", default=None, help="ISO date/datetime that anchors relative times (default: now)")
    p.add_argument("--budget-tokens", type=int, default=None, help="context token budget (default: query.select.budget_tokens)")
    p.add_argument("--llm", choices=("openai", "rules"), default=None, help="LLM backend for plan + answer (default: auto)")
    p.add_argument("--search-only", "--search", dest="search_only", action="store_true", help="stop before the answer call")
    p.add_argument("--json", action="store_true", help="print the full result as JSON")
    add_config_args(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..query import MemoryStore, ScopeError, UnknownConversation

    if args.url:  # the service does the work (lychee_ray.commands.serve)
        from .serve import run_remote

        res = run_remote(args)
        if isinstance(res, int):
            return res
        return print_result(res, args)
    cfg = config_from_args(args)
    try:
        store = MemoryStore.open(args.memory, cfg, llm=args.llm)
    except FileNotFoundError as e:
        print(f"lychee-ray query: {e}", file=sys.stderr)
        return 2
    call = store.search if args.search_only else store.query
    try:
        with store:
            res = call(args.conversation, args.question, args.question_date, args.budget_tokens, user_id=args.user)
    except (UnknownConversation, ScopeError) as e:
        print(f"lychee-ray query: {e}", file=sys.stderr)
        return 2
    except ValueError as e:
        print(f"lychee-ray query: {e}", file=sys.stderr)
        return 2
    return print_result(res, args)


def print_result(res, args: argparse.Namespace) -> int:
    if args.json:
        print(json.dumps(res.model_dump(mode="json"), indent=1, ensure_ascii=False))
        return 0
    if not args.search_only:
        print(f"Answer: {res.answer}" + (f"   [answer failed: {res.answer_error}]" if res.answer_error else ""))
    p = res.plan
    print(f"Plan ({p.backend}{', fallback: ' + str(p.fallback_reason) if p.fallback else ''}): {p.question_type}, "
          f"{len(p.routes)} route(s): " + "; ".join(r.search_texts[0] for r in p.routes))
    print(f"Evidence ({len(res.evidence)} items, {res.usage.context_tokens}/{res.budget_tokens} tokens, pool {res.pool_size}):")
    for e in sorted(res.evidence, key=lambda e: -e.score):
        src = ",".join(e.source_turn_ids[:4]) + ("…" if len(e.source_turn_ids) > 4 else "")
        text = " ".join(e.text.split())
        print(f"  {e.score:.3f} {e.kind:7s} {e.type:10s} [{src}] ({'+'.join(e.channels)}) {text[:160]}")
    u = res.usage
    print(f"Query prompt tokens: {u.query_prompt_tokens} (plan {u.plan_prompt_tokens} + answer {u.answer_prompt_tokens})"
          f"{' (offline estimate)' if u.estimated else ''}; LLM calls: {u.llm_calls}")
    if res.rerank.error:
        print(f"Rerank failed (fused order kept): {res.rerank.error}")
    print("Timings (ms): " + ", ".join(f"{k} {v:.1f}" for k, v in res.timings_ms.items()))
    return 0
