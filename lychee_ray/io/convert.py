"""Conversion of any supported input to canonical JSONL plus QA and error side files."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from lychee_ray.io.adapters import read_input


@dataclass
class ConvertReport:
    """Counts of one conversion run."""

    conversations: int = 0
    turns: int = 0
    questions: int = 0
    errors: int = 0
    warnings: int = 0
    out: str = ""
    qa_out: str = ""
    errors_out: str = ""
    messages: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        d = dict(self.__dict__)
        d.pop("messages")
        return d


def side_paths(out: str | Path) -> tuple[Path, Path]:
    """QA and error side files next to ``out`` (``X.jsonl`` → ``X.qa.jsonl``, ``X.errors.jsonl``)."""
    out = Path(out)
    stem = out.name[: -len(out.suffix)] if out.suffix else out.name
    return out.with_name(f"{stem}.qa.jsonl"), out.with_name(f"{stem}.errors.jsonl")


def convert(fmt: str, input_path: str | Path, out: str | Path) -> ConvertReport:
    """Convert ``input_path`` to canonical JSONL at ``out``; never stops on a bad conversation."""
    out = Path(out)
    qa_out, err_out = side_paths(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    rep = ConvertReport(out=str(out), qa_out=str(qa_out), errors_out=str(err_out))
    # Write to temporaries and rename at the end so a crash never leaves a half-written output.
    tmp = [p.with_name(p.name + ".tmp") for p in (out, qa_out, err_out)]
    with open(tmp[0], "w", encoding="utf-8") as fc, open(tmp[1], "w", encoding="utf-8") as fq, open(
        tmp[2], "w", encoding="utf-8"
    ) as fe:
        for item in read_input(fmt, input_path):
            for issue in item.issues:
                fe.write(json.dumps(issue.to_dict(), ensure_ascii=False) + "\n")
                rep.messages.append(str(issue))
                if issue.level == "error":
                    rep.errors += 1
                else:
                    rep.warnings += 1
            if item.conversation is None:
                continue
            fc.write(item.conversation.model_dump_json() + "\n")
            rep.conversations += 1
            rep.turns += item.conversation.num_turns
            for q in item.qa:
                fq.write(q.model_dump_json() + "\n")
                rep.questions += 1
    for t, final in zip(tmp, (out, qa_out, err_out), strict=False):
        t.replace(final)
    return rep
