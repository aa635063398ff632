// Reports: the build (quality figures, the token ledger, plots of segments) and the eval runs.
import { api } from "./api.js";
import { fill, h, fmtValue, href, num, pairs, table } from "./dom.js";
import { barChart } from "./plots.js";

// The figures of a run's systems shown side by side (the rest are in each run's details).
const HEADLINE = ["questions", "recall", "any", "all", "content_recall_50", "content_recall_80", "answer_in_context", "context_tokens",
  "query_prompt_tokens", "judge_accuracy", "evidence_recall", "f1", "bleu1", "query_tokens_per_question"];

function runSummary(run) {
  const keys = HEADLINE.filter((k) => run.systems.some((sname) => run.summary[sname] && run.summary[sname][k] !== undefined));
  return table(["system", ...keys.map((k) => k.replaceAll("_", " "))],
    run.systems.map((sname) => [sname, ...keys.map((k) => num((run.summary[sname] || {})[k]))]), { class: "grid small" });
}

function categoryChart(run) {
  const sname = run.systems[0];
  const per = (run.summary[sname] || {}).per_category;
  if (!per || typeof per !== "object") return null;
  const cats = Object.keys(per);
  const metric = ["recall", "evidence_recall", "judge_accuracy"].find((m) => cats.some((c) => per[c] && typeof per[c][m] === "number"));
  if (!metric) return null;
  return barChart({ label: `${sname}: ${metric.replaceAll("_", " ")} by category (×100)`, bins: cats,
    counts: cats.map((c) => Math.round(100 * ((per[c] || {})[metric] || 0))) });
}

export async function reportsPage(main, r, state) {
  document.title = "Reports · lychee-ray inspector";
  const [rep, runs] = await Promise.all([api("report"), api("runs")]);
  const q = rep.quality || {};
  const build = h("section", { class: "panel", "aria-labelledby": "build-title" },
    h("h1", { id: "build-title" }, "Build report"),
    state.store.admin ? h("p", { class: "muted" }, `store ${state.store.root} · models ${fmtValue(state.store.models)}`) : null,
    h("h2", {}, "Memory quality"),
    rep.quality ? pairs({ drafted_records: q.drafts, records: q.records, records_per_segment: q.records_per_segment, rejected: q.rejected_total,
      rejected_share: q.rejected_share, rejected_by_reason: q.rejected, repaired_by_code: q.repaired, segments_encoded: q.segments_encoded,
      segments_repaired: q.segments_repaired, segments_degenerate: q.segments_degenerate })
      : h("p", { class: "muted" }, "The store-wide figures are shown to admin keys."),
    h("h2", {}, "Token ledger"),
    Object.keys(rep.tokens || {}).length ? pairs(rep.tokens) : h("p", { class: "muted" }, "No LLM tokens recorded (the rules backend calls no LLM)."),
    rep.last_run ? h("details", {}, h("summary", {}, "last build run"), pairs(rep.last_run, ["inputs", "built", "skipped", "failed", "appended",
      "llm_calls", "prompt_tokens", "completion_tokens", "records", "failed_segments", "wall_s"])) : null,
    h("h2", {}, "Segments"),
    h("p", { class: "muted" }, `from ${rep.conversations_read} of ${rep.conversations_total} conversation(s)`),
    h("div", { class: "plots" }, rep.plots.map((p) => barChart(p))));
  const evals = h("section", { class: "panel", "aria-labelledby": "eval-title" }, h("h1", { id: "eval-title" }, "Eval runs"),
    runs.length ? runs.map((run) => h("article", { class: "run" },
      h("h2", {}, run.name, h("span", { class: "muted" }, ` · ${run.kind} · ${run.questions} question(s) · ${run.path}`)),
      runSummary(run), categoryChart(run),
      run.has_questions ? h("p", {}, h("a", { href: href(["eval", run.name]), class: "run-link" }, "Questions: gold turns vs selected evidence, hit or miss"))
        : h("p", { class: "muted" }, "No per-question rows (eval-retrieval: run it with --per-question --out).")))
      : h("p", { class: "muted" }, state.store.admin ? "No eval run given (lychee-ray inspect --eval RUN)." : "Eval runs are shown to admin keys."));
  fill(main, build, evals);
}
