// The pages' JSON endpoints (relative to the page: /ui/api/... under lychee-ray serve or inspect).
// A bearer key, when the service asks for one, is kept for this browser tab only (sessionStorage).

const KEY = "lychee-inspector-key";

export class ApiError extends Error {
  constructor(status, code, message) { super(message); this.status = status; this.code = code; }
}

export function key() { return sessionStorage.getItem(KEY); }
export function setKey(k) { if (k) sessionStorage.setItem(KEY, k); else sessionStorage.removeItem(KEY); }

export async function api(path, { method = "GET", body, params } = {}) {
  const url = new URL("api/" + path, document.baseURI);
  for (const [k, v] of Object.entries(params || {})) if (v !== null && v !== undefined && v !== "") url.searchParams.set(k, v);
  const headers = { Accept: "application/json" };
  if (key()) headers.Authorization = "Bearer " + key();
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const res = await fetch(url, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = null; }
  if (!res.ok) {
    let msg = data && (typeof data.detail === "string" ? data.detail : JSON.stringify(data.detail)) || text || res.statusText;
    if (Array.isArray(data && data.detail)) msg = data.detail.map((d) => `${(d.loc || []).slice(1).join(".")}: ${d.msg}`).join("; ");
    throw new ApiError(res.status, data && data.error, msg);
  }
  return data;
}

export function conversationPath(id) { return "conversations/" + id.split("/").map(encodeURIComponent).join("/"); }
