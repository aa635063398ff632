"""The memory store (DESIGN §2): Parquet tables + per-conversation FAISS indexes, committed atomically.

:mod:`.layout` spells every path and the commit rules; :mod:`.writer` commits conversations;
:mod:`.reader` reads them; :mod:`.compact` merges parts; :mod:`.index` builds the FAISS indexes;
:mod:`.erase` removes a conversation or a user everywhere; :mod:`.locks` serialises writers;
:mod:`.marker` is the typed commit marker, :mod:`.artifacts` what a commit writes (whole artifacts or a delta)
and :mod:`.tables` the registry of tables they all loop over.
"""

from lychee_ray.io.store.artifacts import ConversationArtifacts, ConversationDelta, TableDelta, TableVectors
from lychee_ray.io.store.compact import compact
from lychee_ray.io.store.erase import EraseReport, NothingToErase, erase_conversation, erase_user
from lychee_ray.io.store.index import build_flat_index
from lychee_ray.io.store.layout import (
    STORE_VERSION,
    NotAStoreError,
    StoreLayout,
    atomic_write_text,
    conversation_key,
    iter_markers,
)
from lychee_ray.io.store.marker import CommitMarker, ConversationReplaced, MarkerError
from lychee_ray.io.store.tables import TableSpec, VectorIndex, register_table, table_names, table_specs, unregister_table
from lychee_ray.io.store.locks import (
    ConversationDeleting,
    LockBusy,
    async_write_lock,
    conversation_write_lock,
    is_deleting,
    write_lock,
)
from lychee_ray.io.store.reader import ConversationData, StoreReader, read_part, read_parts
from lychee_ray.io.store.writer import StoreWriter

__all__ = [
    "STORE_VERSION", "CommitMarker", "ConversationArtifacts", "ConversationData", "MarkerError",
    "StoreReader", "StoreWriter", "NotAStoreError", "StoreLayout", "TableSpec", "VectorIndex", "atomic_write_text",
    "build_flat_index", "compact", "conversation_key", "iter_markers", "read_part", "read_parts", "register_table", "table_names",
    "table_specs", "unregister_table",
    "ConversationDeleting", "ConversationReplaced", "EraseReport", "NothingToErase", "conversation_write_lock", "erase_conversation",
    "erase_user", "is_deleting",
    "ConversationDelta", "LockBusy", "TableDelta", "TableVectors", "async_write_lock", "write_lock",
]
