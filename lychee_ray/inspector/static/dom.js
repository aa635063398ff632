// Small DOM helpers. Text always goes in as text nodes (never as HTML): stored turns and records
// are user data and may hold markup.

export function h(tag, props = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(props || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") el.className = v;
    else if (k === "dataset") Object.assign(el.dataset, v);
    else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "text") el.textContent = v;
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  append(el, children);
  return el;
}

export function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

// SVG elements (plots, the legend's swatches).
export function s(tag, attrs = {}, ...children) {
  const el = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs)) if (v !== undefined && v !== null) el.setAttribute(k, String(v));
  for (const c of children.flat(Infinity)) if (c !== undefined && c !== null) el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return el;
}

export function clear(el) { while (el.firstChild) el.removeChild(el.firstChild); return el; }

export function day(iso) { return iso ? String(iso).slice(0, 10) : ""; }

export function when(iso) { return iso ? String(iso).slice(0, 19).replace("T", " ") : "—"; }

export function num(x, digits = 3) {
  if (x === null || x === undefined) return "—";
  if (typeof x === "number" && !Number.isInteger(x)) return x.toFixed(digits);
  return String(x);
}

export function table(columns, rows, opts = {}) {
  const head = h("tr", {}, columns.map((c) => h("th", { scope: "col" }, c)));
  const body = rows.map((r) => h("tr", {}, r.map((v) => (v instanceof Node ? h("td", {}, v) : h("td", {}, v === null || v === undefined ? "—" : String(v))))));
  return h("table", { class: opts.class || "grid" }, opts.caption ? h("caption", {}, opts.caption) : null, h("thead", {}, head), h("tbody", {}, body));
}

export function pairs(obj, keys) {
  const ks = keys || Object.keys(obj || {});
  return h("dl", { class: "pairs" }, ks.filter((k) => obj && obj[k] !== undefined).map((k) => [h("dt", {}, k.replaceAll("_", " ")), h("dd", {}, fmtValue(obj[k]))]));
}

export function fmtValue(v) {
  if (v === null || v === undefined) return "—";
  if (Array.isArray(v)) return v.length ? v.map(fmtValue).join(", ") : "—";
  if (typeof v === "object") return Object.entries(v).map(([k, x]) => `${k} ${fmtValue(x)}`).join("; ") || "—";
  if (typeof v === "number" && !Number.isInteger(v)) return v.toFixed(3);
  return String(v);
}

// The hash route's parts: "#/c/ID?turn=x" -> {path: ["c", "ID"], params: URLSearchParams}.
export function route() {
  const raw = location.hash.replace(/^#/, "") || "/";
  const i = raw.indexOf("?");  // the first "?" starts the parameters (a question may hold more)
  const p = i < 0 ? raw : raw.slice(0, i), q = i < 0 ? "" : raw.slice(i + 1);
  return { path: p.split("/").filter(Boolean).map(decodeURIComponent), params: new URLSearchParams(q) };
}

export function href(path, params) {
  const p = "#/" + path.map(encodeURIComponent).join("/");
  const q = params ? new URLSearchParams(Object.entries(params).filter(([, v]) => v !== null && v !== undefined && v !== "")).toString() : "";
  return q ? `${p}?${q}` : p;
}

// Replace an element's content (arrays flattened, null and false skipped: unlike Node.append).
export function fill(el, ...children) { clear(el); return append(el, children); }
