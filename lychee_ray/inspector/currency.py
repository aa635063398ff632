"""A conversation's record statuses and slot chains, as the query path derives them.

Nothing is derived here: statuses come from :func:`~lychee_ray.query.currency.scope_currency` over the
engine's loaded view of the conversation (the links the newer records carry,
:func:`~lychee_ray.core.currency.derive_status`), and each slot's chain is
:func:`~lychee_ray.query.history.slot_history` — what ``GET /v1/history`` answers for that slot of
this conversation. Statuses are the conversation's own: a search over a user's conversations may
also link records across them.

A conversation none of whose records names a slot or a link has only current records and no
chain: its view is not loaded for that (the page reads the store's parts).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from lychee_ray.inspector.models import RecordCurrency, SlotChain
from lychee_ray.query.currency import scope_currency
from lychee_ray.query.engine import QueryEngine
from lychee_ray.query.history import slot_history

# the record columns a status or a chain is derived from
LINK_COLUMNS = ("slot", "supersedes", "conflicts_with")


def has_links(records: Iterable[Mapping[str, Any]]) -> bool:
    """Whether any record names a slot, a record it replaces or one it conflicts with."""
    return any(r.get(c) for r in records for c in LINK_COLUMNS)


def record_currency(engine: QueryEngine, conversation_id: str) -> tuple[dict[str, RecordCurrency], list[SlotChain]]:
    """Every record's status (by record id) and every slot's chain, oldest value first; chains in
    the order of their first value's time."""
    with engine.cache.request():
        view = engine.view(conversation_id)
        sc = scope_currency({conversation_id: view})
        statuses = {}
        for pos, rid in enumerate(view.record_ids):
            st = sc.status(conversation_id, pos)
            statuses[rid] = RecordCurrency(status=st.status, superseded_by=list(st.superseded_by), valid_until=st.valid_until,
                                           conflicts_with=list(st.conflicts), latest=list(st.latest))
        chains = [SlotChain(slot=slot, entries=slot_history(sc, slot=slot).entries) for slot in sc.per_view[conversation_id].slots]
    chains.sort(key=lambda c: (c.entries[0].valid_from or "", c.slot) if c.entries else ("", c.slot))
    return statuses, chains


__all__ = ["LINK_COLUMNS", "has_links", "record_currency"]
