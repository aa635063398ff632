"""The strict JSON schema of every reply model equals the ``openai`` library's own converter's (the
schema a structured-output call sends, and the one offline prompt-token estimates count), while
building it imports nothing of ``openai``."""

from __future__ import annotations

import subprocess
import sys
from typing import Literal

import pytest
from pydantic import BaseModel, Field

from lychee_ray.llm.strict_schema import strict_json_schema


class _Place(BaseModel):
    city: str
    country: str | None = None


class _Kind(BaseModel):
    label: Literal["a", "b"]


class _Edge(BaseModel):
    """Shapes the converter treats specially: a described reference, a list of models, an optional
    model with a null default, a nested model used twice, a free-form mapping."""

    home: _Place = Field(description="where the speaker lives")
    visited: list[_Place] = Field(default_factory=list)
    kind: _Kind | None = None
    again: _Kind
    extra: dict[str, int] = Field(default_factory=dict)
    note: str | None = Field(None, description="anything else")


def _reply_models() -> list[type[BaseModel]]:
    from lychee_ray.eval.runners.judge import JudgeReply, RubricReply
    from lychee_ray.ingest.encode.base import EncodeOutput
    from lychee_ray.query.answer import AnswerReply
    from lychee_ray.query.plan.prompt import PlanReply

    return [PlanReply, AnswerReply, EncodeOutput, JudgeReply, RubricReply, _Edge, _Place]


@pytest.mark.parametrize("model", _reply_models(), ids=lambda m: m.__name__)
def test_the_strict_schema_equals_the_openai_converters(model):
    from openai.lib._pydantic import to_strict_json_schema

    assert strict_json_schema(model) == to_strict_json_schema(model)


def test_a_schema_that_cannot_be_strict_falls_back_as_before():
    from lychee_ray.llm.strict_schema import _resolve

    with pytest.raises(ValueError, match="only local"):
        _resolve({}, "http://example.com/schema")
    with pytest.raises(ValueError, match="names nothing"):
        _resolve({"$defs": {}}, "#/$defs/Missing")


@pytest.mark.subprocess
def test_schemas_and_their_token_estimates_import_no_openai():
    code = ("import sys\n"
            "from lychee_ray.llm.prompts import schema_tokens\n"
            "from lychee_ray.query.plan.prompt import PlanReply\n"
            "assert schema_tokens(PlanReply) > 0\n"
            "print(sorted(m for m in sys.modules if m == 'openai' or m.startswith('openai.')))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]"
