"""A deterministic stand-in "model" for the OpenAI-compatible test server.

:func:`encoder_reply` reads an encode prompt (the turn lines ``[i] Speaker (role): text`` that
:mod:`lychee_ray.encode_openai` writes) and answers valid ``{records, resolution_state}`` JSON: one
record per turn. Tests and the throughput benchmark use it to drive the real ``openai`` encoder
path end to end without a model.
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
