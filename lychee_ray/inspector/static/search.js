// The search playground: question, scope, recent turns, budget -> the selected evidence with each
// channel's rank, the fused score and tokens, what the budget dropped, the exact context, and the
// same request as JSON and as curl.
import { api } from "./api.js";
import { fill, h, day, href, num, table } from "./dom.js";

function recentTurns(text) {
  return text.split("\n").map((l) => l.trim()).filter(Boolean).map((l) => {
    const m = l.match(/^(user|assistant|tool|system)\s*:\s*(.*)$/i);
    return m ? { role: m[1].toLowerCase(), content: m[2] } : { content: l };
  });
}

function copyButton(getText, label) {
  return h("button", { type: "button", class: "small", onclick: async (ev) => {
    try { await navigator.clipboard.writeText(getText()); ev.target.textContent = "copied"; } catch { ev.target.textContent = "select and copy"; }
  } }, label);
}

function ranksCells(ranks, channels) { return channels.map((ch) => (ranks && ranks[ch] ? String(ranks[ch]) : "·")); }

export async function searchPage(main, r, state) {
  document.title = "Search · lychee-ray inspector";
  const p = r.params;
  const scope = p.get("user") ? "user" : "conversation";
  const ids = await api("conversations", { params: { limit: Math.min(200, state.store.page_size * 4) } });
  const f = {
    scope: h("select", { id: "scope", name: "scope" }, h("option", { value: "conversation", selected: scope === "conversation" }, "conversation"),
      h("option", { value: "user", selected: scope === "user" }, "user (all of its conversations)")),
    id: h("input", { id: "scope-id", name: "id", list: "scope-ids", required: true, size: 28, value: p.get("user") || p.get("conversation") || "" }),
    question: h("textarea", { id: "question", name: "question", rows: 2, cols: 60, required: true }, p.get("q") || ""),
    recent: h("textarea", { id: "recent", name: "recent", rows: 2, cols: 60, placeholder: "user: my order is 4711 (one turn a line, oldest first)" }),
    date: h("input", { id: "qdate", name: "date", type: "text", size: 20, placeholder: "2023-08-01 (default: now)", value: p.get("date") || "" }),
    budget: h("input", { id: "budget", name: "budget", type: "number", min: 0, max: 16000, step: 50, value: p.get("budget") || 2000 }),
  };
  const out = h("div", { id: "results", "aria-live": "polite" });
  const form = h("form", { class: "panel search", "aria-label": "Search", onsubmit: (ev) => { ev.preventDefault(); run(); } },
    h("div", { class: "row" }, h("label", { for: "scope" }, "Scope"), " ", f.scope, " ", h("label", { for: "scope-id" }, "id"), " ", f.id,
      h("datalist", { id: "scope-ids" }, [...new Set([...ids.rows.map((x) => x.conversation_id), ...ids.users])].map((x) => h("option", { value: x })))),
    h("div", { class: "row" }, h("label", { for: "question" }, "Question"), h("br"), f.question),
    h("div", { class: "row" }, h("label", { for: "recent" }, "Recent turns (the asking agent's, optional)"), h("br"), f.recent),
    h("div", { class: "row" }, h("label", { for: "qdate" }, "Question date"), " ", f.date, " ",
      h("label", { for: "budget" }, "Budget (tokens)"), " ", f.budget, " ", h("button", { type: "submit", id: "run" }, "Search")));
  f.budget.addEventListener("change", () => { if (f.question.value.trim() && f.id.value.trim()) run(); });

  async function run() {
    const body = { question: f.question.value, budget_tokens: Number(f.budget.value) };
    body[f.scope.value === "user" ? "user_id" : "conversation_id"] = f.id.value.trim();
    if (f.date.value.trim()) body.question_date = f.date.value.trim();
    const rt = recentTurns(f.recent.value);
    if (rt.length) body.recent_turns = rt;
    fill(out, h("p", { class: "muted" }, "Searching…"));
    history.replaceState(null, "", href(["search"], { [f.scope.value]: f.id.value.trim(), q: f.question.value, budget: f.budget.value, date: f.date.value }));
    let page;
    try { page = await api("search", { method: "POST", body }); } catch (e) {
      fill(out, h("p", { class: "error", role: "alert" }, `${e.status === 404 ? "Not found" : "Error"}: ${e.message}`));
      return;
    }
    draw(page);
  }

  function draw(page) {
    const res = page.result, ex = res.explain, chs = ex.channels;
    const several = res.conversation_ids.length > 1;
    const evRanks = new Map(ex.evidence.map((e) => [e.id, e]));
    const evidence = table(["#", "kind", "type", "day", "turns", "fused", ...chs.map((c) => `rank: ${c}`), "score", "tokens", "text"],
      res.evidence.map((e, i) => {
        const er = evRanks.get(e.id) || { ranks: {}, fused_score: 0 };
        const turns = (several ? e.conversation_id + ":" : "") + e.source_turn_ids.join(",");
        return [String(i + 1), e.kind, e.type, day(e.session_date) || "undated",
          h("a", { href: href(["c", e.conversation_id], { turn: e.source_turn_ids[0] }) }, turns),
          num(er.fused_score, 4), ...ranksCells(er.ranks, chs), num(e.score), String(e.tokens), e.text];
      }), { class: "grid evidence", caption: `Selected evidence (${res.evidence.length}), in context order` });
    const dropped = ex.dropped.length
      ? table(["kind", "id", "conversation", "tokens needed", "score", "text"], ex.dropped.map((x) => [x.kind, x.id, x.conversation_id, String(x.tokens), num(x.score), x.text]),
        { class: "grid dropped", caption: `Dropped for the budget (${ex.dropped.length}; ${ex.remaining_tokens} token(s) were left)` })
      : h("p", { class: "muted", id: "nothing-dropped" }, `The budget dropped nothing (${ex.remaining_tokens} token(s) left).`);
    const pool = h("details", {}, h("summary", {}, `Fused pool (${ex.pool.length}) with each channel's rank`),
      table(["pos", "kind", "id", "fused", ...chs, "outcome", "text"], ex.pool.map((x) => [String(x.position), x.kind, x.id, num(x.fused_score, 4),
        ...ranksCells(x.ranks, chs), x.outcome + (x.shown_by ? ` (${x.shown_by})` : ""), x.text]), { class: "grid pool" }));
    const t = res.timings || {};
    fill(out, 
      h("p", { class: "summary", id: "search-summary" }, `${res.evidence.length} evidence item(s), ${res.usage.context_tokens}/${res.budget_tokens} tokens, `,
        `pool ${res.pool_size}, plan ${res.plan.backend}: ${res.plan.question_type}, ${res.plan.routes.length} route(s); `,
        `skipped ${Object.entries(ex.skipped).map(([k, v]) => `${k} ${v}`).join(", ")}; ${num(t.total || 0, 1)} ms`),
      evidence, dropped, pool,
      h("h2", {}, "The context, exactly as the answer prompt shows it"), h("pre", { class: "context", id: "context" }, res.context || "(empty)"),
      h("h2", {}, "The same request"),
      h("div", { class: "row" }, h("span", {}, "JSON body of POST /v1/search "), copyButton(() => JSON.stringify(page.request), "copy")),
      h("pre", { class: "code", id: "request-json" }, JSON.stringify(page.request, null, 1)),
      h("div", { class: "row" }, h("span", {}, "curl "), copyButton(() => page.curl, "copy")),
      h("pre", { class: "code", id: "request-curl" }, page.curl));
  }

  fill(main, h("h1", {}, "Search playground"), form, out);
  if (f.question.value.trim() && f.id.value.trim()) await run();
}
