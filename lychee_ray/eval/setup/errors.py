"""The one error type of ``lychee-ray eval``: what went wrong is data (``kind``), not only prose."""

from __future__ import annotations

from typing import Literal

EvalErrorKind = Literal["unknown_dataset", "data_not_found", "unknown_conversation", "no_questions", "no_endpoint", "no_executor"]


class EvalError(RuntimeError):
    """The evaluation cannot run (bad data path, nothing to evaluate, ...); ``kind`` says which case."""

    def __init__(self, kind: EvalErrorKind, message: str) -> None:
        super().__init__(message)
        self.kind: EvalErrorKind = kind
        self.message = message


__all__ = ["EvalError", "EvalErrorKind"]
