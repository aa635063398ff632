"""The web inspector's section (``inspect``): ``lychee-ray inspect`` and the ``/ui`` pages of ``lychee-ray serve``."""

from __future__ import annotations

from pydantic import Field

from lychee_ray.config.base import Section


class InspectConfig(Section):
    """What the inspector's pages show and where ``lychee-ray inspect`` listens (docs/inspector.md)."""

    # lychee-ray inspect's bind address (loopback: without serve.keys the inspector asks for no key)
    host: str = Field(default="127.0.0.1", min_length=1,
        description=(
            "lychee-ray inspect's bind address (loopback: it asks for a key only when serve.keys / serve.token "
            "are set)"))
    # 0 = a free port, printed
    port: int = Field(default=0, ge=0, le=65535, description="0 = a free port (the URL is printed)")
    # conversations per page of the list
    page_size: int = Field(default=50, ge=1, description="conversations per page of the list")
    # the largest ?limit= a page may ask for
    max_page_size: int = Field(default=500, ge=1, description="the largest page a request may ask for")
    # characters of a turn or record shown in the playground's pool and drop lists
    preview_chars: int = Field(default=400, ge=1,
        description="characters of a turn or record shown in the search playground's pool and drop lists")
    # the store report's plots read the segments of at most this many conversations (the first by id)
    report_max_conversations: int = Field(default=2000, ge=1,
        description=(
            "the store report's plots (records per segment, segment lengths, cut reasons) read the segments of at"
            " most this many conversations (the first by id)"))
    # eval runs shown besides those given with --eval: run directories of `lychee-ray eval`, JSON files
    # of `lychee-ray eval-retrieval --out` (their per-question view needs --per-question)
    eval_runs: list[str] = Field(default=[],
        description=(
            "eval runs to show besides --eval: `lychee-ray eval` run directories, `eval-retrieval --out` JSON "
            "files"))
    # lychee-ray serve mounts the pages under /ui (same keys and scopes as the API)
    serve_ui: bool = Field(default=True,
        description="lychee-ray serve mounts the pages under /ui (same bearer keys and tenant scopes as the API)")
