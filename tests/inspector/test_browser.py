"""The inspector in a real browser (Playwright driving the OS's Chromium; skipped with the reason where
there is none): list → conversation → record → its source turn; a search whose budget changes; an eval
run's per-question view; a tenant's key that cannot reach another tenant's conversation through
``/ui``; keyboard navigation; the contrast of the main colours.

``LYCHEE_INSPECTOR_SCREENSHOTS=DIR`` also writes the pages' screenshots there (docs/images/ holds
the ones the docs show).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tests.inspector_fixtures import TENANT_KEYS
from tests.io.test_store_contract import toy_table  # noqa: F401 — a registered sixth table (fixture)

pytestmark = pytest.mark.browser
WAIT_MS = 60_000  # the first search loads the query model; the suite must pass with every core busy
Q = "When did Caroline go to the LGBTQ support group?"


def shot(page, name: str) -> None:
    out = os.environ.get("LYCHEE_INSPECTOR_SCREENSHOTS")
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(out) / f"{name}.png"))


@pytest.fixture()
def page(browser):
    ctx = browser.new_context(viewport={"width": 1360, "height": 860})
    p = ctx.new_page()
    p.set_default_timeout(WAIT_MS)
    errors: list[str] = []
    p.on("pageerror", lambda e: errors.append(str(e)))
    yield p
    ctx.close()
    assert not errors, errors  # no script error on any page


def test_list_conversation_record_and_its_source_turn(page, inspector_url, inspector_data):
    page.goto(inspector_url)
    link = page.locator("a.conv-link", has_text=inspector_data.locomo_id)
    link.wait_for()
    assert page.locator("a.conv-link").count() == 5
    page.wait_for_function("() => ![...document.querySelectorAll('td.kind')].some((td) => td.textContent === '…')")
    assert sorted(page.locator("td.kind").all_inner_texts()) == ["agent log"] * 3 + ["chat", "dialogue"]
    shot(page, "inspector-list")
    link.click()
    page.locator("#conv-title", has_text=inspector_data.locomo_id).wait_for()
    assert page.locator(".seg").count() == page.locator(".segsep").count() > 0  # the timeline's segments, the transcript's
    record = page.locator("button.record").first
    turns = re.search(r"turns ([^·]+)", record.locator("xpath=..").locator(".rmeta").inner_text()).group(1).strip()
    record.click()
    src = page.locator(".turn.src")
    src.first.wait_for()
    assert sorted(src.locator(".tid").all_inner_texts()) == sorted(t.strip() for t in turns.split(","))
    assert record.get_attribute("aria-pressed") == "true"
    assert page.evaluate("document.activeElement.classList.contains('src')")
    assert src.first.is_visible() and "highlighted" in page.locator("#selection").inner_text()
    shot(page, "inspector-conversation")
    # the turn's own button goes the other way: the records made from it
    page.locator(".turn .turn-head button.link").first.click()
    assert page.locator("button.record.from-turn").count() >= 1


def test_an_agent_log_renders_tool_calls_and_its_system_prompt_once(page, inspector_url, inspector_data):
    page.goto(f"{inspector_url}#/c/{inspector_data.agent_ids[0]}")
    page.locator("#conv-title").wait_for()
    assert page.locator("details.sysprompt").count() == 1
    assert page.locator("details.sysprompt pre").inner_text().startswith("# Airline Agent Policy")
    assert page.locator(".turn.role-system pre").count() == 0  # not repeated in the transcript
    calls = page.locator(".toolcall")
    assert calls.count() >= 1 and "(" in calls.first.inner_text() and "call " in calls.first.inner_text()
    assert page.locator(".toolresult-head").count() >= 1 and "result of" in page.locator(".toolresult-head").first.inner_text()
    shot(page, "inspector-agent-log")


def test_search_with_a_budget_change(page, inspector_url, inspector_data):
    page.goto(f"{inspector_url}#/search?conversation={inspector_data.locomo_id}&budget=2000&date=2023-07-01&q=" + Q.replace(" ", "%20"))
    page.locator("#question").wait_for()
    assert page.input_value("#question") == Q  # the question's own "?" is not taken for the parameters
    summary = page.locator("#search-summary")
    summary.wait_for()
    assert "/2000 tokens" in summary.inner_text()
    wide = page.locator("table.evidence tbody tr").count()
    assert wide > 0 and page.locator("table.evidence thead th", has_text="rank: records").count() == 1
    page.fill("#budget", "100")
    page.dispatch_event("#budget", "change")
    page.locator("#search-summary", has_text="/100 tokens").wait_for()
    used = int(re.search(r"(\d+)/100 tokens", summary.inner_text()).group(1))
    assert 0 < used <= 100 and page.locator("table.evidence tbody tr").count() <= wide
    assert page.locator("table.dropped tbody tr").count() >= 1  # what the budget dropped
    assert '"budget_tokens": 100' in page.locator("#request-json").inner_text()
    assert "/v1/search" in page.locator("#request-curl").inner_text()
    assert page.locator("#context").inner_text().startswith("## ")
    shot(page, "inspector-search")


def test_eval_per_question_view(page, inspector_url):
    page.goto(f"{inspector_url}#/reports")
    page.locator("figure.plot svg").first.wait_for()  # the build report's plots, drawn inline
    assert page.locator(".plots figure.plot").count() == 3 and page.locator(".plots figure.plot svg rect").count() > 3
    shot(page, "inspector-reports")
    page.locator("a.run-link").click()
    page.locator("table.questions").wait_for()
    page.select_option("#result", "miss")
    page.locator("form.filters button[type=submit]").click()
    page.locator("#outcome-counts").wait_for()
    page.wait_for_function("() => [...document.querySelectorAll('table.questions tr.q')].every(r => r.classList.contains('out-miss'))")
    rows = page.locator("table.questions tr.q")
    assert rows.count() >= 1
    rows.first.locator("button.qopen").click()
    detail = page.locator(".qdetail").first
    detail.wait_for()
    assert detail.locator("ul.gold li.miss").count() >= 1 and "not selected" in detail.locator("ul.gold").inner_text()
    assert "#/search?" in detail.locator("a.rerun").get_attribute("href")
    shot(page, "inspector-eval")


def test_a_tenant_key_cannot_reach_another_tenants_conversation(page, tenant_ui, inspector_data):
    page.goto(f"{tenant_ui}/ui/")
    page.locator("#key").wait_for()  # the service asks for a key: the list is not shown without one
    page.fill("#key", "not-a-key")
    page.locator("form.keyform button").click()
    page.locator("#key-help", has_text="refused").wait_for()
    page.fill("#key", TENANT_KEYS["locomo-tenant"])
    page.locator("form.keyform button").click()
    page.locator("a.conv-link").first.wait_for()
    assert page.locator("a.conv-link").all_inner_texts() == [inspector_data.locomo_id]
    other = inspector_data.agent_ids[0]
    page.goto(f"{tenant_ui}/ui/#/c/{other}")
    alert = page.locator("[role=alert]")
    alert.wait_for()
    assert "Not found" in alert.inner_text() and page.locator(".turn").count() == 0
    page.goto(f"{tenant_ui}/ui/#/search?conversation={other}&q=what%20was%20booked")
    page.locator("#results .error").wait_for()
    assert "Not found" in page.locator("#results .error").inner_text() and page.locator("table.evidence").count() == 0
    # the API behind the page answers the same to the tenant's key
    status = page.evaluate("""async (id) => (await fetch('api/conversations/' + id,
        {headers: {Authorization: 'Bearer ' + sessionStorage.getItem('lychee-inspector-key')}})).status""", other)
    assert status == 404


def _luminance(rgb: tuple[float, ...]) -> float:
    def lin(c: float) -> float:
        c = c / 255.0
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4
    r, g, b = (lin(x) for x in rgb[:3])
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(fg: tuple[float, ...], bg: tuple[float, ...]) -> float:
    """WCAG 2 contrast ratio of two sRGB colours."""
    a, b = sorted((_luminance(fg), _luminance(bg)), reverse=True)
    return (a + 0.05) / (b + 0.05)


def rgb(css: str) -> tuple[float, ...]:
    return tuple(float(x) for x in re.findall(r"[\d.]+", css)[:3])


# (what, selector): text and the background it sits on (the nearest ancestor that paints one), on the
# list page and on a conversation page with a record selected
LIST_PAIRS = [("links", "a.conv-link"), ("header links", "header nav a"), ("table headers", "table.grid th"),
              ("muted text", ".muted"), ("buttons", "button")]
CONVERSATION_PAIRS = [("body text", "main p"), ("a selected source turn", ".turn.src"),
                      ("a pressed record", "button.record[aria-pressed=true]"), ("turn ids", ".turn .tid"),
                      ("segment notes", ".segsep"), ("record notes", ".rmeta")]
BACKGROUND_OF = """(el) => { let e = el; while (e) { const c = getComputedStyle(e).backgroundColor;
  if (c && c !== 'rgba(0, 0, 0, 0)' && c !== 'transparent') return c; e = e.parentElement; } return 'rgb(255, 255, 255)'; }"""


def ratios(page, pairs: list[tuple[str, str]]) -> dict[str, float]:
    out = {}
    for what, sel in pairs:
        el = page.locator(sel).first
        out[what] = round(contrast(rgb(el.evaluate("(e) => getComputedStyle(e).color")), rgb(el.evaluate(BACKGROUND_OF))), 2)
    return out


def test_keyboard_navigation_and_readable_contrast(page, inspector_url, inspector_data):
    page.goto(inspector_url)
    page.locator("a.conv-link").first.wait_for()
    measured = ratios(page, LIST_PAIRS)
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.id") == "skip"  # the first stop skips the header
    # by keyboard alone: to the LoCoMo conversation's link, open it, to a record, select it
    for _ in range(40):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.textContent") == inspector_data.locomo_id:
            break
    else:
        pytest.fail("the conversation link is not reachable by Tab")
    page.keyboard.press("Enter")
    page.locator("#conv-title", has_text=inspector_data.locomo_id).wait_for()
    assert page.evaluate("document.activeElement.id") == "conv-title"  # focus moves to the new page
    for _ in range(80):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.classList.contains('record')"):
            break
    else:
        pytest.fail("no record is reachable by Tab")
    page.keyboard.press("Enter")
    page.locator(".turn.src").first.wait_for()
    assert page.evaluate("document.activeElement.classList.contains('turn')")  # focus went to the source turn
    measured |= ratios(page, CONVERSATION_PAIRS)
    assert all(r >= 4.5 for r in measured.values()), measured  # WCAG AA for text
    swatches = page.locator(".seg").evaluate_all("(els) => els.map(e => getComputedStyle(e).backgroundColor)")
    assert all(contrast(rgb(c), (255, 255, 255)) >= 3.0 for c in swatches), swatches  # graphics: 3:1 on the page


def test_records_show_their_status_and_replacement_chain(page, tmp_path, embedder, toy_table):
    """Once records carry a status and what replaced them, the record view shows both (and a table
    without a view of its own is shown by column)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from lychee_ray.config import load_config
    from lychee_ray.inspector.server import InspectorServer
    from lychee_ray.io.store import StoreWriter
    from lychee_ray.serve.service import MemoryService
    from tests.io.test_store_contract import toy_artifacts

    w = StoreWriter(tmp_path)
    m = w.commit(toy_artifacts("a", 3))
    part = w.layout.marker_part_path("records", m)
    t = pq.read_table(part)
    t = t.append_column("status", pa.array(["superseded", "superseded", "current"]))
    t = t.append_column("superseded_by", pa.array(["a-r1", "a-r2", None]))
    pq.write_table(t, part)
    cfg = load_config(env={})
    server = InspectorServer(tmp_path, cfg, service=MemoryService(tmp_path, cfg, embedder=embedder, llm="rules"))
    url = server.start() + "/ui/"
    try:
        page.goto(f"{url}#/c/a")
        page.locator("#conv-title").wait_for()
        assert page.locator(".badge.status-current").count() == 1 and page.locator(".badge.status-superseded").count() == 2
        first = page.locator(".rlist li").first
        assert first.locator(".rmeta", has_text="replaced by").inner_text() == "replaced by fact 1 → fact 2"
        assert page.locator("details.panel summary", has_text="toy (3 rows)").count() == 1
    finally:
        server.stop()
