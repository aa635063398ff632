"""Shared fixtures. Expensive resources (the embedding model, local Ray) are session-scoped; the
synthetic query view is module-scoped. Store builders live in :mod:`tests.stores`."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# Tests must never pick up a developer's real endpoint or key.
for _var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "LYCHEE_LLM_BASE_URL", "LYCHEE_LLM_MODEL", "LYCHEE_SERVE_TOKEN"):
    os.environ.pop(_var, None)

from tests.serve_fixtures import serve_url  # noqa: E402,F401 — the session's one Ray Serve instance
from tests.inspector_fixtures import browser, inspector_data, inspector_url, tenant_ui  # noqa: E402,F401 — the inspector's


@pytest.fixture(scope="session")
def embedder():
    """The offline MiniLM embedder, loaded once for the whole test session."""
    from lychee_ray.config import EmbeddingConfig
    from lychee_ray.embed import get_embedder

    return get_embedder(EmbeddingConfig())


@pytest.fixture(scope="session")
def ray_session():
    """One small local Ray for the whole test session (Ray start costs ~8 s)."""
    import ray

    if not ray.is_initialized():
        from lychee_ray.config import ServeConfig

        for k, v in ServeConfig().ray_env.items():  # the Serve tests run the service as `lychee-ray serve` does
            os.environ.setdefault(k, v)
        # the suite must pass with every core busy: Ray's raylet then registers slower than its
        # default wait ("The current node timed out during startup"), so wait longer for it
        os.environ.setdefault("RAY_raylet_start_wait_time_s", "300")
        # ... and Serve's controller kills a proxy that is not ready within 5 s (healthy within 10 s)
        # before it ever ran; under that load it needs longer
        os.environ.setdefault("RAY_SERVE_PROXY_READY_CHECK_TIMEOUT_S", "60")
        os.environ.setdefault("RAY_SERVE_PROXY_HEALTH_CHECK_TIMEOUT_S", "60")
        ray.init(num_cpus=2, include_dashboard=False, object_store_memory=256 * 1024 * 1024, log_to_driver=False)
    yield ray


@pytest.fixture(scope="session")
def s3_server():
    """One S3-compatible server (moto) on 127.0.0.1 for the session, with the standard AWS variables
    pointing at it; each test makes its own bucket (:meth:`S3Server.bucket`)."""
    from lychee_ray.testing.s3_server import S3Server

    server = S3Server(log_requests=True).start()
    saved = {k: os.environ.get(k) for k in server.env()}
    server.export()
    yield server
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    server.stop()


@pytest.fixture(scope="module")
def view(tmp_path_factory, embedder):
    """The synthetic conversation ``c-1`` (:mod:`tests.stores`) loaded as a query view, one per test
    module (the recall and selection tests read it; none of them modifies it)."""
    from lychee_ray.memory import MemoryStore
    from tests.stores import conversation_spec, make_store

    root = make_store(tmp_path_factory.mktemp("recall"), embedder, [conversation_spec("c-1")])
    store = MemoryStore.open(root, embedder=embedder, llm="rules")
    yield store.view("c-1")
    store.close()


def pytest_collection_modifyitems(config, items):
    """``slow`` tests (long reliability loops) are skipped unless ``LYCHEE_SLOW=1`` or ``-m`` names
    them: CI runs the bounded sample of each loop (``LYCHEE_RELIABILITY_ROUNDS`` sizes it)."""
    if os.environ.get("LYCHEE_SLOW") == "1" or "slow" in (config.getoption("markexpr") or ""):
        return
    skip = pytest.mark.skip(reason="slow loop: set LYCHEE_SLOW=1 (or -m slow) to run it; CI runs a bounded sample")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
