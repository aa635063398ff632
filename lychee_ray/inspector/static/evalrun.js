// An eval run's questions: gold turns vs the selected evidence, hit or miss, by category — and for
// one question, the gold turns' text and a way to run its search again.
import { api, conversationPath } from "./api.js";
import { fill, h, href, num, fmtValue } from "./dom.js";

const turnsCache = new Map();

async function turnsOf(cid) {
  if (!turnsCache.has(cid)) {
    turnsCache.set(cid, api(conversationPath(cid)).then((d) => new Map(d.turns.map((t) => [t.turn_id, t]))).catch(() => new Map()));
  }
  return turnsCache.get(cid);
}

function badge(outcome) { return h("span", { class: `badge out-${outcome.replace("/", "")}` }, outcome); }

async function detail(q, run, budget) {
  const turns = await turnsOf(q.conversation_id);
  const covered = new Set(q.covered);
  const gold = q.gold_turns.length
    ? h("ul", { class: "gold" }, q.gold_turns.map((tid) => {
      const t = turns.get(tid);
      return h("li", { class: covered.has(tid) ? "hit" : "miss" },
        h("span", { class: "mark" }, covered.has(tid) ? "✓ selected " : "✗ not selected "),
        h("a", { href: href(["c", q.conversation_id], { turn: tid }) }, tid), t ? `  ${t.speaker}: ${t.content}` : "  (not in this store)");
    }))
    : h("p", { class: "muted" }, "This run's rows carry no gold turn ids (a `lychee-ray eval` run: see its evidence recall).");
  const selected = q.selected_turns.length ? h("p", {}, `selected turns (${q.selected_turns.length}): `,
    q.selected_turns.map((tid, i) => [i ? ", " : "", h("a", { href: href(["c", q.conversation_id], { turn: tid }), class: covered.has(tid) ? "gold-hit" : null }, tid)])) : null;
  return h("div", { class: "qdetail" },
    h("h3", {}, "Gold turns"), gold, selected,
    q.answer !== null && q.answer !== undefined ? h("p", {}, h("strong", {}, "answer: "), q.answer, h("br"), h("strong", {}, "gold: "), q.gold_answer || "—") : null,
    Object.keys(q.extra).length ? h("details", {}, h("summary", {}, "all figures"), h("dl", { class: "pairs" },
      Object.entries(q.extra).map(([k, v]) => [h("dt", {}, k), h("dd", {}, fmtValue(v))]))) : null,
    h("p", {}, h("a", { href: href(["search"], { conversation: q.conversation_id, q: q.question, budget: budget || "" }), class: "rerun" },
      "Run this search now (playground)"), " · ", h("a", { href: href(["c", q.conversation_id]) }, "open the conversation")));
}

export async function evalPage(main, r) {
  const name = r.path[1];
  const p = r.params;
  const runs = await api("runs");
  const run = runs.find((x) => x.name === name);
  if (!run) throw new Error(`unknown eval run ${name}`);
  document.title = `${run.name} · eval · lychee-ray inspector`;
  const filt = { system: p.get("system") || run.systems[0] || "", category: p.get("category"), result: p.get("result"), conversation: p.get("conversation"), q: p.get("q") };
  const offset = Number(p.get("offset") || 0);
  const page = await api(`runs/${encodeURIComponent(run.name)}/questions`, { params: { ...filt, offset } });
  const sel = (id, label, value, opts) => [h("label", { for: id }, label), " ", h("select", { id, name: id },
    opts.map(([v, t]) => h("option", { value: v, selected: v === (value || "") }, t)))];
  const form = h("form", { class: "filters", role: "search", "aria-label": "Filter questions", onsubmit: (ev) => {
    ev.preventDefault();
    const f = new FormData(ev.target);
    location.hash = href(["eval", run.name], Object.fromEntries([...f.entries()]));
  } },
  sel("system", "System", filt.system, run.systems.map((x) => [x, x])),
  sel("category", "Category", filt.category, [["", "any"], ...run.categories.map((c) => [c, c])]),
  sel("result", "Result", filt.result, [["", "any"], ["hit", "hit (all gold turns)"], ["partial", "partial"], ["miss", "miss (no gold turn)"], ["n/a", "n/a"]]),
  h("label", { for: "conversation" }, "Conversation"), " ", h("input", { id: "conversation", name: "conversation", value: filt.conversation || "", size: 14 }),
  h("label", { for: "qtext" }, "Question contains"), " ", h("input", { id: "qtext", name: "q", value: filt.q || "", size: 16 }),
  h("button", { type: "submit" }, "Filter"));
  const rows = page.rows.map((q, i) => {
    const slot = h("tr", { class: "detail-row", hidden: true }, h("td", { colspan: 7 }));
    const btn = h("button", { type: "button", class: "link qopen", "aria-expanded": "false", onclick: async () => {
      const open = btn.getAttribute("aria-expanded") === "true";
      btn.setAttribute("aria-expanded", String(!open));
      slot.hidden = open;
      if (!open && !slot.firstChild.firstChild) slot.firstChild.append(await detail(q, run, page.budget_tokens));
    } }, q.question);
    return [h("tr", { class: `q out-${q.outcome.replace("/", "")}`, dataset: { i } },
      h("td", {}, btn), h("td", {}, q.conversation_id), h("td", {}, q.category), h("td", {}, badge(q.outcome)), h("td", { class: "n" }, num(q.recall)),
      h("td", {}, q.gold_turns.join(", ") || "—"), h("td", { class: "n" }, String(q.selected_turns.length))), slot];
  });
  const counts = Object.entries(page.counts).map(([k, v]) => `${k} ${v}`).join(" · ");
  fill(main, 
    h("h1", {}, `${run.name}: questions`), h("p", { class: "muted" }, `${run.kind} · ${run.path}` + (page.budget_tokens ? ` · budget ${page.budget_tokens} tokens` : "")),
    form, h("p", { id: "outcome-counts" }, counts || "no question matches"),
    page.rows.length ? h("table", { class: "grid questions" }, h("caption", { class: "muted" }, `${page.total} question(s)`),
      h("thead", {}, h("tr", {}, ["question", "conversation", "category", "result", "recall", "gold turns", "selected"].map((c) => h("th", { scope: "col" }, c)))),
      h("tbody", {}, rows)) : null,
    h("nav", { class: "pager", "aria-label": "Pages of questions" },
      offset > 0 ? h("a", { href: href(["eval", run.name], { ...filt, offset: Math.max(0, offset - page.limit) }) }, "← previous") : null,
      h("span", { class: "muted" }, ` ${page.total ? offset + 1 : 0}–${offset + page.rows.length} of ${page.total} `),
      offset + page.limit < page.total ? h("a", { href: href(["eval", run.name], { ...filt, offset: offset + page.limit }) }, "next →") : null),
    h("p", {}, h("a", { href: "#/reports" }, "← reports")));
}
