"""The size of the chat-currency code of a tree: regular expressions, word lists, lines and config keys.

    python benchmarks/currency_code_size.py --tree /path/to/checkout [--tree ...] [--out R.json]

Counts, over the modules that decide and mark what is current in chats (those of the tree that
exist among :data:`MODULES`): ``re.compile`` calls, word lists (``frozenset``/``set`` built from
arguments, and dicts of five or more string keys), lines; and the fields of ``CurrencyConfig``
(``encoder.currency``) and ``CurrentConfig`` (``query.current``).
"""

from __future__ import annotations

import argparse
import ast
import json
import re
from pathlib import Path

MODULES = (
    "lychee_ray/query/asked_values.py", "lychee_ray/query/asked_conflicts.py", "lychee_ray/text/change_cues.py",
    "lychee_ray/text/values.py", "lychee_ray/text/denials.py", "lychee_ray/ingest/value_slots.py",
    "lychee_ray/ingest/text_links.py", "lychee_ray/query/marks.py", "lychee_ray/query/currency.py",
)


def _fields(src: str, start: str, end: str) -> int:
    part = src[src.index(start):src.index(end)]
    return len(re.findall(r"^    \w+: [^=\n]+= Field", part, re.M))


def measure(tree: Path) -> dict:
    rx = lists = lines = 0
    present = []
    for rel in MODULES:
        p = tree / rel
        if not p.exists():
            continue
        present.append(rel)
        src = p.read_text(encoding="utf-8")
        lines += len(src.splitlines())
        for n in ast.walk(ast.parse(src)):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "compile" \
                    and isinstance(n.func.value, ast.Name) and n.func.value.id == "re":
                rx += 1
            elif isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in ("frozenset", "set") and n.args:
                lists += 1
            elif isinstance(n, ast.Dict) and len(n.keys) >= 5 and all(
                    isinstance(k, ast.Constant) and isinstance(k.value, str) for k in n.keys):
                lists += 1
    enc = (tree / "lychee_ray/config/encoder.py").read_text(encoding="utf-8")
    qry = (tree / "lychee_ray/config/query.py").read_text(encoding="utf-8")
    return {"modules": present, "regexes": rx, "word_lists": lists, "lines": lines,
            "encoder_currency_keys": _fields(enc, "class CurrencyConfig", "class AssistantRecordsConfig"),
            "query_current_keys": _fields(qry, "class CurrentConfig", "class QueryConfig")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tree", action="append", required=True, help="a checkout's root")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    report = {t: measure(Path(t)) for t in args.tree}
    text = json.dumps(report, indent=1)
    print(text)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
