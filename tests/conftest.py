"""Shared fixtures and the two test tiers. Expensive resources (the embedding model, local Ray) are
session-scoped; the synthetic query view is module-scoped. Store builders live in :mod:`tests.stores`.

Two speeds (README "Tests"): a test that starts or joins Ray (Serve included), runs a child process
(the CLI, a Python probe) or drives a browser carries the marker ``ray``, ``subprocess`` or ``browser``
(a test taking a Ray fixture gets ``ray`` here); one that stays in process but takes seconds (the S3
test server, a large input, a fault loop, a service with its background workers) carries ``heavy`` (a
test taking the S3 server gets it here). Every other test is marked ``fast`` here, and
``python -m pytest -q -m fast`` is the edit-test loop. A ``fast`` test that starts Ray or a child
process fails and names the marker it needs; one whose setup and call take over
``FAST_TEST_BUDGET_S`` is listed at the end of the run (a note, not a failure: timings on a shared
machine vary), so the tier stays fast as tests are added.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

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
    """One small local Ray for the whole test session (Ray start costs ~8 s). It offers one logical
    GPU (there is no device): the embedding stages' GPU placement is tested in this Ray too
    (tests/ingest/test_build_stages.py), not in a Ray of its own; nothing else asks for a GPU."""
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
        ray.init(num_cpus=2, num_gpus=1, include_dashboard=False, object_store_memory=256 * 1024 * 1024,
                 log_to_driver=False)
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


# Markers of the slower tier, and the fixtures that make a test a Ray test or a heavy one.
SLOW_TIER_MARKERS = ("ray", "subprocess", "browser", "heavy")
RAY_FIXTURES = frozenset({"ray_session", "serve_url"})
HEAVY_FIXTURES = frozenset({"s3_server"})
# A fast test's setup + call above this many seconds is named at the end of the run: mark it `heavy`
# or make it cheaper (the fast tier's ~1,100 tests must stay within three minutes together).
FAST_TEST_BUDGET_S = 2.0


@pytest.hookimpl(wrapper=True)  # around pytest-xdist's own, which turns an unset --dist into "load"
def pytest_cmdline_main(config):
    """``-n N`` (pytest-xdist) runs the units :func:`_worker_group` gives, in the order it sorts them,
    unless ``--dist`` says otherwise."""
    if getattr(config.option, "numprocesses", None) and config.option.dist == "no":
        config.option.dist = "loadgroup"
        config.option.loadscopereorder = False
    return (yield)


@pytest.hookimpl(tryfirst=True)  # before `-m` selects: `-m fast` / `-m ray` see the markers added here
def pytest_collection_modifyitems(config, items):
    """Tier markers (module docstring); ``slow`` tests (long reliability loops) are skipped unless
    ``LYCHEE_SLOW=1`` or ``-m`` names them: CI runs the bounded sample of each loop
    (``LYCHEE_RELIABILITY_ROUNDS`` sizes it)."""
    for item in items:
        fixtures = getattr(item, "fixturenames", ())
        if RAY_FIXTURES.intersection(fixtures):
            item.add_marker(pytest.mark.ray)
        if HEAVY_FIXTURES.intersection(fixtures):
            item.add_marker(pytest.mark.heavy)
        if not any(item.get_closest_marker(m) for m in SLOW_TIER_MARKERS):
            item.add_marker(pytest.mark.fast)
        item.add_marker(pytest.mark.xdist_group(_worker_group(item)))
    if os.environ.get("PYTEST_XDIST_WORKER"):
        # a worker is not told the --dist that pytest_cmdline_main chose: it names each test's unit
        # (pytest-xdist appends it to the node id) for the controller's scheduling by units
        config.option.loadgroup = True
        # the longest units first: the two workers start them at once
        items.sort(key=lambda item: _GROUP_ORDER.get(_worker_group(item), len(_GROUP_ORDER)))
    if os.environ.get("LYCHEE_SLOW") == "1" or "slow" in (config.getoption("markexpr") or ""):
        return
    skip = pytest.mark.skip(reason="slow loop: set LYCHEE_SLOW=1 (or -m slow) to run it; CI runs a bounded sample")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


_GROUP_ORDER = {"ray": 0, "own-ray": 1}


def _worker_group(item) -> str:
    """Which tests one ``-n 2`` worker runs together (``--dist loadgroup``, pyproject.toml): the tests
    of the session's Ray and Serve on one worker, so they start once; the tests that start a Ray of
    their own (the multi-node cluster, the CLI's ``--ray`` build: minutes long) as one unit the other
    worker takes beside them; any other test with the rest of its module, so a module's fixtures are
    built once."""
    if RAY_FIXTURES.intersection(getattr(item, "fixturenames", ())):
        return "ray"
    return "own-ray" if item.get_closest_marker("ray") else item.nodeid.split("::", 1)[0]


class TierError(Exception):
    """A ``fast`` test did what only the slower tier may (start Ray or a child process)."""


_running_fast: list[str] = []  # the node id of the fast test running now (setup, call and teardown)
_HAD_RAY = pytest.StashKey[bool]()  # whether Ray was up when a fast test's setup began


def _is_child_runtime(args) -> bool:
    """Whether a command starts Python, Ray or the CLI (what makes a test slow: interpreter and imports)."""
    argv = [args] if isinstance(args, (str, bytes, os.PathLike)) else list(args or [])
    words = os.fsdecode(argv[0]).split() if argv else []
    first = words[0] if words else ""
    return first == sys.executable or Path(first).name.startswith(("python", "ray", "lychee-ray"))


class _TierGuardedPopen(subprocess.Popen):
    def __new__(cls, args, *a, **kw):  # refused before an instance exists (no half-made Popen to finalize)
        if _running_fast and _is_child_runtime(args):
            raise TierError(f"{_running_fast[0]} runs a child process: mark it `subprocess` (the fast tier starts none)")
        return super().__new__(cls)


subprocess.Popen = _TierGuardedPopen  # type: ignore[misc]  # subprocess.run and friends look the name up at call time


def _ray_started() -> bool:
    ray = sys.modules.get("ray")
    return ray is not None and ray.is_initialized()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    """From a ``fast`` test's setup (its module and session fixtures included) to its teardown, a child
    process fails it (``_TierGuardedPopen``), and so does starting Ray (checked at teardown)."""
    if item.get_closest_marker("fast") is not None:
        _running_fast[:] = [item.nodeid]
        item.stash[_HAD_RAY] = _ray_started()
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    try:
        return (yield)
    finally:
        _running_fast.clear()
        if _HAD_RAY in item.stash and not item.stash[_HAD_RAY] and _ray_started():
            raise TierError(f"{item.nodeid} started Ray: take the ray_session fixture or mark it `ray` "
                            "(the fast tier starts no Ray)")


_fast_seconds: dict[str, float] = {}  # a fast test's setup + call time


def pytest_runtest_logreport(report):
    if report.when in ("setup", "call") and "fast" in report.keywords:
        _fast_seconds[report.nodeid] = _fast_seconds.get(report.nodeid, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter):
    over = sorted(((t, n) for n, t in _fast_seconds.items() if t > FAST_TEST_BUDGET_S), reverse=True)
    if over:
        terminalreporter.section(f"fast tests over {FAST_TEST_BUDGET_S:g} s (setup + call): mark them `heavy` or make them cheaper")
        for t, n in over:
            terminalreporter.write_line(f"{t:6.2f}s {n}")
