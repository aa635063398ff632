"""Does an online append's cost grow with the conversation? (issue 28, item 3)

    python benchmarks/append_scaling.py --out benchmarks/results/append_scaling.json
    python benchmarks/append_scaling.py --sizes 100,1000 --appends 5 --out /tmp/append_scaling.json
    python benchmarks/append_scaling.py --sizes 100,700 --appends 30 --conversation ../shared/data/beam/500K/1 --out /tmp/a.json

For each size N in ``--sizes`` a fresh local store gets one conversation of N turns (LoCoMo turn
texts cycled with fresh ids, ``--session-turns`` per session, dated one day apart; appended in
sessions through one ``MemoryStore.append``, then flushed: a normal stored conversation). Then
``--appends`` single turns are appended one call each, the way an agent writes (rules backend,
``--embedding hash`` by default so the figure is the store's cost, not the model's). Per append it
records the wall time and the bytes written: the sizes of files that are new or changed under the
store root after the call. Two modes, each ``--appends`` turns: *queued* (``append(queue=True)``:
Serve's default request path, the turn stored as a delta and its segmentation queued; the
background catch-up that follows is timed apart) and *inline* (segmented and encoded before the
call returns). The summary gives medians per size and mode and the ratio of each size's medians to
the smallest size's: issue 28 asks for <= 2x at 10,000 vs 100 turns. ``--conversation`` also stores
the first conversation of an input (``--format``, default ``beam``) and appends LoCoMo texts to it in
its last two voices. Run on one machine in one go;
the ratios are what to compare.

Searches after writes: a second ``MemoryStore`` on the same root stands for a search replica. After
each append (and each catch-up) it re-reads the conversation's marker and answers one search; its
time is the cost a replica pays for the write on its next search (reading the new delta, updating
its cached view) plus the search itself, reported next to the same search with nothing changed.
A catch-up that encoded a segment changed records and nodes: at ``appends.view_rebuild_background_min_rows``
rows and more the search after it is answered by the previous view plus the new turns while the
view is rebuilt in the background (``searches_lagged``; the rebuild's time, until the new records
are searchable, is ``background_rebuild_s``); ``--set appends.view_rebuild=inline`` rebuilds on the search.
After an inline append the same: the next append is timed once that rebuild is done (it runs in this
process's threads, which take the interpreter lock in turns with the appender's; a replica is
another process, and its rebuild is no part of the append's cost).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from datetime import date, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from append import LOCOMO, HashEmbedder  # noqa: E402
from calibrate_segmenter import load_locomo  # noqa: E402

from lychee_ray.config import load_config  # noqa: E402
from lychee_ray.io.adapters import read_input  # noqa: E402
from lychee_ray.io.store import StoreWriter  # noqa: E402
from lychee_ray.memory import MemoryStore  # noqa: E402

CID, USER = "scaling", "u-scaling"
START = date(2023, 1, 1)


def source_turns(n: int) -> list[tuple[str, str, str]]:
    """``n`` (role, speaker, text) taken in order from the LoCoMo conversations, cycled."""
    pool = [(t.role, t.speaker, t.content) for c in load_locomo(LOCOMO) for *_, t in c.iter_turns() if t.content.strip()]
    return [pool[i % len(pool)] for i in range(n)]


def turn(i: int, src: tuple[str, str, str], session: int, first: bool) -> dict[str, Any]:
    role, speaker, text = src
    day = (START + timedelta(days=session)).isoformat()
    out = {"turn_id": f"t{i}", "role": role, "speaker": speaker, "content": text, "session_id": f"s{session}"}
    if first:
        out["session_started_at"] = f"{day}T10:00:00"
    return out


def file_sizes(root: Path) -> dict[str, int]:
    """Relative path -> size of every file under ``root``."""
    out: dict[str, int] = {}
    for d, _, files in os.walk(root):
        for f in files:
            p = Path(d) / f
            out[str(p.relative_to(root))] = p.stat().st_size
    return out


def written(before: dict[str, int], after: dict[str, int]) -> tuple[int, int]:
    """Bytes and files new or changed between two :func:`file_sizes` snapshots."""
    changed = [k for k, v in after.items() if before.get(k) != v]
    return sum(after[k] for k in changed), len(changed)


def timed_search(searcher: Any, question: str, cid: str = CID) -> float:
    """Seconds for the search replica to see the latest commit and answer ``question``."""
    t0 = time.perf_counter()
    searcher.reader.refresh_conversation(cid)
    searcher.search(cid, question)
    return round(time.perf_counter() - t0, 4)


def measure(store: Any, searcher: Any, root: Path, src: list, start: int, appends: int, new_turn: Any,
            queue: bool, cid: str = CID, user: str = USER) -> list[dict[str, Any]]:
    """``appends`` single-turn appends from turn ``start`` (``new_turn(i)``: the ``i``-th turn's dict):
    wall time and bytes written by each, and the search replica's next search; with ``queue`` also
    the background half (the catch-up that segments and encodes the queued turn) and the search after it."""
    rows = []
    for k in range(appends):
        i = start + k
        question = f"What did {src[i][1]} say about {' '.join(src[i][2].split()[:6])}?"
        before = file_sizes(root)
        lagged = searcher.cache.lagged
        t1 = time.perf_counter()
        r = store.append(cid, [new_turn(i)], user_id=user, queue=queue)
        wall = time.perf_counter() - t1
        nbytes, nfiles = written(before, file_sizes(root))
        row = {"wall_s": round(wall, 4), "bytes_written": nbytes, "files_written": nfiles,
               "segments_encoded": r.segments_encoded, "records_written": r.records_written,
               "search_after_s": timed_search(searcher, question, cid),
               "search_unchanged_s": timed_search(searcher, question, cid)}
        if not queue:
            # the replica's background rebuild after this write runs in this process (its threads hold the
            # interpreter lock in turns with the appender's): it ends before the next append is timed, as
            # after a catch-up below; a replica is another process, its rebuild is not the append's cost
            t3 = time.perf_counter()
            searcher.cache.wait_idle()
            row["search_lagged"] = searcher.cache.lagged > lagged
            row["background_rebuild_s"] = round(time.perf_counter() - t3, 4) if row["search_lagged"] else 0.0
        if queue:
            before = file_sizes(root)
            t2 = time.perf_counter()
            c = store.catch_up(cid)
            row["catch_up_s"] = round(time.perf_counter() - t2, 4)
            row["catch_up_bytes"] = written(before, file_sizes(root))[0]
            row["catch_up_segments_encoded"] = c.segments_encoded
            lagged = searcher.cache.lagged
            row["search_after_catch_up_s"] = timed_search(searcher, question, cid)
            # appends.view_rebuild: background: that search was answered by the previous view plus the
            # new turns, and the view with the new records is built in the replica's background thread
            t3 = time.perf_counter()
            searcher.cache.wait_idle()
            row["search_lagged"] = searcher.cache.lagged > lagged
            row["background_rebuild_s"] = round(time.perf_counter() - t3, 4) if row["search_lagged"] else 0.0
        rows.append(row)
    return rows


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    def med(key: str, keep: Any = None) -> float | None:
        xs = [r[key] for r in rows if keep is None or keep(r)]
        return statistics.median(xs) if xs else None

    out = {"median_wall_s": med("wall_s"), "median_bytes_written": med("bytes_written"),
           "mean_bytes_written": round(statistics.mean(r["bytes_written"] for r in rows)),
           "max_wall_s": max(r["wall_s"] for r in rows),
           "median_search_after_s": med("search_after_s"), "median_search_unchanged_s": med("search_unchanged_s")}
    if rows and "catch_up_s" in rows[0]:
        out["median_catch_up_s"] = med("catch_up_s")
        out["median_catch_up_bytes"] = med("catch_up_bytes")
        out["median_search_after_catch_up_s"] = med("search_after_catch_up_s")
        # catch-ups that encoded a segment change records and nodes: the replica builds its view again
        out["catch_ups_encoding"] = sum(bool(r["catch_up_segments_encoded"]) for r in rows)
        out["median_search_after_encoding_catch_up_s"] = med("search_after_catch_up_s", lambda r: r["catch_up_segments_encoded"])
    if rows and "search_lagged" in rows[0]:
        out["searches_lagged"] = sum(r["search_lagged"] for r in rows)
        out["median_background_rebuild_s"] = med("background_rebuild_s", lambda r: r["search_lagged"])
    return out


def run_store(root: Path, cid: str, user: str, base: list[dict[str, Any]], src: list, start: int, new_turn: Any,
              appends: int, embedder: Any, cfg: Any) -> dict[str, Any]:
    """A fresh store holding ``base`` (one append, then flushed: a normal stored conversation), then
    ``appends`` queued and ``appends`` inline single-turn appends (``new_turn(i)`` from ``start``)."""
    StoreWriter(root, cfg.store)  # an empty store: the conversation is created by its first append
    t0 = time.perf_counter()
    with MemoryStore.open(root, cfg, embedder=embedder, llm="rules") as store:
        store.append(cid, base, user_id=user)
        store.flush(cid, user_id=user)
        base_s = time.perf_counter() - t0
        # the base build's megabytes reach the disk now, not during the measured appends' fsyncs
        os.sync()
        with MemoryStore.open(root, cfg, embedder=embedder, llm="rules") as searcher:
            searcher.search(cid, "warm-up: load the conversation")
            # queued (Serve's default: the request path) first, then inline (segment + encode before returning)
            queued = measure(store, searcher, root, src, start, appends, new_turn, True, cid, user)
            inline = measure(store, searcher, root, src, start + appends, appends, new_turn, False, cid, user)
    store_bytes = sum(file_sizes(root).values())
    return {"turns": len(base), "base_build_s": round(base_s, 2), "store_bytes": store_bytes,
            "queued": {**summarise(queued), "appends": queued}, "inline": {**summarise(inline), "appends": inline}}


def one_size(n: int, appends: int, session_turns: int, embedder: Any, cfg: Any, work: Path) -> dict[str, Any]:
    """A conversation of ``n`` LoCoMo turns in sessions of ``session_turns``; appends continue its last session."""
    src = source_turns(n + 2 * appends)
    base = [turn(i, src[i], i // session_turns, i % session_turns == 0) for i in range(n)]
    last = (n - 1) // session_turns
    res = run_store(work / f"n{n}", CID, USER, base, src, n, lambda i: turn(i, src[i], last, False), appends, embedder, cfg)
    return {"label": str(n), **res}


def one_conversation(path: str, fmt: str, appends: int, embedder: Any, cfg: Any, work: Path) -> dict[str, Any]:
    """The first conversation of input ``path`` (``fmt``, e.g. a BEAM 500K folder) as the stored one;
    the appended turns are LoCoMo texts said in turn by its last two voices (role and speaker: no new
    speaker, which would re-segment it), continuing its last session."""
    conv = next(iter(read_input(fmt, path))).conversation
    base = [dict(turn_id=t.turn_id, role=t.role, speaker=t.speaker, content=t.content, timestamp=t.timestamp,
                 session_id=s.session_id, session_started_at=s.started_at, meta=t.meta) for _, s, _, t in conv.iter_turns()]
    src = source_turns(2 * appends)
    voices = list(dict.fromkeys((t["role"], t["speaker"]) for t in reversed(base)))[:2][::-1]

    def new_turn(i: int) -> dict[str, Any]:
        role, speaker = voices[i % len(voices)]
        return {"turn_id": f"appended-{i}", "role": role, "speaker": speaker, "content": src[i][2]}

    res = run_store(work / "conversation", conv.conversation_id, conv.user_id, base, src, 0, new_turn, appends,
                    embedder, cfg)
    return {"label": f"{fmt}:{path}", "chars": sum(len(t["content"]) for t in base), **res}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="100,1000,10000", help="conversation sizes in turns (smallest first)")
    ap.add_argument("--appends", type=int, default=10, help="single-turn appends measured per size")
    ap.add_argument("--session-turns", type=int, default=40, help="turns per session of the base conversation")
    ap.add_argument("--embedding", choices=("hash", "local"), default="hash")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="config override")
    ap.add_argument("--conversation", help="also a stored conversation read from this input (e.g. a BEAM 500K folder)")
    ap.add_argument("--format", default="beam", help="the --conversation input's format")
    ap.add_argument("--out", default="benchmarks/results/append_scaling.json")
    args = ap.parse_args(argv)
    sizes = sorted(int(s) for s in args.sizes.split(","))
    cfg = load_config(env={}, sets=args.set)
    embedder = HashEmbedder() if args.embedding == "hash" else None
    results = []
    with tempfile.TemporaryDirectory(prefix="lychee-append-scaling-") as tmp:
        runs: list[Any] = [lambda n=n: one_size(n, args.appends, args.session_turns, embedder, cfg, Path(tmp))
                           for n in sizes]
        if args.conversation:
            runs.append(lambda: one_conversation(args.conversation, args.format, args.appends, embedder, cfg, Path(tmp)))
        for run in runs:
            res = run()
            print(f"{res['label']}, {res['turns']} turns: queued append median {res['queued']['median_wall_s'] * 1000:.0f} ms "
                  f"{res['queued']['median_bytes_written'] / 1e3:.1f} kB (catch-up {res['queued']['median_catch_up_s'] * 1000:.0f} ms), "
                  f"search after it {res['queued']['median_search_after_s'] * 1000:.1f} ms "
                  f"(unchanged {res['queued']['median_search_unchanged_s'] * 1000:.1f} ms); "
                  f"inline {res['inline']['median_wall_s'] * 1000:.0f} ms {res['inline']['median_bytes_written'] / 1e3:.1f} kB "
                  f"(base build {res['base_build_s']} s)", file=sys.stderr)
            results.append(res)
    small = results[0]

    def ratio(a: float | None, b: float | None) -> float | None:
        return round(a / b, 2) if a is not None and b else None

    ratios = {r["label"]: {mode: {
        "wall": ratio(r[mode]["median_wall_s"], small[mode]["median_wall_s"]),
        "bytes": ratio(r[mode]["median_bytes_written"], small[mode]["median_bytes_written"]),
        "search_after": ratio(r[mode]["median_search_after_s"], small[mode]["median_search_after_s"]),
        "search_unchanged": ratio(r[mode]["median_search_unchanged_s"], small[mode]["median_search_unchanged_s"]),
        **({"catch_up_wall": ratio(r[mode]["median_catch_up_s"], small[mode]["median_catch_up_s"]),
            "catch_up_bytes": ratio(r[mode]["median_catch_up_bytes"], small[mode]["median_catch_up_bytes"]),
            "search_after_catch_up": ratio(r[mode]["median_search_after_catch_up_s"],
                                           small[mode]["median_search_after_catch_up_s"]),
            "search_after_encoding_catch_up": ratio(r[mode]["median_search_after_encoding_catch_up_s"],
                                                    small[mode]["median_search_after_encoding_catch_up_s"]),
            "background_rebuild": ratio(r[mode]["median_background_rebuild_s"],
                                        small[mode]["median_background_rebuild_s"])}
           if mode == "queued" else {}),
    } for mode in ("queued", "inline")} for r in results}
    out = {"sizes": sizes, "embedding": args.embedding, "backend": "rules", "config_overrides": args.set,
           "view_rebuild": cfg.appends.view_rebuild,
           "view_rebuild_background_min_rows": cfg.appends.view_rebuild_background_min_rows, "results": results,
           f"ratio_to_{small['turns']}_turns": ratios, "machine": {"cpus": os.cpu_count(), "platform": platform.platform()}}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1))
    print(json.dumps({"ratios": ratios}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
