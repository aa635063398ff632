"""The stages in one process: an asyncio pipeline (``lychee-ray build --local``, ``build_memory``).

Decide → embed turns → construct → embed records and nodes → commit, each stage a coroutine (the
construct stage ``build.conversations_in_flight`` of them) joined by queues, so the model embeds the
texts of whatever conversations wait at its stage in one call (up to the stage's ``batch_size``)
while other conversations are constructed (the model runs in a worker thread), and outcomes come
out as each conversation commits. At most ``build.conversations_in_flight`` + ``embed_turns.batch_size``
conversations are in the pipeline at once. A conversation another writer committed after its
decision comes out of the commit stage undecided; :meth:`LocalStages.run_rounds` decides those again
(``build.decide_rounds``).

The build context (its embedding models) is made when the first conversation reaches the turn
embedding stage, so a run whose conversations are all decided without work (a re-run of a built
input) loads no model; with a turn sink, every stage reports the turns it passes
(ingest/stages/turn_report.py).
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field
from typing import Any
from collections.abc import Callable, Iterable

from lychee_ray.ingest.commit import Committer, contended_outcome
from lychee_ray.ingest.construct import Constructor
from lychee_ray.ingest.decide import Decider
from lychee_ray.ingest.outcomes import Outcome
from lychee_ray.ingest.pipeline import BuildContext
from lychee_ray.ingest.stages.embedding import embed_memory, embed_turns
from lychee_ray.ingest.stages.turn_report import TurnSink, chunk_reporter, complete
from lychee_ray.ingest.stages.work import StageWork
from lychee_ray.io.adapters import AdapterItem
from lychee_ray.io.store import StoreWriter
from lychee_ray.names import EMBED_MEMORY_STAGE, EMBED_TURNS_STAGE, BuildStageName

_END = object()


class _StageQueue:
    """A queue between two stages that its ``producers`` close (consumers then read None)."""

    def __init__(self, producers: int = 1) -> None:
        self._q: asyncio.Queue[Any] = asyncio.Queue()
        self._open = producers

    async def put(self, w: StageWork) -> None:
        await self._q.put(w)

    async def close(self) -> None:
        self._open -= 1
        if self._open == 0:
            await self._q.put(_END)

    async def get(self) -> StageWork | None:
        w = await self._q.get()
        if w is _END:
            await self._q.put(_END)  # every other consumer must see the end too
            return None
        return w

    async def take(self, n: int) -> list[StageWork]:
        """The next item and whatever else waits, up to ``n`` ([] once closed and drained)."""
        first = await self.get()
        if first is None:
            return []
        out = [first]
        while len(out) < n and not self._q.empty():
            w = self._q.get_nowait()
            if w is _END:
                await self._q.put(_END)
                break
            out.append(w)
        return out


class LazyContext:
    """A run's build context, made by ``make`` (in a worker thread: it loads the models) the first
    time a stage needs it."""

    def __init__(self, make: Callable[[], BuildContext], on_phase: Callable[[bool], None] | None = None) -> None:
        """``on_phase(True)`` before the context is made, ``on_phase(False)`` once it is (the progress
        display's phase)."""
        self._make = make
        self._on_phase = on_phase
        self._ctx: BuildContext | None = None
        self._lock = threading.Lock()

    @classmethod
    def of(cls, ctx: BuildContext) -> LazyContext:
        """A context made already."""
        lazy = cls(lambda: ctx)
        lazy._ctx = ctx
        return lazy

    @property
    def made(self) -> BuildContext | None:
        return self._ctx

    def get_sync(self) -> BuildContext:
        with self._lock:
            if self._ctx is None:
                if self._on_phase is not None:
                    self._on_phase(True)
                try:
                    self._ctx = self._make()
                finally:
                    if self._on_phase is not None:
                        self._on_phase(False)
            return self._ctx

    async def get(self) -> BuildContext:
        return self._ctx if self._ctx is not None else await asyncio.to_thread(self.get_sync)


@dataclass
class LocalStages:
    """The stage objects of one process, and its batch sizes."""

    decider: Decider
    context: LazyContext
    writer: StoreWriter
    committer: Committer
    max_turn_chars: int
    turn_batch: int
    memory_batch: int
    commit_batch: int
    in_flight: int
    rounds: int = 1  # decisions a conversation gets in all (build.decide_rounds)
    report: TurnSink | None = None  # where each stage reports the turns it passes (progress)
    embed_chunk: int = 0  # texts per model call when reporting (embedding.progress_texts; 0: one call)
    _constructor: Constructor | None = field(default=None, init=False, repr=False)

    def constructor(self, ctx: BuildContext) -> Constructor:
        """The run's one construct step (its semaphore bounds the conversations in flight)."""
        if self._constructor is None:
            self._constructor = Constructor(ctx, self.writer, self.in_flight, self.report)
        return self._constructor

    def _completed(self, works: list[StageWork], stage: BuildStageName) -> None:
        if self.report is not None:
            reports = [r for w in works if not w.done and not w.again for r in complete(w, stage)]
            if reports:
                self.report(reports)

    async def run_rounds(self, items: Iterable[AdapterItem], on_outcome: Callable[[StageWork, Outcome], None],
                         on_decided: Callable[[StageWork], None] | None = None) -> None:
        """Every item to one outcome: :meth:`run`, then the conversations another writer committed
        after their decision through the stages again, ``rounds`` decisions in all (then they fail
        at stage ``commit``)."""
        todo: Iterable[AdapterItem] = items
        for _ in range(self.rounds):
            again = await self.run(todo, on_outcome, on_decided)
            if not again:
                return
            todo, on_decided = [w.item for w in again], None  # (each was counted once as decided)
        for w in again:
            on_outcome(w, contended_outcome(w.item, self.rounds))

    async def run(self, items: Iterable[AdapterItem], on_outcome: Callable[[StageWork, Outcome], None],
                  on_decided: Callable[[StageWork], None] | None = None) -> list[StageWork]:
        """Every item to one outcome (``on_outcome`` as each commits) or back to be decided again (the
        works returned); ``on_decided`` sees each decision."""
        max_chars = self.max_turn_chars
        slots = asyncio.Semaphore(self.in_flight + self.turn_batch)
        to_embed, to_construct, to_vectors = _StageQueue(), _StageQueue(), _StageQueue(self.in_flight)
        to_commit = _StageQueue()
        again: list[StageWork] = []

        def finished(w: StageWork, o: Outcome) -> None:
            slots.release()
            on_outcome(w, o)

        async def decide() -> None:
            for item in items:
                await slots.acquire()
                w = await asyncio.to_thread(self.decider.decide, item)  # a marker read: file or object storage
                if on_decided is not None:
                    on_decided(w)
                if w.done:
                    assert w.outcome is not None
                    finished(w, w.outcome)
                else:
                    await to_embed.put(w)
            await to_embed.close()

        async def turns() -> None:
            while batch := await to_embed.take(self.turn_batch):
                ctx = await self.context.get()
                await embed_turns(batch, ctx.embed, ctx.embed_dim, max_chars, self.embed_chunk,
                                  chunk_reporter(EMBED_TURNS_STAGE, self.report))
                self._completed(batch, EMBED_TURNS_STAGE)
                for w in batch:
                    await to_construct.put(w)
            await to_construct.close()

        async def construct() -> None:
            while (w := await to_construct.get()) is not None:
                await self.constructor(await self.context.get()).run([w])
                await to_vectors.put(w)
            await to_vectors.close()

        async def vectors() -> None:
            while batch := await to_vectors.take(self.memory_batch):
                ctx = await self.context.get()
                await embed_memory(batch, ctx.memory_embed, ctx.embed_dim, self.embed_chunk,
                                   chunk_reporter(EMBED_MEMORY_STAGE, self.report))
                self._completed([w for w in batch if w.embedded], EMBED_MEMORY_STAGE)
                for w in batch:
                    await to_commit.put(w)
            await to_commit.close()

        async def commit() -> None:
            while batch := await to_commit.take(self.commit_batch):
                await self.committer.run(batch, finished)
                for w in batch:
                    if w.again:
                        slots.release()
                        again.append(w)

        await asyncio.gather(decide(), turns(), *(construct() for _ in range(self.in_flight)), vectors(), commit())
        return again


__all__ = ["LazyContext", "LocalStages"]
