"""A deterministic stand-in "model" for the OpenAI-compatible test server.

:func:`encoder_reply` reads an encode prompt (the turn lines ``[i] Speaker (role): text`` that
:mod:`lychee_ray.ingest.encode.openai` writes) and answers valid ``{records, resolution_state}`` JSON: one
record per turn. Tests and the throughput benchmark use it to drive the real ``openai`` encoder
path end to end without a model.

For ``lychee-ray eval`` end to end there are query-side and judge stand-ins too: :func:`plan_reply`
(one route: the question), :func:`answer_reply` (the memory line sharing most words with the
question), :func:`judge_reply` (CORRECT when every gold token is in the answer), :func:`rubric_reply`
(a statement scores 1 when every word of its claim is in the response, else 0) and
:func:`eval_reply`, one handler that routes encode / plan / answer / judge / rubric requests.
"""

from __future__ import annotations

import re
from typing import Any

_TURN = re.compile(r"^\[(\d+)\] (.+?) \((\w+)\): (.*)$")


def schema_name(body: dict[str, Any]) -> str | None:
    """The ``json_schema`` name a request asks for (None for json_object / plain requests)."""
    rf = body.get("response_format") or {}
    return (rf.get("json_schema") or {}).get("name")


def prompt_text(body: dict[str, Any]) -> str:
    return "\n".join(str(m.get("content") or "") for m in body.get("messages") or [])


def encoder_reply(body: dict[str, Any]) -> dict[str, Any]:
    """Valid encoder output for an encode request: one fact per turn, with its source index."""
    records = []
    speakers = []
    for line in prompt_text(body).splitlines():
        m = _TURN.match(line.strip())
        if not m:
            continue
        idx, speaker, _role, text = int(m.group(1)), m.group(2), m.group(3), m.group(4).strip()
        speakers.append(speaker)
        if text:
            records.append({"type": "fact", "text": f"{speaker} said: {text}", "entities": [speaker], "topics": [],
                            "time": None, "source_turns": [idx]})
    state = "; ".join(f"speaker {s}" for s in dict.fromkeys(speakers))
    return {"records": records, "resolution_state": state}


def is_encode_request(body: dict[str, Any]) -> bool:
    return schema_name(body) == "segment_records" or "Segment turns:" in prompt_text(body)


# ------------------------------------------------------------------------------------------------
# query-side and judge replies (``lychee-ray eval`` end to end against the test server)
# ------------------------------------------------------------------------------------------------

_QUESTION = re.compile(r"^Question: (.*)$", re.M)
_GOLD = re.compile(r"^Gold answer: (.*)$", re.M)
_GENERATED = re.compile(r"^Generated answer: (.*)$", re.M)
_MEMORY = re.compile(r"<memory>\n?(.*?)</memory>", re.S)


def is_plan_request(body: dict[str, Any]) -> bool:
    return schema_name(body) == "query_plan" or "You plan memory retrieval" in prompt_text(body)


def is_answer_request(body: dict[str, Any]) -> bool:
    return schema_name(body) == "memory_answer" or "<memory>" in prompt_text(body)


def is_rubric_request(body: dict[str, Any]) -> bool:
    return schema_name(body) == "rubric_scores" or "\nRubric:\n" in prompt_text(body)


def is_judge_request(body: dict[str, Any]) -> bool:
    return schema_name(body) == "judge_verdict" or "Gold answer:" in prompt_text(body)


def plan_reply(body: dict[str, Any]) -> dict[str, Any]:
    """A valid one-route plan: the question itself as the search text, no constraints."""
    m = _QUESTION.search(prompt_text(body))
    q = m.group(1).strip() if m else "question"
    return {"routes": [{"search_texts": [q], "entities": [],
                                                       "topics": [], "record_types": [], "time": None}]}


def answer_reply(body: dict[str, Any]) -> dict[str, Any]:
    """An extractive answer: the memory line sharing the most words with the question (or "I don't know")."""
    msgs = body.get("messages") or []
    text = str((msgs[-1] if msgs else {}).get("content") or "")  # the user message (the system prompt names the tags too)
    m = _QUESTION.search(text)
    q = set(re.findall(r"[a-z0-9]+", (m.group(1) if m else "").lower()))
    mem = _MEMORY.search(text)
    best, score = "", 0
    for line in (mem.group(1) if mem else "").splitlines():
        line = line.strip()
        if not line.startswith("- "):
            continue
        s = len(q & set(re.findall(r"[a-z0-9]+", line.lower())))
        if s > score:
            best, score = line[2:], s
    return {"answer": best or "I don't know."}


def judge_reply(body: dict[str, Any]) -> dict[str, Any]:
    """CORRECT when every normalised gold token appears in the generated answer, else WRONG."""
    text = prompt_text(body)
    g, a = _GOLD.search(text), _GENERATED.search(text)
    gold = set(re.findall(r"[a-z0-9]+", (g.group(1) if g else "").lower()))
    ans = set(re.findall(r"[a-z0-9]+", (a.group(1) if a else "").lower()))
    ok = bool(gold) and gold <= ans
    return {"verdict": "CORRECT" if ok else "WRONG", "reason": "gold tokens present" if ok else "gold tokens missing"}


_RUBRIC_ITEM = re.compile(r"^\d+\. (.*)$")
_CLAIM = re.compile(r"^.*?should \w+:\s*", re.I)


def rubric_reply(body: dict[str, Any]) -> dict[str, Any]:
    """A score per rubric statement: 1 when every word of its claim is in the response, else 0."""
    text = prompt_text(body)
    rubric, _, response = text.partition("\nGenerated response: ")
    items = [m.group(1) for line in rubric.split("\nRubric:\n", 1)[-1].splitlines() if (m := _RUBRIC_ITEM.match(line))]
    words = set(re.findall(r"[a-z0-9]+", response.lower()))
    scores = [1.0 if set(re.findall(r"[a-z0-9]+", _CLAIM.sub("", it).lower())) <= words else 0.0 for it in items]
    return {"scores": scores, "reason": f"{int(sum(scores))} of {len(scores)} statements met"}


def eval_reply(body: dict[str, Any]) -> dict[str, Any]:
    """One handler for every call an eval run makes: encode, plan, answer, judge, rubric judge."""
    if is_rubric_request(body):
        return rubric_reply(body)
    if is_judge_request(body):
        return judge_reply(body)
    if is_plan_request(body):
        return plan_reply(body)
    if is_answer_request(body):
        return answer_reply(body)
    return encoder_reply(body)
