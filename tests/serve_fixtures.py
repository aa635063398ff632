"""The session's ONE Ray Serve instance of the memory service (Serve start costs ~20 s).

``serve_url`` is registered by ``tests/conftest.py`` so that every module (``test_serve_ray.py``,
the reliability suite) shares the same deployment. Its store holds ``c-1`` (user ``u-1``) and
``c-2`` (user ``u-2``, the same turns and the first four of the same records): an isolation probe.
The deployment is deliberately small — the replica admits ``max_ongoing_requests=2`` and lets
``max_queued_requests=2`` wait (serve/admission.py) — so a burst is shed with its JSON 503s.
"""

from __future__ import annotations

import socket

import pytest

SERVE_TOKEN = "ray-test-token"
SERVE_AUTH = {"Authorization": f"Bearer {SERVE_TOKEN}"}
SERVE_APP_NAME = "lychee-test"
SERVE_MAX_ONGOING = 2
SERVE_MAX_QUEUED = 2


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def serve_url(ray_session, tmp_path_factory, embedder):
    """The memory service deployed once per session on 127.0.0.1 (ready ≈ 15-20 s with the model)."""
    from lychee_ray.config import load_config
    from lychee_ray.ray.serve import start_service, stop_service
    from tests.stores import RECORDS, conversation_spec, make_store

    root = make_store(tmp_path_factory.mktemp("serve_ray_store"), embedder, [
        conversation_spec("c-1", "u-1"), conversation_spec("c-2", "u-2", records=RECORDS[:4])])
    cfg = load_config(env={}, sets=[
        "serve.host=127.0.0.1", f"serve.port={free_port()}", f"serve.token={SERVE_TOKEN}", "llm.backend=rules",
        "serve.replica_num_cpus=0.25",  # leave the session's 2 CPUs to the other Ray tests
        f"serve.max_ongoing_requests={SERVE_MAX_ONGOING}", f"serve.max_queued_requests={SERVE_MAX_QUEUED}",
        "serve.max_request_bytes=4096",
        "serve.batch_embeddings=true",  # keep the @serve.batch wiring under test (auto = off for the local model)
    ])
    url = start_service(root, cfg, name=SERVE_APP_NAME)
    try:
        yield url
    finally:
        stop_service(SERVE_APP_NAME)
