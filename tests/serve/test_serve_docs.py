"""The service's API docs pages without internet: Swagger UI and ReDoc assets served by the app itself."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from lychee_ray.serve import create_app
from tests.stores import conversation_spec, make_store
from tests.serve.test_serve_app import TOKEN, make_service


@pytest.fixture(scope="module")
def store_dir(tmp_path_factory, embedder):
    return make_store(tmp_path_factory.mktemp("docs_store"), embedder, [conversation_spec("c-1", "u-1")])


def _asset_urls(html: str) -> list[str]:
    """Every script src and stylesheet/icon href a docs page names."""
    import re

    return re.findall(r'<script[^>]*\bsrc="([^"]+)"', html) + re.findall(r'<link[^>]*\bhref="([^"]+)"', html)


@pytest.mark.heavy
@pytest.mark.parametrize("root_path", ["", "/lychee"])
def test_docs_pages_work_offline_and_under_a_route_prefix(store_dir, embedder, root_path):
    """``/docs`` (Swagger UI) and ``/redoc`` name only assets the app serves itself, so they render with
    the network off; under a route prefix (Ray Serve's ``root_path``) every URL carries it, and the
    docs stay open while the API needs the token."""
    svc = make_service(store_dir, embedder, **{"serve.token": TOKEN})
    with TestClient(create_app(svc), root_path=root_path) as c:
        for page, needs in (("/docs", ("swagger-ui-bundle.js", "swagger-ui.css")), ("/redoc", ("redoc.standalone.js",))):
            # Ray Serve puts the prefix in both path and root_path; some proxies only in root_path
            for path in dict.fromkeys((root_path + page, page)):
                r = c.get(path)
                assert r.status_code == 200 and "text/html" in r.headers["content-type"], (path, r.text[:200])
                urls = _asset_urls(r.text)
                assert all(any(u.endswith(n) for u in urls) for n in needs), urls
                assert f"{root_path}/openapi.json" in r.text
                for u in urls:
                    assert u.startswith(f"{root_path}/docs-assets/"), u  # nothing from a CDN or Google Fonts
                    a = c.get(u)
                    assert a.status_code == 200 and len(a.content) > 1000, (u, a.status_code, len(a.content))
            assert "fonts.googleapis" not in r.text and "cdn.jsdelivr" not in r.text
        assert c.get(f"{root_path}/openapi.json").json()["paths"]
        assert c.get(f"{root_path}/v1/conversations").status_code == 401
        # only the listed asset files are open: nothing else under the assets path, no directory
        for other in ("/docs-assets/nope.js", "/docs-assets/../v1/admin/stats", "/docs-assets/", "/docs/"):
            assert c.get(root_path + other).status_code == 401, other
        auth = {"Authorization": f"Bearer {TOKEN}"}
        assert c.get(f"{root_path}/docs-assets/nope.js", headers=auth).status_code == 404
        ok = c.get(f"{root_path}/v1/conversations", headers=auth)
        assert ok.status_code == 200 and ok.json()["total"] == 1
    svc.close()
