"""The closed sets of names the package chooses between, each defined once: a ``Literal`` type, the
tuple of its values (for choices and checks) and a constant per value that code compares with.

Code writes ``backend == OPENAI_BACKEND`` or ``choices=LLM_BACKENDS``, never the string again, so a
typo is a mypy error and a new value is added here. Open sets have registries instead: input
formats (``io/adapters/registry.py``) and recall channels (``query/channels/__init__.py``). A
record's status (current, superseded, …) belongs to the data model: ``core/status.py``.
"""

from __future__ import annotations

from typing import Final, Literal, get_args

# Which LLM runs the three roles (encode, plan, answer): a real endpoint, or the offline rules.
LLMBackend = Literal["openai", "rules"]
LLM_BACKENDS: Final[tuple[LLMBackend, ...]] = get_args(LLMBackend)
OPENAI_BACKEND: Final[LLMBackend] = "openai"
RULES_BACKEND: Final[LLMBackend] = "rules"
# What ``llm.backend`` may say: a backend, or ``auto`` (openai when an endpoint is configured).
LLMBackendChoice = Literal["auto", "openai", "rules"]
LLM_BACKEND_CHOICES: Final[tuple[LLMBackendChoice, ...]] = get_args(LLMBackendChoice)
AUTO: Final = "auto"

# Which embedder runs: a local model, or an OpenAI-compatible ``/v1/embeddings`` endpoint.
EmbeddingBackend = Literal["local", "openai"]
EMBEDDING_BACKENDS: Final[tuple[EmbeddingBackend, ...]] = get_args(EmbeddingBackend)
LOCAL_EMBEDDING: Final[EmbeddingBackend] = "local"
OPENAI_EMBEDDING: Final[EmbeddingBackend] = "openai"

# Where a build runs: in this process, or as a Ray Data job.
Runner = Literal["local", "ray"]
RUNNERS: Final[tuple[Runner, ...]] = get_args(Runner)
LOCAL_RUNNER: Final[Runner] = "local"
RAY_RUNNER: Final[Runner] = "ray"

# The unit the segmenter embeds and cuts between: a user turn with the answers to it (role), two
# consecutive turns (pair), or each turn alone (turn).
ExchangeMode = Literal["role", "pair", "turn"]
EXCHANGE_MODES: Final[tuple[ExchangeMode, ...]] = get_args(ExchangeMode)
ROLE_MODE: Final[ExchangeMode] = "role"
PAIR_MODE: Final[ExchangeMode] = "pair"
TURN_MODE: Final[ExchangeMode] = "turn"
# What ``segmenter.exchange_mode`` may say: a mode, or ``auto`` (role when a turn answers a user).
ExchangeModeChoice = Literal["auto", "role", "pair", "turn"]
EXCHANGE_MODE_CHOICES: Final[tuple[ExchangeModeChoice, ...]] = get_args(ExchangeModeChoice)
# The modes ``auto`` may pick where no turn answers a user (``segmenter.auto_without_roles``).
UnitWithoutRoles = Literal["pair", "turn"]

# How the segmenter cuts: on its boundary probability (semantic), or every N exchanges (fixed).
SegmentationMethod = Literal["semantic", "fixed"]

# How the rules encoder writes "we": as "A and B" on contact cues (auto), always (pair), or as it is.
WeMode = Literal["auto", "pair", "keep"]

# The encode call that retries a degenerate reply: its context without the record list
# (no_records), or the list shown as "already stored, do not repeat" (do_not_repeat).
RepairMode = Literal["no_records", "do_not_repeat"]

# How a query result lists its evidence (its context lists the same evidence by date).
EvidenceOrder = Literal["score"]
BY_SCORE: Final[EvidenceOrder] = "score"

# What an answer is: written by the LLM from the evidence (generated), or the rules backend's quote
# of the evidence sentence that answers (extractive).
AnswerKind = Literal["generated", "extractive"]
GENERATED_ANSWER: Final[AnswerKind] = "generated"
EXTRACTIVE_ANSWER: Final[AnswerKind] = "extractive"

# An embedding model's weights: as trained (none), or int8 per channel.
Quantization = Literal["none", "int8"]

# Precision of stored search-only vectors (records, nodes, passages).
VectorPrecision = Literal["fp32", "fp16", "int8"]

# What the write path's decide step assigns a conversation: construct it whole (build), or continue
# the stored one with its new turns (increment). (A query plan's retrieval routes are another thing:
# query/plan/model.py ``Route``.)
WriteRoute = Literal["build", "increment"]
BUILD_ROUTE: Final[WriteRoute] = "build"
INCREMENT_ROUTE: Final[WriteRoute] = "increment"

# When a piece of work runs: in the call that asks for it, or in a background task after it returns.
Scheduling = Literal["inline", "background"]
INLINE: Final[Scheduling] = "inline"
BACKGROUND: Final[Scheduling] = "background"

# The benchmarks ``lychee-ray eval`` runs; each is also the name of its input format.
DatasetName = Literal["locomo", "longmemeval", "beam"]
DATASETS: Final[tuple[DatasetName, ...]] = get_args(DatasetName)
LOCOMO: Final[DatasetName] = "locomo"
LONGMEMEVAL: Final[DatasetName] = "longmemeval"
BEAM: Final[DatasetName] = "beam"

# What a build does with a stored conversation whose input rewrote its history: quarantine it, or
# build it again from the input (``build.on_conflict``, ``--on-conflict``).
OnConflict = Literal["error", "rebuild"]
ON_CONFLICT_CHOICES: Final[tuple[OnConflict, ...]] = get_args(OnConflict)
REBUILD_ON_CONFLICT: Final[OnConflict] = "rebuild"

# How the evaluation's judge grades an answer: by the question's rubric, or against the gold answer
# (``eval.beam.judge``, ``--judge``).
JudgeProtocol = Literal["rubric", "answer"]
JUDGE_PROTOCOLS: Final[tuple[JudgeProtocol, ...]] = get_args(JudgeProtocol)
RUBRIC_JUDGE: Final[JudgeProtocol] = "rubric"
ANSWER_JUDGE: Final[JudgeProtocol] = "answer"

# What a query searches: one conversation, or every conversation of a user.
Scope = Literal["conversation", "user"]
SCOPES: Final[tuple[Scope, ...]] = get_args(Scope)
CONVERSATION_SCOPE: Final[Scope] = "conversation"
USER_SCOPE: Final[Scope] = "user"

# The stages a build run's turns pass, in pipeline order (the progress display counts turns per stage):
# turn vectors, segmentation, encoding (one LLM call per segment), record and node vectors, commit.
BuildStageName = Literal["embed_turns", "segment", "encode", "embed_memory", "commit"]
BUILD_STAGES: Final[tuple[BuildStageName, ...]] = get_args(BuildStageName)
EMBED_TURNS_STAGE: Final[BuildStageName] = "embed_turns"
SEGMENT_STAGE: Final[BuildStageName] = "segment"
ENCODE_STAGE: Final[BuildStageName] = "encode"
EMBED_MEMORY_STAGE: Final[BuildStageName] = "embed_memory"
COMMIT_STAGE: Final[BuildStageName] = "commit"

__all__ = [
    "ANSWER_JUDGE", "AnswerKind", "BY_SCORE", "EXTRACTIVE_ANSWER", "EvidenceOrder", "GENERATED_ANSWER",
    "AUTO", "BACKGROUND", "BEAM", "BUILD_ROUTE", "BUILD_STAGES", "BuildStageName",
    "COMMIT_STAGE", "CONVERSATION_SCOPE", "DATASETS", "DatasetName", "EMBEDDING_BACKENDS",
    "EMBED_MEMORY_STAGE", "EMBED_TURNS_STAGE", "ENCODE_STAGE", "EXCHANGE_MODES", "EXCHANGE_MODE_CHOICES",
    "EmbeddingBackend", "ExchangeMode", "ExchangeModeChoice", "INCREMENT_ROUTE", "INLINE",
    "JUDGE_PROTOCOLS", "JudgeProtocol", "LLMBackend", "LLMBackendChoice", "LLM_BACKENDS",
    "LLM_BACKEND_CHOICES", "LOCAL_EMBEDDING", "LOCAL_RUNNER", "LOCOMO", "LONGMEMEVAL",
    "ON_CONFLICT_CHOICES", "OPENAI_BACKEND", "OPENAI_EMBEDDING", "OnConflict", "PAIR_MODE", "Quantization",
    "RAY_RUNNER", "REBUILD_ON_CONFLICT", "ROLE_MODE", "RUBRIC_JUDGE", "RULES_BACKEND", "RUNNERS",
    "RepairMode", "Runner", "SCOPES", "SEGMENT_STAGE", "Scheduling", "Scope", "SegmentationMethod",
    "TURN_MODE", "USER_SCOPE", "UnitWithoutRoles", "VectorPrecision", "WeMode", "WriteRoute",
]
