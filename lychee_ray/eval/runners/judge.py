"""LLM judge: CORRECT / WRONG for an answer against the gold answer (DESIGN §5).

The protocol follows the paper's (the LoCoMo judge used by Mem0 and LycheeMemory): a binary label,
**generous** on wording, length and format — an answer that contains or clearly states the gold
fact is CORRECT even when it is longer or phrased differently; dates are equal when they denote the
same day/month/year in any format ("7 May 2023", "May 7th, 2023", "2023-05-07"), and a relative
time that resolves to the gold date counts. LongMemEval adds per-type notes (its official judge
prompts): temporal answers may be off by one day/week where the question counts days; a
knowledge-update answer must give the *updated* value; preference questions are graded on whether
the answer respects the user's stated preference; an **abstention** question (``*_abs``) is
CORRECT exactly when the answer says the information is not available or was never mentioned.

**Rubric judge** (BEAM, ``eval.beam.judge: rubric``): the benchmark's protocol — an LLM scores the
response against each rubric statement of the question (1 = satisfied, 0.5 = partly, 0 = not), the
question's score is the mean (``judge_score``), and it counts as CORRECT at
``eval.beam.rubric_pass_score`` or above. The reply is ``{"scores": [...], "reason"}``, one score per
statement in order; a reply with another number of scores is a failed verdict (redone on resume).

The call goes through the ``openai`` backend: ``stage="judge"`` (its tokens are accounted apart
from plan/answer), temperature 0, schema-constrained ``{"verdict": "CORRECT"|"WRONG", "reason"}``.
Parsing is lenient: the reply model also accepts ``{"label": ...}``, ``{"correct": true}``,
lowercase or decorated labels ("**Correct.**", "INCORRECT", "yes"/"no") and a bare JSON string
(``"CORRECT"``); when the server ignores the schema and answers plain text, the client gives up with
an invalid-JSON error that quotes the reply — :func:`parse_verdict` then reads the label from that
text, so a plain ``CORRECT`` / ``WRONG`` still counts.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from lychee_ray.config import LycheeConfig
from lychee_ray.llm.errors import LLMCallFailed
from lychee_ray.llm.prompts import prompt_tokens_estimate
from lychee_ray.text.tokens import DEFAULT_ENCODING

log = logging.getLogger(__name__)

Verdict = Literal["CORRECT", "WRONG"]

JUDGE_SYSTEM = """You grade answers of a long-term memory assistant. You get a question, the gold (ground-truth)
answer and a generated answer. Label the generated answer CORRECT or WRONG.

Be generous:
- The generated answer may be longer, phrased differently, or add details; it is CORRECT if it contains
  or clearly states the same fact as the gold answer (same person, thing, place, number, event).
- Dates and times: it is CORRECT if it refers to the same date or period as the gold answer, in any
  format ("7 May 2023" = "May 7th, 2023" = "2023-05-07"; "May 2023" for a gold month), or with a
  relative expression that resolves to it. A gold answer like "the week before 9 June 2023" is matched
  by any date in that week.
- For a gold answer that lists several items, the generated answer should name the main ones; missing
  a minor item is fine, contradicting the gold answer is not.
It is WRONG if it gives a different fact, contradicts the gold answer, is too vague to match it, or
says it does not know (unless the note below says the question is unanswerable).

Reply with JSON: {"verdict": "CORRECT" or "WRONG", "reason": one short sentence}."""

ABSTENTION_NOTE = (
    "Note: this question cannot be answered from the conversation (the gold answer explains what is "
    "missing). The generated answer is CORRECT if it says the information is not available, unknown or "
    "was never mentioned; it is WRONG if it gives an answer as if the information were known."
)

# LongMemEval question types (its official judge prompts differ per type).
TYPE_NOTES: dict[str, str] = {
    "temporal-reasoning": "Note: when counting days, weeks or months, an answer off by one is still CORRECT.",
    "knowledge-update": (
        "Note: the user's information changed over time; the answer is CORRECT if it gives the updated "
        "(latest) value, even if it also mentions the earlier one."
    ),
    "single-session-preference": (
        "Note: the gold answer is a rubric of the user's preferences; the answer is CORRECT if it "
        "recalls and uses the user's personal information as the rubric describes (it need not cover "
        "every point)."
    ),
}


def parse_verdict(value: Any) -> Verdict | None:
    """``CORRECT`` / ``WRONG`` from a judge reply in any common shape; None when there is no label.

    Accepts dicts (``verdict``/``label``/``judgment``/``result``/``answer``/``grade`` keys, or a
    boolean ``correct``/``is_correct``), JSON text, fenced JSON, and plain or decorated words
    (``CORRECT``, "**Wrong.**", ``INCORRECT``, a lone ``yes``/``no``, ``true``/``false``).
    """
    if value is None:
        return None
    if isinstance(value, bool):
        return "CORRECT" if value else "WRONG"
    if isinstance(value, dict):
        for k in ("verdict", "label", "judgment", "judgement", "result", "grade", "answer", "decision"):
            for key in (k, k.upper(), k.capitalize()):
                if key in value:
                    got = parse_verdict(value[key])
                    if got is not None:
                        return got
        for key in ("correct", "is_correct", "CORRECT"):
            if isinstance(value.get(key), bool):
                return "CORRECT" if value[key] else "WRONG"
        return None
    if not isinstance(value, str):
        return None
    text = value.strip()
    fence = re.match(r"^```(?:json)?\s*(.*?)\s*```$", text, re.S | re.I)
    if fence:
        text = fence.group(1).strip()
    if text[:1] in "{[\"":
        try:
            return parse_verdict(json.loads(text))
        except (json.JSONDecodeError, RecursionError):
            pass
    low = text.lower()
    # a JSON-ish key in broken JSON: "verdict": "CORRECT"
    m = re.search(r"(?:verdict|label|judg(?:e)?ment)\W{0,4}(correct|wrong|incorrect)", low)
    if m:
        return "CORRECT" if m.group(1) == "correct" else "WRONG"
    if re.search(r"\b(?:not|isn't|is not)\s+(?:entirely\s+|fully\s+|quite\s+)?correct\b", low):
        return "WRONG"
    words = re.findall(r"[a-z]+", low)
    if not words:
        return None
    if any(w in ("wrong", "incorrect", "false") for w in words[:4]):
        return "WRONG"
    if words[0] in ("correct", "right", "true") or words == ["yes"]:
        return "CORRECT"
    if words == ["no"]:
        return "WRONG"
    has_c, has_w = "correct" in words, ("wrong" in words or "incorrect" in words)
    if has_c != has_w:
        return "CORRECT" if has_c else "WRONG"
    return None


class JudgeReply(BaseModel):
    """The judge's JSON (lenient: see :func:`parse_verdict`)."""

    model_config = ConfigDict(extra="ignore")

    verdict: Verdict = Field(description="CORRECT or WRONG")
    reason: str = Field(default="", description="one short sentence")

    @model_validator(mode="before")
    @classmethod
    def _coerce(cls, data: Any) -> Any:
        v = parse_verdict(data)
        if v is None:
            return data  # let validation report the missing/invalid verdict (the client retries)
        reason = ""
        if isinstance(data, dict):
            reason = str(data.get("reason") or data.get("explanation") or data.get("rationale") or "")
        return {"verdict": v, "reason": reason}


RUBRIC_SYSTEM = """You grade a long-term memory assistant's response against a rubric. You get a question,
the rubric (numbered statements of what a correct response does or says) and the generated response.
Score every statement in order: 1 if the response satisfies it, 0.5 if it satisfies it partly, 0 if not.
Judge meaning, not wording: paraphrases, other date formats and extra details are fine; a statement
that the response contradicts or leaves out scores 0.

Reply with JSON: {"scores": [one number per statement, in order], "reason": one short sentence}."""

# a statement's score is snapped to the nearest of these
RUBRIC_LEVELS = (0.0, 0.5, 1.0)


class RubricReply(BaseModel):
    """The rubric judge's JSON: one score per statement."""

    model_config = ConfigDict(extra="ignore")

    scores: list[float] = Field(description="one score per rubric statement, in order: 1, 0.5 or 0")
    reason: str = Field(default="", description="one short sentence")

    @model_validator(mode="after")
    def _snap(self) -> RubricReply:
        self.scores = [min(RUBRIC_LEVELS, key=lambda lv: abs(lv - max(0.0, min(1.0, float(x))))) for x in self.scores]
        return self


def rubric_messages(question: str, rubric: list[str], answer: str) -> list[dict[str, str]]:
    """The rubric judge call's messages (static instructions first)."""
    items = "\n".join(f"{i}. {r}" for i, r in enumerate(rubric, start=1))
    user = f"Question: {question}\nRubric:\n{items}\nGenerated response: {answer or '(empty)'}"
    return [{"role": "system", "content": RUBRIC_SYSTEM}, {"role": "user", "content": user}]


def judge_messages(question: str, gold: str, answer: str, *, abstention: bool = False,
                   category: str | None = None) -> list[dict[str, str]]:
    """The judge call's messages (static instructions first, for provider prompt caching)."""
    notes = []
    if abstention:
        notes.append(ABSTENTION_NOTE)
    elif category in TYPE_NOTES:
        notes.append(TYPE_NOTES[category])
    user = f"Question: {question}\nGold answer: {gold}\nGenerated answer: {answer or '(empty)'}"
    if notes:
        user += "\n\n" + "\n".join(notes)
    return [{"role": "system", "content": JUDGE_SYSTEM}, {"role": "user", "content": user}]


@dataclass
class JudgeOutcome:
    """One verdict and what it cost (``verdict`` None = the judge failed; see ``error``)."""

    verdict: Verdict | None
    reason: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    calls: int = 0
    estimated: bool = False
    error: str | None = None
    score: float | None = None  # rubric judge: the mean statement score

    @property
    def correct(self) -> bool | None:
        return None if self.verdict is None else self.verdict == "CORRECT"


_QUOTED = re.compile(r":\s*(['\"])(.*)\1\s*$", re.S)


def verdict_from_failure(e: LLMCallFailed) -> Verdict | None:
    """A plain-text label quoted in an invalid-JSON failure ("... 'CORRECT'")."""
    if e.kind not in ("invalid_json", "schema_violation"):
        return None
    m = _QUOTED.search(str(e.error_text))
    text = m.group(2) if m else str(e.error_text).rsplit(":", 1)[-1]
    return parse_verdict(text)


class LLMJudge:
    """CORRECT/WRONG (or a rubric score) through an :class:`~lychee_ray.llm.client.LLMClient` (sync API;
    thread-safe)."""

    def __init__(self, client: Any, max_completion_tokens: int = 200, encoding: str = DEFAULT_ENCODING) -> None:
        self.client = client
        self.max_completion_tokens = max_completion_tokens
        self.encoding = encoding

    @property
    def model(self) -> str:
        return self.client.config.model

    def judge(self, question: str, gold: str, answer: str, *, question_id: str | None = None,
              abstention: bool = False, category: str | None = None) -> JudgeOutcome:
        msgs = judge_messages(question, gold, answer, abstention=abstention, category=category)
        keys = {"question_id": question_id} if question_id else None
        try:
            res = self.client.chat_json_sync("judge", msgs, JudgeReply, schema_name="judge_verdict",
                                             max_completion_tokens=self.max_completion_tokens, keys=keys)
        except LLMCallFailed as e:
            spent = _spent(e, msgs, JudgeReply, self.encoding)
            v = verdict_from_failure(e)
            if v is not None:
                return JudgeOutcome(v, "parsed from a plain-text reply", calls=1, **spent)
            log.warning("judge call failed for %s: %s", question_id, e)
            return JudgeOutcome(None, calls=1, error=str(e), **spent)
        u = res.usage
        return JudgeOutcome(res.parsed.verdict, res.parsed.reason, u.prompt_tokens, u.completion_tokens,
                            u.cached_tokens, 1, u.estimated)

    def judge_rubric(self, question: str, rubric: list[str], answer: str, pass_score: float, *,
                     question_id: str | None = None) -> JudgeOutcome:
        """The rubric verdict of one response (module docstring): the mean statement score, CORRECT at
        ``pass_score`` or above; a failed call or a reply with the wrong number of scores has no verdict."""
        msgs = rubric_messages(question, rubric, answer)
        keys = {"question_id": question_id} if question_id else None
        try:
            res = self.client.chat_json_sync("judge", msgs, RubricReply, schema_name="rubric_scores",
                                             max_completion_tokens=self.max_completion_tokens, keys=keys)
        except LLMCallFailed as e:
            log.warning("rubric judge call failed for %s: %s", question_id, e)
            return JudgeOutcome(None, calls=1, error=str(e), **_spent(e, msgs, RubricReply, self.encoding))
        u = res.usage
        spent = dict(prompt_tokens=u.prompt_tokens, completion_tokens=u.completion_tokens, cached_tokens=u.cached_tokens,
                     calls=1, estimated=u.estimated)
        scores = res.parsed.scores
        if len(scores) != len(rubric):
            return JudgeOutcome(None, error=f"rubric judge returned {len(scores)} score(s) for {len(rubric)} statement(s)",
                                **spent)
        score = sum(scores) / len(scores)
        return JudgeOutcome("CORRECT" if score >= pass_score else "WRONG", res.parsed.reason, score=score, **spent)


def _spent(e: LLMCallFailed, msgs: list[dict[str, str]], reply: type[BaseModel], encoding: str) -> dict[str, Any]:
    """What a failed judge call cost (the provider's usage, else an estimate of its prompt)."""
    u = e.usage
    if u is not None:
        return dict(prompt_tokens=u.prompt_tokens, completion_tokens=u.completion_tokens, cached_tokens=u.cached_tokens,
                    estimated=u.estimated)
    return dict(prompt_tokens=prompt_tokens_estimate(msgs, reply, encoding), estimated=True)


def judge_config(cfg: LycheeConfig, judge_model: str | None = None) -> LycheeConfig:
    """``cfg`` with the judge's model (``--judge-model`` > ``eval.judge_model`` > ``llm.model``), temperature 0."""
    model = judge_model or cfg.eval.judge_model or cfg.llm.model
    llm = cfg.llm.model_copy(update={"model": model, "temperature": 0.0})
    return cfg.model_copy(update={"llm": llm})


__all__ = ["ABSTENTION_NOTE", "JUDGE_SYSTEM", "RUBRIC_SYSTEM", "JudgeOutcome", "JudgeReply", "LLMJudge", "RubricReply",
           "TYPE_NOTES", "judge_config", "judge_messages", "parse_verdict", "rubric_messages",
           "verdict_from_failure"]
