// One conversation: the timeline of sessions and segments (cut reasons, turns per segment), the
// records by type (each one selects its source turns in the transcript) with their statuses and
// what replaced them, slot chains in time order, the transcript (tool calls as calls, the system
// prompt once, a long turn's passages), other tables by column, tokens by stage.
import { api, conversationPath } from "./api.js";
import { fill, h, day, fmtValue, href, num, table, when } from "./dom.js";
import { colourOf, legend } from "./plots.js";

// Record columns with a place of their own in the record's view (the rest go under "more").
const SHOWN = new Set(["record_id", "conversation_id", "user_id", "session_id", "segment_id", "ordinal", "type", "text",
  "entities", "topics", "time_start", "time_end", "time_granularity", "time_expression", "source_turn_ids", "created_at",
  "backend", "model", "slot", "slot_value", "valid_from", "supersedes", "conflicts_with", "statements"]);

// The values a record states (core/statements.py): what each is about, as said, its kind and
// modality, the slot it was put in and how many earlier statements it replaced.
function statementsLine(rec) {
  const sts = asList(rec.statements);
  if (!sts.length) return null;
  return h("ul", { class: "statements muted", "aria-label": "statements of value" }, sts.map((st) =>
    h("li", {}, `${st.subject} = ${st.said} (${st.kind}${st.unit ? " " + st.unit : ""}, ${st.modality})`,
      st.slot ? ` · slot ${st.slot}` : "", asList(st.supersedes).length ? ` · replaces ${asList(st.supersedes).length}` : "")));
}

function recordTime(r) {
  const s = day(r.time_start), e = day(r.time_end);
  if (!s && !e) return "";
  return s === e || !e ? s : `${s}..${e}`;
}

function asList(v) { return v === null || v === undefined ? [] : Array.isArray(v) ? v : [v]; }

// A record's derived status (the server's, from the query path's derivation): absent = current.
function statusOf(d, rid) { return d.currency[rid] || { status: "current", superseded_by: [], valid_until: null, conflicts_with: [], latest: [] }; }

function toolCall(c) {
  let args = c.arguments || "";
  try { args = JSON.stringify(JSON.parse(args), null, 1); } catch { /* as given */ }
  return h("div", { class: "toolcall" }, h("span", { class: "arrow", "aria-hidden": "true" }, "→ "),
    h("code", {}, `${c.name}(`), h("pre", { class: "args" }, args), h("code", {}, ")"),
    h("span", { class: "muted" }, ` call ${c.call_id}`));
}

// A long turn's content cut at its passages' spans: each passage a labelled span (the text between
// passages, a paragraph break, stays plain).
function withPassages(t) {
  const out = [];
  let at = 0;
  for (const p of t.passages) {
    if (p.content_start === null) continue;
    if (p.content_start > at) out.push(t.content.slice(at, p.content_start));
    out.push(h("span", { class: "passage", id: `passage-${p.passage_id}`, dataset: { pid: p.passage_id } },
      h("span", { class: "pmark", "aria-label": `passage ${p.index} of ${p.count}` }, `[${p.index}/${p.count}]`), " ",
      t.content.slice(Math.max(at, p.content_start), p.content_end)));
    at = Math.max(at, p.content_end);
  }
  if (at < t.content.length) out.push(t.content.slice(at));
  return out;
}

function turnView(t, d, prompt) {
  const isPrompt = t.role === "system" && prompt && (t.turn_id === prompt.turn_id || prompt.repeats.includes(t.turn_id));
  const head = h("div", { class: "turn-head" },
    h("span", { class: "tid" }, t.turn_id), " ",
    h("strong", {}, t.speaker || t.role), t.speaker && t.speaker !== t.role ? h("span", { class: "muted" }, ` (${t.role})`) : null,
    t.timestamp ? h("span", { class: "muted" }, ` · ${when(t.timestamp)}`) : null);
  let body;
  if (isPrompt) {
    body = h("p", { class: "muted" }, t.turn_id === prompt.turn_id ? "system prompt — shown once, above" : "the same system prompt again — shown once, above");
  } else if (t.role === "tool") {
    body = [h("div", { class: "toolresult-head" }, h("span", { "aria-hidden": "true" }, "← "), `result of ${t.tool_name || "a tool"}`,
      t.tool_call_id ? h("span", { class: "muted" }, ` for call ${t.tool_call_id}`) : null), h("pre", { class: "content tool" }, t.content)];
  } else {
    body = [t.content ? h("div", { class: "content" }, t.passages.length ? withPassages(t) : t.content) : null, t.tool_calls.map(toolCall)];
  }
  if (t.passages.length) {
    head.append(h("span", { class: "muted" }, ` · ${t.passages.length} passages`));
    const outside = t.passages.filter((p) => p.content_start === null);
    if (outside.length) body = [body, h("p", { class: "muted" }, `passage(s) ${outside.map((p) => p.passage_id).join(", ")}: in the rendered tool calls`)];
  }
  return h("div", { class: `turn role-${t.role}`, id: `turn-${t.position}`, tabindex: "-1", dataset: { pos: t.position } }, head, body);
}

export async function conversationPage(main, r) {
  const id = r.path.slice(1).join("/");
  const t0 = performance.now();
  const d = await api(conversationPath(id));
  document.title = `${d.conversation_id} · lychee-ray inspector`;
  const byId = new Map(d.records.map((x) => [x.record_id, x]));
  const turnEls = new Map();
  const recordEls = new Map();
  const posOf = new Map(d.turns.map((t) => [t.turn_id, t.position]));
  const passageTurn = new Map(d.turns.flatMap((t) => t.passages.map((p) => [p.passage_id, t.turn_id])));
  const recsOfTurn = new Map();
  for (const rec of d.records) for (const tid of asList(rec.source_turn_ids)) {
    if (!recsOfTurn.has(tid)) recsOfTurn.set(tid, []);
    recsOfTurn.get(tid).push(rec.record_id);
  }

  function clearMarks() {
    for (const el of main.querySelectorAll(".src, .from-turn, .in-segment, .psel")) el.classList.remove("src", "from-turn", "in-segment", "psel");
    for (const el of main.querySelectorAll("[aria-pressed=true]")) el.setAttribute("aria-pressed", "false");
  }

  function selectRecord(rid, focus = true) {
    const rec = byId.get(rid);
    if (!rec) return;
    clearMarks();
    recordEls.get(rid)?.setAttribute("aria-pressed", "true");
    const els = asList(rec.source_turn_ids).map((t) => turnEls.get(t)).filter(Boolean);
    els.forEach((el) => el.classList.add("src"));
    const status = document.getElementById("selection");
    status.textContent = els.length ? `Record ${rid}: source turn(s) ${asList(rec.source_turn_ids).join(", ")} highlighted.`
      : `Record ${rid} names no turn of this conversation.`;
    if (els[0] && focus) { els[0].scrollIntoView({ block: "center" }); els[0].focus({ preventScroll: true }); }
    history.replaceState(null, "", href(["c", d.conversation_id], { record: rid }));
  }

  function selectTurn(tid, focus = true) {
    clearMarks();
    const el = turnEls.get(tid);
    el?.classList.add("src");
    const rids = recsOfTurn.get(tid) || [];
    rids.forEach((rid) => recordEls.get(rid)?.classList.add("from-turn"));
    document.getElementById("selection").textContent = `Turn ${tid}: ${rids.length} record(s) made from it highlighted.`;
    if (el && focus) { el.scrollIntoView({ block: "center" }); el.focus({ preventScroll: true }); }
    if (rids[0]) recordEls.get(rids[0])?.scrollIntoView({ block: "nearest" });
    history.replaceState(null, "", href(["c", d.conversation_id], { turn: tid }));
  }

  function selectPassage(pid, focus = true) {
    const tid = passageTurn.get(pid);
    if (tid === undefined) return false;
    clearMarks();
    const el = turnEls.get(tid), p = d.turns[posOf.get(tid)].passages.find((x) => x.passage_id === pid);
    el?.classList.add("src");
    const span = [...main.querySelectorAll(".passage")].find((x) => x.dataset.pid === pid);
    span?.classList.add("psel");
    document.getElementById("selection").textContent = `Passage ${pid} (${p.index} of ${p.count}, characters ${p.char_start}–${p.char_end} of turn ${tid}) highlighted.`;
    if (el && focus) { (span || el).scrollIntoView({ block: "center" }); el.focus({ preventScroll: true }); }
    history.replaceState(null, "", href(["c", d.conversation_id], { passage: pid }));
    return true;
  }

  function selectSegment(i) {
    clearMarks();
    const seg = d.segments[i];
    seg.turn_ids.forEach((t) => turnEls.get(t)?.classList.add("in-segment"));
    d.records.filter((x) => x.segment_id === seg.segment_id).forEach((x) => recordEls.get(x.record_id)?.classList.add("from-turn"));
    document.getElementById("selection").textContent = `Segment ${seg.index}: ${seg.turns} turn(s), cut by ${seg.close_reason}, ${seg.num_records} record(s).`;
    const first = turnEls.get(seg.turn_ids[0]);
    if (first) { first.scrollIntoView({ block: "start" }); first.focus({ preventScroll: true }); }
  }

  // a link that selects a record of this page (its text as the label)
  function recordLink(rid) {
    return h("a", { href: href(["c", d.conversation_id], { record: rid }), class: "rlink",
      onclick: (ev) => { ev.preventDefault(); selectRecord(rid); recordEls.get(rid)?.focus(); } }, byId.get(rid)?.text || rid);
  }
  const links = (ids) => ids.map((x, i) => [i ? "; " : "", recordLink(x)]);

  // what replaced a record, what it conflicts with, what it replaces
  function statusLine(rec, st) {
    const parts = [];
    if (st.status === "superseded") {
      parts.push(h("div", { class: "rmeta rstatus" }, st.valid_until ? `superseded on ${day(st.valid_until)} by ` : "superseded by ", links(st.superseded_by)));
      const now = st.latest.filter((x) => !st.superseded_by.includes(x));
      if (now.length) parts.push(h("div", { class: "rmeta rstatus" }, "holds now: ", links(now)));
    }
    if (st.conflicts_with.length) parts.push(h("div", { class: "rmeta rstatus" }, "conflicts with ", links(st.conflicts_with)));
    const replaces = asList(rec.supersedes).filter((x) => byId.has(x));
    if (replaces.length) parts.push(h("div", { class: "rmeta rstatus" }, "replaces ", links(replaces)));
    return parts;
  }

  // each slot's values in time order (the chain GET /v1/history answers), with the records its
  // entries replaced that name no slot themselves
  function slotsPanel() {
    if (!d.slots.length) return null;
    return h("section", { class: "slots", "aria-labelledby": "slots-title" }, h("h3", { id: "slots-title" }, `Slot chains (${d.slots.length})`),
      d.slots.map((c) => {
        const inChain = new Set(c.entries.map((e) => e.record_id));
        const items = [];
        for (const e of c.entries) {
          for (const old of asList(byId.get(e.record_id)?.supersedes)) {
            if (inChain.has(old) || !byId.has(old)) continue;
            inChain.add(old);
            const so = statusOf(d, old);
            items.push(h("li", { class: "chain-entry" }, h("span", { class: `badge status-${so.status}` }, so.status), " ",
              h("span", { class: "muted" }, "replaced (names no slot): "), recordLink(old)));
          }
          items.push(h("li", { class: "chain-entry" }, `${day(e.valid_from) || "undated"} · `, h("strong", {}, e.value ?? "—"), " ",
            h("span", { class: `badge status-${e.status}` }, e.status), " ", recordLink(e.record_id),
            e.valid_until ? h("span", { class: "muted" }, ` · until ${day(e.valid_until)}`) : null));
        }
        return h("div", { class: "chain" }, h("p", { class: "slot-name" }, c.slot), h("ol", { class: "chain-list" }, items));
      }));
  }

  // -- header --------------------------------------------------------------------------------
  const c = d.counts;
  const header = h("section", { class: "panel head", "aria-labelledby": "conv-title" },
    h("h1", { id: "conv-title", tabindex: "-1" }, d.conversation_id),
    h("p", {}, `user ${d.user_id} · ${d.kind === "agent" ? "agent log" : d.kind} · ${d.sessions.length} session(s) · ${c.turns} turns · `,
      `${c.segments} segments (${c.failed_segments} failed) · ${c.records} records · ${c.nodes} nodes · built ${when(d.committed_at)} · `,
      `${d.backend || "?"} / ${d.model || "?"} · embedder ${d.embedder || "?"}`),
    c.open_turns || c.unsegmented_turns ? h("p", { class: "muted" }, `${c.open_turns} turn(s) in the open tail, ${c.unsegmented_turns} not segmented yet (searchable as raw turns)`) : null,
    h("p", {}, h("a", { href: href(["search"], { conversation: d.conversation_id }) }, "Search this conversation"), " · ",
      h("button", { type: "button", class: "danger", onclick: () => eraseDialog(d.conversation_id) }, "Erase…")),
    h("p", { id: "selection", class: "selection", role: "status" }, "Select a record to see the turns it came from."));

  // -- timeline ------------------------------------------------------------------------------
  const reasons = [...new Set(d.segments.map((x) => x.close_reason))];
  const sessionsRow = h("div", { class: "timeline", role: "group", "aria-label": "Sessions and segments" },
    d.sessions.map((ss) => {
      const segs = d.segments.map((x, i) => [x, i]).filter(([x]) => x.first_turn >= ss.first_turn && x.first_turn < ss.first_turn + ss.turns);
      return h("div", { class: "session", style: `flex-grow:${Math.max(1, ss.turns)}` },
        h("div", { class: "session-label" }, `${ss.session_id} · ${day(ss.started_at) || "undated"} · ${ss.turns} turns`),
        h("div", { class: "segments" }, segs.map(([x, i]) => h("button", {
          type: "button", class: `seg ${x.status === "failed" ? "seg-failed" : ""}`, style: `flex-grow:${Math.max(1, x.turns)};background:${colourOf(x.close_reason, reasons)}`,
          title: `segment ${x.index}: ${x.turns} turns, cut: ${x.close_reason}, ${x.num_records} records, ${x.num_tokens} tokens${x.error ? ", failed: " + x.error : ""}`,
          "aria-label": `segment ${x.index}, ${x.turns} turns, cut by ${x.close_reason}, ${x.num_records} records${x.status === "failed" ? ", failed" : ""}`,
          onclick: () => selectSegment(i),
        }))));
    }));
  const timeline = h("section", { class: "panel", "aria-labelledby": "tl-title" }, h("h2", { id: "tl-title" }, "Sessions and segments"),
    sessionsRow, legend(reasons.map((x) => [x, colourOf(x, reasons), d.segments.filter((y) => y.close_reason === x).length])));

  // -- records ---------------------------------------------------------------------------------
  const groups = new Map();
  for (const rec of d.records) { if (!groups.has(rec.type)) groups.set(rec.type, []); groups.get(rec.type).push(rec); }
  const order = [...groups.entries()].sort((a, b) => b[1].length - a[1].length);
  const recordsPanel = h("section", { class: "panel records", "aria-labelledby": "rec-title" },
    h("h2", { id: "rec-title" }, `Records (${d.records.length})`),
    order.length ? null : h("p", { class: "muted" }, "No records (failed or empty segments keep their raw turns searchable)."),
    order.map(([type, recs]) => h("section", { class: "rtype" }, h("h3", {}, `${type} (${recs.length})`),
      h("ul", { class: "rlist" }, recs.map((rec) => {
        const more = Object.keys(rec).filter((k) => !SHOWN.has(k) && rec[k] !== null && rec[k] !== undefined && !(Array.isArray(rec[k]) && !rec[k].length));
        const st = statusOf(d, rec.record_id);
        const badge = st.status !== "current" || rec.slot;
        const btn = h("button", { type: "button", class: "record", "aria-pressed": "false", dataset: { rid: rec.record_id },
          onclick: () => selectRecord(rec.record_id) },
          badge ? [h("span", { class: `badge status-${st.status}` }, st.status), " "] : null, rec.text);
        recordEls.set(rec.record_id, btn);
        return h("li", {}, btn,
          h("div", { class: "rmeta muted" },
            [recordTime(rec) ? `time ${recordTime(rec)}` : null, asList(rec.entities).length ? `entities ${asList(rec.entities).join(", ")}` : null,
              `turns ${asList(rec.source_turn_ids).join(", ") || "—"}`, rec.slot ? `slot ${rec.slot}` : null,
              rec.slot_value ? `value ${rec.slot_value}` : null, rec.valid_from ? `since ${day(rec.valid_from)}` : null]
              .filter(Boolean).join(" · ")),
          statusLine(rec, st),
          statementsLine(rec),
          more.length ? h("details", { class: "more" }, h("summary", {}, "more fields"), h("dl", { class: "pairs" }, more.map((k) => [h("dt", {}, k), h("dd", {}, fmtValue(rec[k]))]))) : null);
      })))),
    slotsPanel()
  );

  // -- transcript ----------------------------------------------------------------------------
  const frag = document.createDocumentFragment();
  const segStart = new Map(d.segments.map((x, i) => [x.first_turn, i]));
  let session = null;
  for (const t of d.turns) {
    if (t.session_id !== session) {
      session = t.session_id;
      const ss = d.sessions.find((x) => x.session_id === session);
      frag.append(h("h3", { class: "session-head" }, `Session ${session}`, ss && ss.started_at ? ` · ${when(ss.started_at)}` : ""));
    }
    if (segStart.has(t.position)) {
      const x = d.segments[segStart.get(t.position)];
      frag.append(h("div", { class: "segsep muted" }, `segment ${x.index} · cut: ${x.close_reason} · ${x.turns} turns · ${x.num_records} records`,
        x.status === "failed" ? h("span", { class: "badge bad" }, ` failed: ${x.error_kind || x.error || "?"}`) : null));
    }
    const el = turnView(t, d, d.system_prompt);
    const rids = recsOfTurn.get(t.turn_id) || [];
    if (rids.length) el.querySelector(".turn-head").append(" ", h("button", { type: "button", class: "link", onclick: () => selectTurn(t.turn_id) }, `${rids.length} record(s)`));
    turnEls.set(t.turn_id, el);
    frag.append(el);
  }
  const transcript = h("section", { class: "panel transcript", "aria-labelledby": "tr-title" },
    h("h2", { id: "tr-title" }, `Transcript (${d.turns.length} turns)`),
    d.system_prompt ? h("details", { class: "sysprompt", open: true }, h("summary", {}, `System prompt (turn ${d.system_prompt.turn_id}` +
      (d.system_prompt.repeats.length ? `; repeated as ${d.system_prompt.repeats.join(", ")}` : "") + ")"), h("pre", {}, d.system_prompt.content)) : null,
    frag);

  // -- other tables and tokens -----------------------------------------------------------------
  const extras = d.tables.map((tb) => h("details", { class: "panel" }, h("summary", {}, `${tb.name} (${tb.rows.length} rows)`),
    table(tb.columns, tb.rows.map((row) => tb.columns.map((k) => fmtValue(row[k]))))));
  const usage = Object.entries(d.usage);
  const tokens = h("section", { class: "panel" }, h("h2", {}, "Tokens by stage"),
    usage.length ? table(["stage", "calls", "prompt tokens", "completion tokens"], usage.map(([k, v]) => [k, v.calls, v.prompt_tokens, v.completion_tokens]))
      : h("p", { class: "muted" }, "No LLM calls were recorded for this conversation (the rules backend makes none)."),
    d.quality ? h("details", {}, h("summary", {}, "memory checks"), h("pre", {}, JSON.stringify(d.quality, null, 1))) : null);

  fill(main, header, timeline, h("div", { class: "cols" }, recordsPanel, transcript), ...extras, tokens,
    h("p", { class: "muted", id: "render-time" }, `server ${num(d.server_ms, 1)} ms · drawn in ${num(performance.now() - t0, 1)} ms`));
  main.dataset.rendered = String(Math.round(performance.now() - t0));
  const want = r.params.get("record"), turn = r.params.get("turn");
  const passage = r.params.get("passage");
  if (want) selectRecord(want); else if (passage && selectPassage(passage)) { /* selected */ } else if (turn && posOf.has(turn)) selectTurn(turn);
  else document.getElementById("conv-title").focus();
}

function eraseDialog(id) {
  const input = h("input", { id: "erase-confirm", autocomplete: "off", "aria-describedby": "erase-help" });
  const out = h("p", { role: "status" });
  const dlg = h("dialog", { class: "panel", "aria-labelledby": "erase-title" },
    h("h2", { id: "erase-title" }, "Erase this conversation"),
    h("p", { id: "erase-help" }, "This removes every trace of it from the store (rows, indexes, caches). Type its id to confirm: ", h("code", {}, id)),
    h("form", { method: "dialog", onsubmit: async (ev) => {
      ev.preventDefault();
      try {
        const rep = await api(conversationPath(id), { method: "DELETE", params: { confirm: input.value } });
        out.textContent = `Erased: ${rep.files_removed} file(s) removed, ${rep.files_rewritten} rewritten.`;
        setTimeout(() => { dlg.close(); dlg.remove(); location.hash = "#/"; location.reload(); }, 800);
      } catch (e) { out.textContent = String(e.message || e); }
    } }, h("label", { for: "erase-confirm" }, "Conversation id"), " ", input, " ",
      h("button", { type: "submit", class: "danger" }, "Erase"), " ",
      h("button", { type: "button", onclick: () => { dlg.close(); dlg.remove(); } }, "Cancel")), out);
  document.body.append(dlg);
  dlg.showModal();
  input.focus();
}
