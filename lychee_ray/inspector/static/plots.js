// Plots drawn here as inline SVG (no library, nothing fetched): bar charts of counts, and the
// colours of categories (cut reasons) with their legend.
import { h, s } from "./dom.js";

// Categorical fills (after Okabe–Ito, darkened where needed): every one is at least 3:1
// against the white page, as graphics need.
const PALETTE = ["#0072B2", "#C24E00", "#007A5A", "#A8457F", "#8A6D00", "#3B6EA8", "#5F5F5F", "#7A3FA0"];

export function colourOf(value, values) {
  const i = values.indexOf(value);
  return PALETTE[(i < 0 ? 0 : i) % PALETTE.length];
}

export function legend(items) {
  return h("ul", { class: "legend", "aria-label": "Legend" }, items.map(([label, colour, n]) =>
    h("li", {}, h("span", { class: "swatch", style: `background:${colour}`, "aria-hidden": "true" }), ` ${label}`, n !== undefined ? ` (${n})` : "")));
}

// A bar chart of one histogram ({label, bins, counts}); the numbers are also in a table for
// screen readers and for copying.
export function barChart(hist, { width = 520, height = 180, colour = PALETTE[0] } = {}) {
  const n = hist.bins.length;
  const max = Math.max(1, ...hist.counts);
  const left = 36, bottom = 34, top = 10;
  const plotW = width - left - 8, plotH = height - top - bottom;
  const bw = n ? plotW / n : plotW;
  const svg = s("svg", { viewBox: `0 0 ${width} ${height}`, width, height, role: "img", "aria-label": `${hist.label}: bar chart` },
    s("title", {}, hist.label),
    s("line", { x1: left, y1: top + plotH, x2: left + plotW, y2: top + plotH, stroke: "#1b1f24" }),
    s("text", { x: 2, y: top + 8, "font-size": 11, fill: "#1b1f24" }, String(max)),
    s("text", { x: 2, y: top + plotH, "font-size": 11, fill: "#1b1f24" }, "0"),
    hist.counts.map((c, i) => {
      const bh = (c / max) * plotH;
      const x = left + i * bw;
      return s("rect", { x: x + 1, y: top + plotH - bh, width: Math.max(1, bw - 2), height: bh, fill: colour },
        s("title", {}, `${hist.bins[i]}: ${c}`));
    }),
    hist.bins.map((b, i) => (n <= 24 || i % Math.ceil(n / 24) === 0)
      ? s("text", { x: left + i * bw + bw / 2, y: top + plotH + 14, "font-size": 10, "text-anchor": "middle", fill: "#1b1f24" }, String(b).slice(0, 14)) : null));
  return h("figure", { class: "plot" }, svg, h("figcaption", {}, hist.label),
    h("details", {}, h("summary", {}, "numbers"), h("table", { class: "grid small" },
      h("tbody", {}, hist.bins.map((b, i) => h("tr", {}, h("th", { scope: "row" }, String(b)), h("td", {}, String(hist.counts[i]))))))));
}
