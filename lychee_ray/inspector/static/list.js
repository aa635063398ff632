// Conversations: a page of the list with its filters (user, kind, failed / degenerate, id text).
import { api } from "./api.js";
import { fill, h, href, when } from "./dom.js";

function select(id, label, value, options) {
  return [h("label", { for: id }, label), h("select", { id, name: id },
    options.map(([v, text]) => h("option", { value: v, selected: v === (value || "") }, text)))];
}

function kindName(k) { return k ? (k === "agent" ? "agent log" : k) : "…"; }

// The page comes from commit markers alone; the kinds not known yet (each read once from its
// conversation's turns) are asked for after it is drawn.
async function fillKinds(main, rows) {
  const missing = rows.filter((c) => c.status === "built" && !c.kind).map((c) => c.conversation_id);
  if (!missing.length) return;
  const params = new URLSearchParams();
  missing.forEach((id) => params.append("id", id));
  let kinds = {};
  try { kinds = await api("kinds?" + params.toString()); } catch { return; }
  for (const td of main.querySelectorAll("td.kind")) {
    if (td.textContent === "…") td.textContent = kindName(kinds[td.dataset.cid]) === "…" ? "—" : kindName(kinds[td.dataset.cid]);
  }
}

export async function listPage(main, r, state) {
  const p = r.params;
  const filters = { user: p.get("user"), kind: p.get("kind"), status: p.get("status"), q: p.get("q") };
  const offset = Number(p.get("offset") || 0);
  const page = await api("conversations", { params: { ...filters, offset, limit: state.store.page_size } });
  document.title = "Conversations · lychee-ray inspector";
  const form = h("form", { class: "filters", role: "search", "aria-label": "Filter conversations", onsubmit: (ev) => {
    ev.preventDefault();
    const f = new FormData(ev.target);
    location.hash = href([], { user: f.get("user"), kind: f.get("kind"), status: f.get("status"), q: f.get("q") });
  } },
  select("user", "User", filters.user, [["", "any user"], ...page.users.map((u) => [u, u])]),
  select("kind", "Kind", filters.kind, [["", "any kind"], ...state.store.kinds.map((k) => [k, k === "agent" ? "agent log" : k])]),
  select("status", "Status", filters.status, [["", "any status"], ["failed", "failed (segments or build)"], ["degenerate", "degenerate segments"], ["built", "built"]]),
  h("label", { for: "q" }, "Id contains"), h("input", { id: "q", name: "q", value: filters.q || "", size: 16 }),
  h("button", { type: "submit" }, "Filter"));
  const rows = page.rows.map((c) => h("tr", { class: c.status === "failed" ? "failed" : null },
    h("td", {}, c.status === "built" ? h("a", { href: href(["c", c.conversation_id]), class: "conv-link" }, c.conversation_id) : c.conversation_id),
    h("td", {}, c.user_id || "—"),
    h("td", { class: "kind", dataset: { cid: c.conversation_id } }, c.status === "built" ? kindName(c.kind) : "—"),
    h("td", { class: "n" }, String(c.turns)), h("td", { class: "n" }, String(c.segments)), h("td", { class: "n" }, String(c.records)),
    h("td", { class: "n" }, c.failed_segments ? h("span", { class: "badge bad" }, String(c.failed_segments)) : "0"),
    h("td", { class: "n" }, c.degenerate_segments ? h("span", { class: "badge warn" }, String(c.degenerate_segments)) : "0"),
    h("td", {}, c.status === "failed" ? h("span", { class: "badge bad", title: c.error || "" }, "failed to build") : when(c.committed_at))));
  const nav = h("nav", { class: "pager", "aria-label": "Pages of the list" },
    offset > 0 ? h("a", { href: href([], { ...filters, offset: Math.max(0, offset - page.limit) }) }, "← previous") : null,
    h("span", { class: "muted" }, ` ${page.total ? offset + 1 : 0}–${offset + page.rows.length} of ${page.total} `),
    page.next_offset !== null ? h("a", { href: href([], { ...filters, offset: page.next_offset }) }, "next →") : null);
  fill(main, 
    h("h1", {}, "Conversations"),
    form,
    page.rows.length ? h("table", { class: "grid list" },
      h("caption", { class: "muted" }, `${page.total} conversation(s) · page served in ${page.server_ms} ms`),
      h("thead", {}, h("tr", {}, ["conversation", "user", "kind", "turns", "segments", "records", "failed seg.", "degenerate seg.", "built"].map((c) => h("th", { scope: "col" }, c)))),
      h("tbody", {}, rows)) : h("p", { class: "muted" }, "No conversation matches."),
    nav);
  await fillKinds(main, page.rows);
}
