// The inspector's shell: the store line, the key form, and the hash router that draws each page.
import { api, ApiError, key, setKey } from "./api.js";
import { fill, h, route } from "./dom.js";
import { listPage } from "./list.js";
import { conversationPage } from "./conversation.js";
import { searchPage } from "./search.js";
import { reportsPage } from "./reports.js";
import { evalPage } from "./evalrun.js";

const main = document.getElementById("main");
export const state = { store: null };

const PAGES = {
  "": listPage,
  c: conversationPage,
  search: searchPage,
  reports: reportsPage,
  eval: evalPage,
};

function keyForm(message) {
  const input = h("input", { type: "password", id: "key", name: "key", autocomplete: "off", required: true, "aria-describedby": "key-help" });
  const form = h("form", { class: "panel keyform", "aria-labelledby": "key-title", onsubmit: (ev) => {
    ev.preventDefault();
    setKey(input.value.trim());
    render();
  } },
  h("h1", { id: "key-title" }, "A key is needed"),
  h("p", { id: "key-help" }, message || "This service asks for a bearer key (the same key as its /v1 API). It stays in this tab only."),
  h("label", { for: "key" }, "Bearer key"), " ", input, " ", h("button", { type: "submit" }, "Open"));
  fill(main, form);
  input.focus();
}

export function showError(e) {
  const msg = e instanceof ApiError ? `${e.status === 404 ? "Not found" : "Error " + e.status}: ${e.message}` : String(e);
  fill(main, h("div", { class: "panel error", role: "alert" }, h("h1", {}, "Nothing to show"), h("p", {}, msg),
    h("p", {}, h("a", { href: "#/" }, "Back to the conversations"))));
}

async function loadStore() {
  state.store = await api("store");
  const s = state.store;
  const line = `${s.conversations} conversation(s)` + (s.failed_builds ? `, ${s.failed_builds} failed to build` : "") +
    ` · ${s.users} user(s) · backend ${s.backend || "?"}` + (s.written_at ? ` · built ${String(s.written_at).slice(0, 16).replace("T", " ")}` : "");
  document.getElementById("store").textContent = line;
  document.getElementById("signout").hidden = !key();
}

function markNav(page) {
  for (const a of document.querySelectorAll("nav a")) {
    if (a.dataset.page === page) a.setAttribute("aria-current", "page"); else a.removeAttribute("aria-current");
  }
}

export async function render() {
  const r = route();
  const name = r.path[0] || "";
  const page = PAGES[name] || PAGES[""];
  markNav(name === "" || name === "c" ? "list" : name === "eval" ? "reports" : name);
  try {
    if (!state.store) await loadStore();
    await page(main, r, state);
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) {
      state.store = null;
      keyForm(key() ? "That key was refused. Give another one." : undefined);
      return;
    }
    showError(e);
  }
}

document.getElementById("signout").addEventListener("click", () => { setKey(null); state.store = null; location.hash = "#/"; render(); });
window.addEventListener("hashchange", render);
render();
