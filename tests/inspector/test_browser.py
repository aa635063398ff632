"""The inspector in a real browser (Playwright driving the OS's Chromium; skipped with the reason where
there is none): list → conversation → record → its source turn; a search whose budget changes; an eval
run's per-question view; a tenant's key that cannot reach another tenant's conversation through
``/ui``; keyboard navigation; the contrast of the main colours; on the BEAM chat, a record's status and
replacement chain, a long turn's passages, and a search whose passage hit shows its span.

``LYCHEE_INSPECTOR_SCREENSHOTS=DIR`` also writes the pages' screenshots there (docs/images/ holds
the ones the docs show).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tests.inspector_fixtures import TENANT_KEYS

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


def test_a_beam_store_statuses_passages_and_search(page, inspector_url, inspector_data):
    """The BEAM chat: list → conversation → the replaced record → its source turn, "superseded on DATE
    by" the newer record, the slot's chain; the long assistant turn's passages; a search whose budget
    changes, and a passage hit that highlights its span in its turn."""
    cid = inspector_data.beam_id
    page.goto(inspector_url)
    page.locator("a.conv-link", has_text=cid).click()
    page.locator("#conv-title", has_text=cid).wait_for()
    old = page.locator("button.record", has=page.locator(".badge.status-superseded"))
    assert old.count() == 1 and "65%" in old.inner_text()
    old.click()
    src = page.locator(".turn.src")
    src.first.wait_for()
    assert src.count() == 1 and "65% test coverage" in src.inner_text()
    assert page.evaluate("document.activeElement.classList.contains('src')")
    replaced = old.locator("xpath=..").locator(".rstatus", has_text="superseded on 2024-04-05 by")
    replaced.locator("a").click()  # to the newer record: selected, its own source turn highlighted
    new = page.locator("button.record[aria-pressed=true]")
    assert "78%" in new.inner_text() and new.locator(".badge.status-current").count() == 1
    assert "78%" in page.locator(".turn.src").inner_text()
    chain = page.locator(".chain", has_text="78%").locator(".chain-list li")  # the slot's chain: the replaced value, then the current one
    assert chain.count() == 2 and "superseded" in chain.nth(0).inner_text() and "78%" in chain.nth(1).inner_text()
    long_turn = page.locator(".turn", has=page.locator(".passage"))
    assert long_turn.count() == 1 and "role-assistant" in long_turn.get_attribute("class")
    marks = long_turn.locator(".pmark").all_inner_texts()
    assert len(marks) >= 2 and marks == [f"[{i}/{len(marks)}]" for i in range(1, len(marks) + 1)]
    shot(page, "inspector-beam")
    page.goto(f"{inspector_url}#/search?conversation={cid}&budget=100&q=How%20do%20I%20log%20the%20soil%20moisture%20readings")
    summary = page.locator("#search-summary")
    summary.wait_for()
    assert "/100 tokens" in summary.inner_text()
    rows = page.locator("table.evidence tbody tr")
    narrow = rows.count()
    page.fill("#budget", "2000")
    page.dispatch_event("#budget", "change")
    page.locator("#search-summary", has_text="/2000 tokens").wait_for()
    assert rows.count() > narrow
    assert rows.locator(".badge[class*='status-']").count() == rows.count() > 0  # every item's status
    stale = rows.filter(has=page.locator(".badge.status-superseded"))
    # marked superseded: only an item showing the replaced value (the 65% turn); every other is current
    assert all("65%" in t for t in stale.all_inner_texts())
    assert rows.locator(".badge.status-current").count() == rows.count() - stale.count()
    shot(page, "inspector-beam-search")
    hit = rows.filter(has=page.locator("td:nth-child(2)", has_text="passage")).first
    assert re.search(r"\d+ of \d+ · chars \d+–\d+", hit.inner_text())
    pid = re.search(r"\S+#p\d+", hit.locator("a").inner_text()).group(0)
    hit.locator("a").click()  # to the conversation, the passage's span highlighted in its turn
    span = page.locator(".passage.psel")
    span.wait_for()
    assert span.get_attribute("data-pid") == pid and span.locator("xpath=ancestor::div[contains(@class, 'turn')]").first.get_attribute("class").count("src") == 1
    assert f"Passage {pid}" in page.locator("#selection").inner_text()
