"""``configs/serve.yaml``: the memory service deployed from Serve's own config file.

The first tests need no Ray: the file passes Serve's schema (``ServeDeploySchema``) and its
``import_path`` + ``args`` build an application the way Serve's build task does. The end-to-end
test deploys the file as ``serve run configs/serve.yaml`` does (``serve_start`` with the file's
proxy options, then ``deploy_apps``), into the session's one Ray and Serve: ``tests/serve_fixtures.py``
already runs Serve's proxy there, and one Ray has one proxy port, so the file's application is
renamed and routed under its own prefix on that proxy. Its store is on the session's S3 server
(a local directory with ``LYCHEE_SLOW=1``).
"""

from __future__ import annotations

import copy
import time
from pathlib import Path

import httpx
import pytest
import yaml

from tests.paths import REPO

SERVE_YAML = REPO / "configs" / "serve.yaml"
APP = "lychee-config-test"
PREFIX = "/cfg"
TOKEN = "config-file-token"
Q = "When did Caroline go to the LGBTQ support group?"


def _file() -> dict:
    return yaml.safe_load(SERVE_YAML.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def small_store(tmp_path_factory, embedder) -> str:
    from tests.stores import conversation_spec, make_store

    return str(make_store(tmp_path_factory.mktemp("serve_config_store"), embedder, [conversation_spec("c-1", "u-1")]))


def test_serve_yaml_passes_serves_schema():
    from ray.serve.schema import ServeDeploySchema

    cfg = ServeDeploySchema.model_validate(_file())
    assert cfg.http_options.host == "127.0.0.1"
    (app,) = cfg.applications
    assert app.import_path == "lychee_ray.ray.serve_app:build_app"
    assert app.args["memory"].startswith("s3://")
    (dep,) = app.deployments
    from lychee_ray.ray.serve import DEPLOYMENT_NAME

    assert dep.name == DEPLOYMENT_NAME  # a wrong name fails only at deploy time ("does not exist")
    assert dep.autoscaling_config and dep.ray_actor_options.num_cpus > 0


def test_import_path_and_args_build_the_application(small_store, tmp_path):
    """What Serve's build task does with ``import_path`` + ``args`` (typed args included)."""
    from ray.serve._private.api import call_user_app_builder_with_args_if_necessary
    from ray.serve._private.utils import import_attr
    from ray.serve.deployment import Application

    from lychee_ray.config import ServeConfig
    from lychee_ray.ray.serve import DEPLOYMENT_NAME, serve_ongoing_requests

    app_cfg = _file()["applications"][0]
    extra = tmp_path / "extra.yaml"
    extra.write_text("serve:\n  max_ongoing_requests: 5\n", encoding="utf-8")
    args = {**app_cfg["args"], "memory": small_store, "config": str(extra), "set": "serve.replica_num_cpus=0.3"}
    app = call_user_app_builder_with_args_if_necessary(import_attr(app_cfg["import_path"]), args)
    assert isinstance(app, Application)
    dep = app._bound_deployment
    assert dep.name == DEPLOYMENT_NAME
    # the lychee config (file, then --set) supplies the deployment's defaults
    # (Serve gets more than the replica admits itself: it sheds load with its own JSON 503, serve/admission.py)
    assert dep.max_ongoing_requests == serve_ongoing_requests(ServeConfig(max_ongoing_requests=5)) == 5 + 64 + 64
    assert dep.ray_actor_options["num_cpus"] == 0.3
    assert dep.ray_actor_options["runtime_env"]["env_vars"] == ServeConfig().ray_env
    memory, config = app._bound_deployment.init_args
    assert memory == small_store and config["serve"]["max_ongoing_requests"] == 5

    with pytest.raises(Exception, match="no memory store at .*: the folder does not exist"):
        call_user_app_builder_with_args_if_necessary(import_attr(app_cfg["import_path"]),
                                                     {"memory": str(tmp_path / "missing")})
    # host/port are Serve's http_options, not application args: refused, not silently ignored
    with pytest.raises(Exception, match="port"):
        call_user_app_builder_with_args_if_necessary(import_attr(app_cfg["import_path"]),
                                                     {"memory": small_store, "port": 9000})


def _wait_running(name: str, timeout_s: float) -> None:
    from ray import serve

    deadline = time.monotonic() + timeout_s
    status = None
    while time.monotonic() < deadline:
        app = serve.status().applications.get(name)
        status = app.status if app else None
        if status == "RUNNING":
            return
        if status == "DEPLOY_FAILED":
            pytest.fail(f"deploy failed: {app.message}")
        time.sleep(0.5)
    pytest.fail(f"{name} not RUNNING after {timeout_s} s (status {status})")


def _deploy_and_search(serve_url: str, memory: str, env: dict[str, str]) -> None:
    """Deploy configs/serve.yaml (store ``memory``, ``env`` added to the application's runtime_env)
    as `serve run` does, check the file's deployment options won, search, and delete the app."""
    from ray import serve
    from ray.serve._private import api as serve_api
    from ray.serve.schema import ServeDeploySchema

    from lychee_ray.config import ServeConfig

    raw = copy.deepcopy(_file())
    port = int(serve_url.rsplit(":", 1)[1])
    raw["http_options"].update(host="127.0.0.1", port=port)  # the session's proxy (one port per Ray)
    app = raw["applications"][0]
    app.update(name=APP, route_prefix=PREFIX)
    app["runtime_env"]["env_vars"].update(env)
    app["args"]["memory"] = memory
    app["args"]["set"] = [*app["args"]["set"], "llm.backend=rules", f"serve.token={TOKEN}"]
    (dep,) = app["deployments"]
    dep["max_ongoing_requests"] = 3             # not the code's (serve_ongoing_requests: 8 + 64 + 64)
    dep["ray_actor_options"]["num_cpus"] = 0.25  # leave the session's 2 CPUs to the other Ray tests
    dep["autoscaling_config"].update(min_replicas=1, initial_replicas=1, max_replicas=1)
    config = ServeDeploySchema.model_validate(raw)

    t0 = time.perf_counter()
    client = serve_api.serve_start(http_options=config.http_options.model_dump(), proxy_location=config.proxy_location)
    client.deploy_apps(config, _blocking=False)  # what `serve run configs/serve.yaml` does
    try:
        _wait_running(APP, 90)  # a replica loads the model (~15 s; more on a loaded CI machine)
        details = client.get_serve_details()["applications"][APP]["deployments"]["LycheeMemory"]
        dc = details["deployment_config"]
        # the file's options win; one it leaves out keeps the lychee config's value (the code's default)
        assert dc["max_ongoing_requests"] == 3 and "max_queued_requests" not in dep
        assert dc["max_queued_requests"] == ServeConfig().proxy_max_queued_requests != -1
        assert dc["autoscaling_config"]["max_replicas"] == 1 and dc["ray_actor_options"]["num_cpus"] == 0.25
        with httpx.Client(base_url=serve_url + PREFIX, timeout=30) as c:
            body = {"conversation_id": "c-1", "question": Q, "question_date": "2023-08-01"}
            assert c.post("/v1/search", json=body).status_code == 401  # serve.token from args.set
            auth = {"Authorization": f"Bearer {TOKEN}"}
            r = c.post("/v1/search", json=body, headers=auth)
            assert r.status_code == 200, r.text
            ev = r.json()["evidence"]
            assert ev and {e["conversation_id"] for e in ev} == {"c-1"}
            assert any("D1:1" in e["source_turn_ids"] for e in ev)
            # the file's runtime_env reached the replica; its store is not the fixture's (2 conversations)
            st = c.get("/v1/admin/stats", headers=auth).json()
            assert st["ray_env"]["RAY_SERVE_RUN_USER_CODE_IN_SEPARATE_THREAD"] == "0"
            assert c.get("/healthz").json()["conversations"] == 1
            assert c.post("/v1/admin/reload", headers=auth).status_code == 200
        print(f"config app on {memory}: ready and answered in {time.perf_counter() - t0:.1f} s")
    finally:
        serve.delete(APP)
    # the fixture's application on the same proxy is untouched
    assert httpx.get(serve_url + "/healthz", timeout=30).json()["conversations"] == 2


@pytest.mark.ray
def test_serve_config_file_answers_search_from_s3(serve_url, s3_server, embedder):
    """configs/serve.yaml, its store on the S3 server: the URI goes to the replicas untouched, and
    the endpoint and credentials reach them through the application's runtime_env (as on a cluster)."""
    from tests.stores import conversation_spec, make_store

    uri = s3_server.bucket("lychee-serve-config") + "/locomo"
    make_store(uri, embedder, [conversation_spec("c-1", "u-1")])
    _deploy_and_search(serve_url, uri, s3_server.env())


@pytest.mark.ray
@pytest.mark.slow
def test_serve_config_file_answers_search_from_local_store(serve_url, small_store):
    """The same from a local directory (the S3 test above covers this path in CI; LYCHEE_SLOW=1 runs it)."""
    _deploy_and_search(serve_url, small_store, {})


def test_store_location_keeps_uris_as_strings():
    """Remote URIs pass through untouched (never Path()-ed); local paths become absolute for the replicas."""
    from lychee_ray.ray.serve import store_location

    assert store_location("s3://lychee-memory/locomo") == "s3://lychee-memory/locomo"
    assert store_location("file:///data/store") == "/data/store"
    assert Path(store_location("rel/store")).is_absolute()
