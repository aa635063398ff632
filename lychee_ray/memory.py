"""``MemoryStore``: the library's one object over a memory store — queries and appends.

::

    store = MemoryStore.open("out/locomo")
    res = store.query("locomo-26", "When did Caroline go to the support group?", question_date="2023-08-01")
    res = store.query(QueryRequest(conversation_id="locomo-26", question="When did Caroline go to the support group?",
                                   question_date="2023-08-01"))   # the same request as one object
    store.append("locomo-26", [{"turn_id": "t-901", "speaker": "Caroline", "content": "..."}])

A facade over the query engine (:class:`~lychee_ray.query.engine.QueryEngine`: ``query``,
``search``, scoping, the conversation cache) and the append service
(:class:`~lychee_ray.ingest.append.service.AppendService`: ``append``, ``flush``, ``catch_up``);
after an append that committed, this store reads its own write at once.
"""

from __future__ import annotations

import asyncio
import threading
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from lychee_ray.ingest.context import make_context
from lychee_ray.ingest.forget import ForgetReport, ForgetSelector, forget_records
from lychee_ray.ingest.increment.errors import InvalidTurns
from lychee_ray.ingest.increment.models import AppendRequest, AppendResult, AppendTurn
from lychee_ray.ingest.append.service import AppendService
from lychee_ray.ingest.pipeline import BuildContext
from lychee_ray.config import LycheeConfig
from lychee_ray.embed import Embedder, get_embedder
from lychee_ray.llm.client import LLMClient
from lychee_ray.query.engine import QueryEngine
from lychee_ray.query.rerank import CrossEncoderReranker
from lychee_ray.names import OPENAI_BACKEND


class MemoryStore(QueryEngine):
    """A memory store to query and to append to.

    Queries: :class:`~lychee_ray.query.engine.QueryEngine` (``embedder``, ``llm``, ``llm_client``,
    ``reranker``, ``cache_max_bytes`` are its options). Appends (docs/incremental.md) run through
    one :class:`~lychee_ray.ingest.append.service.AppendService`, whose build context is made on
    first use (:meth:`_append_context`).
    """

    def __init__(
        self,
        root: str | Path,
        config: LycheeConfig | None = None,
        *,
        embedder: Embedder | None = None,
        llm: str | None = None,
        llm_client: LLMClient | None = None,
        reranker: CrossEncoderReranker | None = None,
        cache_max_bytes: int = 0,
    ) -> None:
        super().__init__(root, config, embedder=embedder, llm=llm, llm_client=llm_client, reranker=reranker,
                         cache_max_bytes=cache_max_bytes)
        self._given_embedder = embedder  # (not the query model loaded later: that one never writes vectors)
        self._append_ctx: BuildContext | None = None  # build context of appends, made on first use
        self._append_lock = threading.Lock()
        self.appends = AppendService(self.root, self.config, self._append_context,
                                     committed=self.reader.refresh_conversation)

    def append(
        self, conversation_id: str, turns: list[AppendTurn | dict[str, Any]], user_id: str | None = None,
        flush: bool = False, queue: bool = False,
    ) -> AppendResult:
        """Add turns to a conversation's memory now.

        ``turns``: :class:`~lychee_ray.ingest.increment.models.AppendTurn` objects or dicts (``turn_id``,
        ``role``, ``speaker``, ``content``, ``timestamp``, optional ``session_id``). New turns are
        searchable at once through the raw-turn channel; the segments they close are encoded and
        their records and nodes indexed; ``flush`` also encodes the open tail segment. Idempotent by
        turn id. ``user_id`` must match the stored owner, and is required to create a conversation
        (``appends.create``). Raises the typed errors of :mod:`lychee_ray.ingest.increment.errors`
        (``kind`` says which) and ``ConversationDeleting``; nothing is written then. Blocking: from
        async code use :meth:`aappend`.

        ``queue``: store the turns (searchable at once as raw turns) and leave their segmentation
        and encoding to the next append, :meth:`catch_up` or :meth:`flush` — an append whose cost
        does not grow with the conversation (Serve's background mode). A conversation that is not
        stored yet is appended normally.
        """
        try:
            # (model_validate: the turns may be dicts, which validation turns into AppendTurn)
            request = AppendRequest.model_validate({"conversation_id": conversation_id, "turns": list(turns),
                                                    "user_id": user_id, "flush": flush})
        except ValidationError as e:
            err = e.errors()[0]
            where = ".".join(str(x) for x in err.get("loc", ()))
            raise InvalidTurns(conversation_id, f"{where}: {err.get('msg')}", field=where or None) from None
        return self.appends.append(request, queued=queue)

    def catch_up(self, conversation_id: str) -> AppendResult:
        """Segment and encode the turns queued appends stored (``append(..., queue=True)``); the
        open tail stays open (``flush`` closes it)."""
        return self.append(conversation_id, [])

    async def aappend(self, *args: Any, **kwargs: Any) -> AppendResult:
        """:meth:`append` for async callers (e.g. a Serve replica): runs in a worker thread."""
        return await asyncio.to_thread(self.append, *args, **kwargs)

    def flush(self, conversation_id: str, user_id: str | None = None) -> AppendResult:
        """Encode the open tail segment of a conversation (an append of no turns with ``flush``)."""
        return self.append(conversation_id, [], user_id=user_id, flush=True)

    def forget_records(
        self, user_id: str, *, record_id: str | None = None, slot: str | None = None, entity: str | None = None,
        expired: bool = False, conversation_id: str | None = None, redact_turns: bool = False,
        now: datetime | None = None,
    ) -> ForgetReport:
        """Forget one record, every record of a slot or of an entity, or (``expired``) the records
        past ``store.retention_days``, of ``user_id`` — from every table, index and node of the store
        and from this store's cache (:mod:`lychee_ray.ingest.forget`; docs/erasure.md, "Forgetting").
        ``redact_turns`` also blanks the removed records' source turns (for an entity: the clauses
        naming it in every turn; a record holding other facts too is rewritten without them). Raises
        :class:`~lychee_ray.ingest.forget.ForgetError` (``kind`` says why; nothing changed then)."""
        selector = ForgetSelector(record_id=record_id, slot=slot, entity=entity,
                                  retention_days=self.config.store.retention_days if expired else None)
        report = forget_records(self.reader.layout, user_id, selector, conversation_id=conversation_id,
                                redact_turns=redact_turns, now=now, embedder=self._given_embedder)
        self.reread(report.conversation_ids)  # this process reads the new commit at once
        return report

    def _append_context(self) -> BuildContext:
        """The build context appends use: the build-side embedder (unless one was given to the store:
        then that one, as the build used it), this store's LLM client, the configured backend."""
        with self._append_lock:
            if self._append_ctx is None:
                backend = self.backend()
                # the store's embedder when it has one by now (given to it, as the build used it)
                embedder = self._embedder if self._embedder is not None else get_embedder(self.config.embedding,
                                                                                         self.config.llm)
                self._append_ctx = make_context(self.config, backend, embedder, batched=False,
                                                llm_client=self.llm_client() if backend == OPENAI_BACKEND else None)
            return self._append_ctx


__all__ = ["MemoryStore"]
