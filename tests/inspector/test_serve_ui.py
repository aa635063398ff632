"""``lychee-ray serve`` mounts the inspector's pages under ``/ui`` on Ray Serve (the session's one Serve
instance): the pages and assets without a key, their API behind the same bearer token as ``/v1``."""

from __future__ import annotations

import httpx
import pytest

from tests.serve_fixtures import SERVE_AUTH as AUTH

pytestmark = pytest.mark.ray


def test_serve_mounts_the_inspector_under_ui(serve_url):
    with httpx.Client(base_url=serve_url, timeout=60) as c:
        page = c.get("/ui/")
        assert page.status_code == 200 and '<script type="module" src="static/app.js">' in page.text
        assert c.get("/ui/static/app.js").status_code == 200 and c.get("/ui/static/style.css").status_code == 200
        assert c.get("/ui/api/store").status_code == 401
        store = c.get("/ui/api/store", headers=AUTH).json()
        assert store["conversations"] == 2 and store["auth"] is True and store["admin"] is True
        rows = c.get("/ui/api/conversations", headers=AUTH).json()["rows"]
        assert [r["conversation_id"] for r in rows] == ["c-1", "c-2"]
        d = c.get("/ui/api/conversations/c-1", headers=AUTH).json()
        assert d["records"] and d["turns"][0]["turn_id"] == "D1:1"
