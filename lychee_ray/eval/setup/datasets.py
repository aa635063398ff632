"""Benchmark questions for ``lychee-ray eval``: load a dataset, select conversations and questions.

LoCoMo: categories ``eval.locomo_categories`` (the paper's 1,540 questions); LongMemEval: every
instance's question (six types; ``*_abs`` = abstention); BEAM: every probing question of the ten
abilities (``abstention`` ones by ``meta.abstention``; the rubric travels with the question for the
rubric judge). ``conversations`` picks the first N conversations or named ids, ``limit`` the first N
questions per conversation.
"""

from __future__ import annotations

import hashlib
import logging
import os
from dataclasses import dataclass
from pathlib import Path

from lychee_ray.config import LycheeConfig
from lychee_ray.core.conversation import Conversation, QAItem
from lychee_ray.eval.setup.errors import EvalError
from lychee_ray.eval.setup.layout import RunLayout
from lychee_ray.eval.setup.rows import QuestionPayload
from lychee_ray.io.adapters import read_input
from lychee_ray.names import DATASETS, DatasetName, LOCOMO

log = logging.getLogger(__name__)

LOCOMO_CATEGORY_NAMES = {"1": "multi-hop", "2": "temporal", "3": "open-domain", "4": "single-hop", "5": "adversarial"}
LONGMEMEVAL_TYPES = ("single-session-user", "single-session-assistant", "single-session-preference", "multi-session",
                     "temporal-reasoning", "knowledge-update")
# Readable prefix of the input file's content hash (the subset file name; not a security boundary).
SUBSET_DIGEST_CHARS = 12
# Conversation ids quoted in an "unknown conversation id" error.
KNOWN_IDS_SHOWN = 12


@dataclass
class Dataset:
    """The selected conversations and their selected questions."""

    name: DatasetName
    conversations: list[Conversation]
    questions: list[QAItem]

    @property
    def conversation_ids(self) -> list[str]:
        """Ids of the selected conversations, in selection order."""
        return [c.conversation_id for c in self.conversations]

    def turn_sessions(self) -> dict[str, dict[str, str]]:
        """conversation id → turn id → session id."""
        return {c.conversation_id: {t.turn_id: s.session_id for _, s, _, t in c.iter_turns()} for c in self.conversations}


def select_conversations(all_ids: list[str], spec: str | int | None) -> list[str]:
    """``None`` = all; ``N`` = the first N; ``ID,ID`` = those ids (an unknown id is an error)."""
    if spec is None or spec == "":
        return list(all_ids)
    s = str(spec).strip()
    if s.isdigit():
        return list(all_ids[: int(s)])
    wanted = [x.strip() for x in s.split(",") if x.strip()]
    missing = [x for x in wanted if x not in all_ids]
    if missing:
        raise EvalError("unknown_conversation", f"unknown conversation id(s): {', '.join(missing)} "
                                                f"(known: {', '.join(all_ids[:KNOWN_IDS_SHOWN])}...)")
    return wanted


def load_dataset(dataset: DatasetName, data: str | Path, cfg: LycheeConfig, conversations: str | int | None = None,
                 limit: int | None = None) -> Dataset:
    """The selected conversations and their questions (LoCoMo: ``eval.locomo_categories`` only)."""
    if dataset not in DATASETS:
        raise EvalError("unknown_dataset", f"unknown dataset {dataset!r}; expected one of {', '.join(DATASETS)}")
    if not Path(data).exists():
        raise EvalError("data_not_found", f"data not found: {data}")
    convs: dict[str, Conversation] = {}
    qas: dict[str, list[QAItem]] = {}
    for item in read_input(dataset, data):
        for issue in item.issues:  # adapter warnings (e.g. repaired / dropped gold evidence ids)
            log.log(logging.WARNING if issue.level == "error" else logging.INFO, "%s: %s", item.where, issue.message)
        if item.conversation is None:
            continue
        cid = item.conversation.conversation_id
        convs[cid] = item.conversation
        qas.setdefault(cid, []).extend(item.qa)
    ids = select_conversations(list(convs), conversations)
    cats = set(cfg.eval.locomo_categories) if dataset == LOCOMO else None
    questions: list[QAItem] = []
    for cid in ids:
        qs = [q for q in qas.get(cid, []) if cats is None or q.category in cats]
        questions.extend(qs[:limit] if limit else qs)
    if not questions:
        raise EvalError("no_questions", "no questions selected")
    return Dataset(dataset, [convs[c] for c in ids], questions)


def conversation_split(cfg: LycheeConfig, conversation_id: str) -> str | None:
    """``dev`` or ``test`` for a conversation of the fixed LoCoMo split (``eval.locomo_split``), else None."""
    sp = cfg.eval.locomo_split
    if conversation_id in sp.dev:
        return "dev"
    if conversation_id in sp.test:
        return "test"
    return None


def category_name(dataset: str, category: str) -> str:
    """Readable category name (LoCoMo numbers → names; LongMemEval types as they are)."""
    return LOCOMO_CATEGORY_NAMES.get(category, category) if dataset == LOCOMO else category


def question_payload(q: QAItem) -> QuestionPayload:
    """A question as the answerers receive it (JSON-serialisable)."""
    return {"question_id": q.question_id, "conversation_id": q.conversation_id, "question": q.question,
            "answer": q.answer, "category": q.category, "question_date": q.question_date,
            "abstention": bool(q.meta.get("abstention")) or q.question_id.endswith("_abs"), "evidence": list(q.evidence),
            "rubric": [str(r) for r in q.meta.get("rubric") or []]}


def write_subset(ds: Dataset, run_dir: Path) -> Path:
    """The selected conversations as canonical JSONL (what the build reads); written once."""
    lines = [c.model_dump_json() for c in ds.conversations]
    digest = hashlib.sha256("\n".join(lines).encode()).hexdigest()[:SUBSET_DIGEST_CHARS]
    path = RunLayout(run_dir).input_dir / f"{ds.name}-{len(lines)}-{digest}.jsonl"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
        os.replace(tmp, path)
    return path


__all__ = [
    "DATASETS",
    "LOCOMO_CATEGORY_NAMES",
    "LONGMEMEVAL_TYPES",
    "Dataset",
    "category_name",
    "conversation_split",
    "load_dataset",
    "question_payload",
    "select_conversations",
    "write_subset",
]
