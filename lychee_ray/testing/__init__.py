"""Test helpers: an OpenAI-compatible test server and its script language, a fake LLM, synthetic
conversations.

The server and the actions it can be scripted with are importable from here::

    from lychee_ray.testing import OpenAIServer, ok, status
"""

from lychee_ray.testing.faults import (
    Action,
    Delay,
    Handler,
    RawBody,
    Reset,
    Status,
    delay,
    http_date,
    malformed_body,
    reset,
    status,
)
from lychee_ray.testing.openai_server import OpenAIServer
from lychee_ray.testing.recording import RecordedRequest
from lychee_ray.testing.replies import (
    Reply,
    empty,
    foreign_script,
    malformed_content,
    ok,
    pseudo_embedding,
    schema_violation,
    truncated,
    wrong_language,
)

__all__ = [
    "Action",
    "Delay",
    "Handler",
    "OpenAIServer",
    "RawBody",
    "RecordedRequest",
    "Reply",
    "Reset",
    "Status",
    "delay",
    "empty",
    "foreign_script",
    "http_date",
    "malformed_body",
    "malformed_content",
    "ok",
    "pseudo_embedding",
    "reset",
    "schema_violation",
    "status",
    "truncated",
    "wrong_language",
]
