"""Errors of the query side: what a caller may get back instead of a result.

Both carry their kind in their type (and subclass the built-in error a caller would expect:
a missing key, a refused permission), so callers map them without reading messages.
"""

from __future__ import annotations


class UnknownConversation(KeyError):
    """The conversation (or user) is not in the store."""


class ScopeError(PermissionError):
    """The conversation does not belong to the user the query is scoped to."""


__all__ = ["ScopeError", "UnknownConversation"]
