"""The web inspector's section (``inspect``): ``lychee-ray inspect`` and the ``/ui`` pages of ``lychee-ray serve``."""

from __future__ import annotations

from pydantic import Field

from lychee_ray.config.base import Section


class InspectConfig(Section):
    """What the inspector's pages show and where ``lychee-ray inspect`` listens (docs/inspector.md)."""

    # lychee-ray inspect's bind address (loopback: without serve.keys the inspector asks for no key)
    host: str = Field(min_length=1)
    port: int = Field(ge=0, le=65535)  # 0 = a free port, printed
    page_size: int = Field(ge=1)  # conversations per page of the list
    max_page_size: int = Field(ge=1)  # the largest ?limit= a page may ask for
    preview_chars: int = Field(ge=1)  # characters of a turn or record shown in the playground's pool and drop lists
    # the store report's plots read the segments of at most this many conversations (the first by id)
    report_max_conversations: int = Field(ge=1)
    # eval runs shown besides those given with --eval: run directories of `lychee-ray eval`, JSON files
    # of `lychee-ray eval-retrieval --out` (their per-question view needs --per-question)
    eval_runs: list[str]
    serve_ui: bool  # lychee-ray serve mounts the pages under /ui (same keys and scopes as the API)
