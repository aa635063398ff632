"""lychee_ray: LycheeMemory V2 long-term memory for LLM agents on Ray Data and Ray Serve.

The public API (everything in ``__all__``) is importable from here; each name is loaded on first
use, so ``import lychee_ray`` stays cheap and never imports Ray::

    import lychee_ray as L
    summary = L.build_memory([conversation, ...], "out/store", llm="rules")
    with L.MemoryStore.open("out/store") as store:
        result = store.query("c-1", "Where did Caroline move from?")
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# public name -> module that defines it
_EXPORTS: dict[str, str] = {
    # configuration
    "LycheeConfig": "lychee_ray.config",
    "load_config": "lychee_ray.config",
    "ConfigError": "lychee_ray.config",
    # data model
    "Conversation": "lychee_ray.core.conversation",
    "Session": "lychee_ray.core.conversation",
    "Turn": "lychee_ray.core.conversation",
    "QAItem": "lychee_ray.core.conversation",
    "MemoryRecord": "lychee_ray.core.records",
    "EvidenceNode": "lychee_ray.core.records",
    "TimeSpan": "lychee_ray.core.records",
    # building
    "build_memory": "lychee_ray.api",
    "evaluate": "lychee_ray.api",
    "BuildSummary": "lychee_ray.ingest.runner",
    "read_input": "lychee_ray.io.adapters",
    # the store and its queries
    "MemoryStore": "lychee_ray.memory",
    "QueryRequest": "lychee_ray.query.request",
    "SearchResult": "lychee_ray.query.results",
    "QueryResult": "lychee_ray.query.results",
    "EvidenceItem": "lychee_ray.query.results",
    "QueryUsage": "lychee_ray.query.results",
    "QueryPlan": "lychee_ray.query.plan",
    "HistoryResult": "lychee_ray.query.history",
    "HistoryEntry": "lychee_ray.query.history",
    "UnknownConversation": "lychee_ray.query.errors",
    "ScopeError": "lychee_ray.query.errors",
    "NotAStoreError": "lychee_ray.io.store",
    # appends to a store (MemoryStore.append / aappend / flush / catch_up) and their typed errors
    "AppendTurn": "lychee_ray.ingest.increment.models",
    "AppendResult": "lychee_ray.ingest.increment.models",
    "IncrementError": "lychee_ray.ingest.increment.errors",
    "HistoryConflict": "lychee_ray.ingest.increment.errors",
    "OwnerMismatch": "lychee_ray.ingest.increment.errors",
    "UnknownConversationError": "lychee_ray.ingest.increment.errors",
    "UserIdRequired": "lychee_ray.ingest.increment.errors",
    "ConversationBusy": "lychee_ray.ingest.increment.errors",
    "InvalidTurns": "lychee_ray.ingest.increment.errors",
    "ConfigMismatch": "lychee_ray.ingest.increment.errors",
    "ConversationDeleting": "lychee_ray.io.store.locks",
    # a running service (lychee-ray serve / Ray Serve) over HTTP
    "MemoryClient": "lychee_ray.serve.client",
    "RemoteError": "lychee_ray.serve.client",
    "verify_store": "lychee_ray.io.verify",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'lychee_ray' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this hook
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
