// The hookd console: one page, hash routes, plain DOM. Every number it shows comes from the admin
// API; it keeps nothing but the language choice. Text from the API is always set as textContent.
"use strict";
(function () {
  const I18N = window.HOOKD_I18N;
  let lang = localStorage.getItem("hookd.lang") || ((navigator.language || "en").toLowerCase().startsWith("zh") ? "zh" : "en");
  const t = (k) => (I18N[lang] && I18N[lang][k]) || I18N.en[k] || k;
  let me = null; // the session's identity: {role, subject, reviews, csrfToken, expiresAt}
  let cleanups = []; // what the current page must stop when the route changes (timers, streams)

  const HOOK_TYPES = ["user_message", "pre_tool_use", "post_tool_use", "post_llm_call", "session_start",
    "agent_completion", "pre_scheduled_task", "post_scheduled_task"];
  const INTERCEPTIVE = ["user_message", "pre_tool_use", "pre_scheduled_task"];

  // ---- DOM ----
  function el(tag, attrs, ...kids) {
    const n = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k.startsWith("on")) n.addEventListener(k.slice(2), v);
      else if (k === "text") n.textContent = v;
      else if (k === "value") n.value = v;
      else n.setAttribute(k, v === true ? "" : v);
    }
    for (const c of kids.flat()) if (c !== null && c !== undefined && c !== false) n.append(c instanceof Node ? c : String(c));
    return n;
  }
  const main = () => document.getElementById("main");
  function toast(msg, error, ms) {
    const d = el("div", { class: error ? "error" : "", text: msg });
    document.getElementById("toast").append(d);
    setTimeout(() => d.remove(), ms || 5000);
  }
  function badge(v) { return el("span", { class: "badge " + String(v || "").toLowerCase(), text: v === undefined || v === null ? "" : String(v) }); }
  // A time in the viewer's zone, with the UTC time on hover.
  function when(iso) {
    if (!iso) return el("span", { class: "muted", text: "—" });
    const d = new Date(iso);
    if (isNaN(d)) return el("span", { text: iso });
    return el("time", { datetime: d.toISOString(), title: d.toISOString().replace(".000Z", "Z") + " UTC", text: d.toLocaleString(lang === "zh" ? "zh-CN" : undefined) });
  }
  function table(cols, rows, onRow) {
    const body = el("tbody");
    for (const r of rows) {
      const tr = el("tr", onRow ? { tabindex: "0" } : {}, cols.map((c) => el("td", { class: c.wrap ? "wrap" : "" }, c.cell(r))));
      if (onRow) {
        tr.addEventListener("click", () => onRow(r));
        tr.addEventListener("keydown", (e) => { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); onRow(r); } });
      }
      body.append(tr);
    }
    if (!rows.length) body.append(el("tr", {}, el("td", { colspan: cols.length, class: "muted", text: t("none") })));
    return el("div", { class: "tablewrap" }, el("table", {}, el("thead", {}, el("tr", {}, cols.map((c) => el("th", { scope: "col", text: c.title })))), body));
  }
  const json = (v) => el("pre", { text: JSON.stringify(v, null, 2) });
  const items = (d) => (Array.isArray(d) ? d : (d && d.items) || []);

  // ---- the admin API ----
  class APIError extends Error {
    constructor(status, message) {
      super(message);
      this.status = status;
      // "dispatchConfig.url: …" names the field the error is about.
      const m = /^([A-Za-z_][\w.\[\]]*): /.exec(message || "");
      this.field = m ? m[1] : "";
    }
  }
  async function api(method, path, body) {
    const opts = { method, credentials: "same-origin", headers: {} };
    if (method !== "GET") {
      opts.headers["Content-Type"] = "application/json";
      if (me) opts.headers["X-CSRF-Token"] = me.csrfToken;
      if (body !== undefined) opts.body = JSON.stringify(body);
    }
    const res = await fetch(path, opts);
    let w = null;
    try { w = await res.json(); } catch (_) { /* an empty or non-JSON answer */ }
    if (res.status === 401 && !path.startsWith("/console/session")) { me = null; route(); }
    if (!res.ok) throw new APIError(res.status, (w && w.message) || res.statusText);
    // What the daemon notes of a request ("success; note: …": valid, but likely not what was
    // meant, such as a glob-like toolNameMatch) is shown long enough to read, never dropped.
    for (const n of ((w && w.message) || "").split("; note: ").slice(1)) toast(t("note") + ": " + n, false, 15000);
    return w ? w.data : null;
  }
  function query(params) {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(params)) if (v !== "" && v !== undefined && v !== null) q.set(k, v);
    const s = q.toString();
    return s ? "?" + s : "";
  }
  // A live stream of the admin API (cookie-authenticated EventSource), closed when the page changes.
  function follow(path, onEvent) {
    const es = new EventSource(path);
    es.onmessage = (e) => onEvent(e);
    for (const name of ["decision", "approvals"]) es.addEventListener(name, (e) => onEvent(e));
    // The daemon ends a stream when its session ends (expiry, sign-out elsewhere); the reconnect is
    // refused, and the page goes back to the sign-in.
    es.onerror = () => {
      if (es.readyState !== EventSource.CLOSED) return;
      api("GET", "/console/session").then((id) => { if (!id || !id.signedIn) { me = null; route(); } }, () => {});
    };
    cleanups.push(() => es.close());
    return es;
  }
  function every(ms, fn) { const h = setInterval(fn, ms); cleanups.push(() => clearInterval(h)); }

  // ---- forms: errors at their field ----
  function field(label, path, input, opts) {
    input.setAttribute("data-field", path);
    input.id = input.id || "f-" + path.replace(/[^\w]/g, "-");
    return el("label", { class: (opts && opts.wide) ? "wide" : "", for: input.id }, label, input,
      el("span", { class: "field-error", id: input.id + "-err", "data-error-for": path }));
  }
  function clearErrors(form) {
    form.querySelectorAll("[aria-invalid]").forEach((n) => n.removeAttribute("aria-invalid"));
    form.querySelectorAll(".field-error").forEach((n) => (n.textContent = ""));
  }
  // showError puts an API error at the field it names, or at the top of the form.
  function showError(form, err) {
    clearErrors(form);
    // The visible input of that field (the policy and webhook parts each have a failureMode).
    const input = err.field && [...form.querySelectorAll(`[data-field="${CSS.escape(err.field)}"]`)].find((n) => n.offsetParent !== null);
    if (input) {
      input.setAttribute("aria-invalid", "true");
      input.setAttribute("aria-describedby", input.id + "-err");
      input.parentElement.querySelector(".field-error").textContent = err.message;
      input.focus();
    } else {
      form.querySelector(".form-error").textContent = err.message;
    }
  }
  function select(options, value) {
    return el("select", {}, options.map((o) => {
      const [v, label] = Array.isArray(o) ? o : [o, o];
      return el("option", { value: v, selected: String(v) === String(value) }, label);
    }));
  }

  // ---- routes ----
  const PAGES = { overview, hooks, decisions, deliveries, breakers, approvals, tasks };
  function route() {
    cleanups.forEach((f) => f());
    cleanups = [];
    renderChrome();
    if (!me) return signIn();
    let name = (location.hash.replace(/^#\/?/, "").split("/")[0]) || (me.role === "reviewer" ? "approvals" : "overview");
    if (me.role === "reviewer") name = "approvals";
    if (!PAGES[name]) name = "overview";
    document.querySelectorAll("#nav a").forEach((a) => { if (a.dataset.page === name) a.setAttribute("aria-current", "page"); else a.removeAttribute("aria-current"); });
    main().replaceChildren(el("p", { class: "muted", text: t("loading") }));
    PAGES[name]().catch((e) => { if (e.status !== 401) main().replaceChildren(el("p", { class: "field-error", text: e.message })); });
  }
  function renderChrome() {
    document.documentElement.lang = lang === "zh" ? "zh-CN" : "en";
    document.getElementById("skip").textContent = t("skip");
    document.getElementById("lang").textContent = t("lang");
    const so = document.getElementById("signout");
    so.hidden = !me;
    so.textContent = t("signOut") + (me ? " (" + me.subject + ")" : "");
    const pages = me ? (me.role === "reviewer" ? ["approvals"] : Object.keys(PAGES)) : [];
    document.getElementById("nav").replaceChildren(...pages.map((p) => el("a", { href: "#/" + p, "data-page": p, text: t(p) })));
  }

  async function signIn() {
    const cred = el("input", { type: "password", autocomplete: "current-password", name: "credential" });
    const form = el("form", { class: "card signin" },
      el("h1", { text: "hookd · " + t("signIn") }),
      el("div", { class: "form" }, field(t("credential"), "credential", cred, { wide: true })),
      el("p", { class: "muted", text: t("credentialHelp") }),
      el("p", { class: "field-error form-error" }),
      el("button", { class: "primary", type: "submit", text: t("signIn") }));
    form.addEventListener("submit", async (e) => {
      e.preventDefault();
      try {
        me = await api("POST", "/console/session", { credential: cred.value });
        route();
      } catch (err) { showError(form, err); }
    });
    main().replaceChildren(form);
    cred.focus();
  }

  // ---- Overview ----
  async function overview() {
    const draw = async () => {
      const s = await api("GET", "/api/stats/overview");
      const total = s.decisions.total || 0;
      const pct = (n) => (total ? Math.round((1000 * n) / total) / 10 + " %" : "—");
      const stat = (n, l, href) => el(href ? "a" : "div", { class: "card stat", href }, el("div", { class: "n", text: n }), el("div", { class: "l", text: l }));
      main().replaceChildren(
        el("h1", { text: t("overview") }),
        el("div", { class: "grid" },
          stat(total, t("decisionsHour"), "#/decisions"),
          stat(pct(s.decisions.deny), t("denyRate")),
          stat(pct(s.decisions.fromFailureMode), t("fmRate")),
          stat(s.deliveries.pending || 0, t("pending"), "#/deliveries"),
          stat(s.deliveries.paused || 0, t("paused"), "#/deliveries"),
          stat(s.deliveries.dead || 0, t("dead"), "#/deliveries"),
          stat(s.openBreakers, t("openBreakers"), "#/breakers"),
          stat(s.pendingApprovals, t("pendingApprovals"), "#/approvals")),
        el("div", { class: "card" }, el("h2", { text: t("lastHour") }), chart(s.perMinute)));
    };
    await draw();
    every(10000, () => draw().catch(() => {}));
  }
  const SERIES = ["allow", "deny", "modify", "ask"];
  // chart draws stacked bars, one per minute (failureMode as a thin line on top of its minute).
  function chart(perMinute) {
    const ns = "http://www.w3.org/2000/svg";
    const svg = document.createElementNS(ns, "svg");
    svg.setAttribute("class", "chart");
    svg.setAttribute("viewBox", "0 0 600 140");
    svg.setAttribute("preserveAspectRatio", "none");
    svg.setAttribute("role", "img");
    const max = Math.max(1, ...perMinute.map((m) => m.allow + m.deny + m.modify + m.ask));
    const w = 600 / Math.max(perMinute.length, 1);
    perMinute.forEach((m, i) => {
      let y = 140;
      for (const k of SERIES) {
        const h = (130 * m[k]) / max;
        if (!h) continue;
        const r = document.createElementNS(ns, "rect");
        r.setAttribute("x", i * w + 0.5); r.setAttribute("width", Math.max(w - 1, 1));
        r.setAttribute("y", y - h); r.setAttribute("height", h); r.setAttribute("class", "bar-" + k);
        const tip = document.createElementNS(ns, "title");
        tip.textContent = new Date(m.minute).toLocaleTimeString() + " " + k + ": " + m[k];
        r.append(tip);
        svg.append(r);
        y -= h;
      }
    });
    const legend = el("div", { class: "legend" }, SERIES.map((k) => el("span", {}, el("i", { class: "bar-" + k }), k)));
    return el("div", {}, svg, legend);
  }

  // ---- Hooks ----
  async function hooks() {
    const [, , id] = location.hash.split("/");
    if (id === "new") return hookForm(null);
    if (id) return hookForm(await api("GET", "/api/hooks/" + encodeURIComponent(id)));
    const f = { hookType: el("select", {}, el("option", { value: "", text: t("any") }), HOOK_TYPES.map((h) => el("option", { value: h, text: h }))),
      enabled: select([["", t("any")], ["true", t("enabled")], ["false", t("disabled")]], ""), agentId: el("input", { inputmode: "numeric", size: 8 }) };
    const list = el("div");
    let cursor = "";
    const load = async () => {
      const page = await api("GET", "/api/hooks" + query({ hookType: f.hookType.value, enabled: f.enabled.value, agentId: f.agentId.value, cursor }));
      list.replaceChildren(table([
        { title: t("id"), cell: (h) => String(h.id) },
        { title: t("hookName"), cell: (h) => el("a", { href: "#/hooks/" + h.id, text: h.hookName }) },
        { title: t("hookType"), cell: (h) => h.hookType },
        { title: t("toolNameMatch"), cell: (h) => h.toolNameMatch || "*" },
        { title: t("dispatchType"), cell: (h) => h.dispatchType },
        { title: t("priority"), cell: (h) => String(h.priority) },
        { title: t("state"), cell: (h) => el("span", {}, badge(h.enabled === false ? "disabled" : "enabled"), h.secretUnreadable ? badge("secretUnreadable") : "") },
        { title: "", cell: (h) => el("button", { type: "button", onclick: () => toggle(h).then(load), text: h.enabled === false ? t("enable") : t("disable") }) },
      ], items(page)), pager(page, (c) => { cursor = c; load(); }));
    };
    const bar = el("form", { class: "filters" },
      el("label", {}, t("hookType"), f.hookType), el("label", {}, t("state"), f.enabled), el("label", {}, t("agentId"), f.agentId),
      el("button", { type: "submit", text: t("filter") }), el("a", { href: "#/hooks/new", class: "button primary", id: "new-hook", text: t("newHook") }));
    bar.addEventListener("submit", (e) => { e.preventDefault(); cursor = ""; load().catch((err) => toast(err.message, true)); });
    main().replaceChildren(el("h1", { text: t("hooks") }), bar, list);
    await load();
  }
  function pager(page, go) {
    const p = el("div", { class: "pager" });
    if (page && page.next) p.append(el("button", { type: "button", onclick: () => go(page.next), text: t("next") }));
    return p;
  }
  async function toggle(h) {
    const full = await api("GET", "/api/hooks/" + h.id);
    full.enabled = full.enabled === false;
    await api("PUT", "/api/hooks/" + h.id, strip(full));
    toast(full.enabled ? t("enabled") : t("disabled"));
  }
  // strip leaves out what GET shows but a client does not send back (server-kept fields).
  function strip(h) {
    const o = Object.assign({}, h);
    for (const k of ["id", "createdAt", "updatedAt", "secretUnreadable"]) delete o[k];
    return o;
  }

  function hookForm(h) {
    const dc = (h && h.dispatchConfig) || {};
    const pc = (h && h.policyConfig) || { rules: [], default: "allow" };
    const inp = (v, attrs) => el("input", Object.assign({ value: v === undefined || v === null ? "" : String(v) }, attrs || {}));
    const F = {
      hookName: inp(h && h.hookName, { required: true }),
      hookType: select(HOOK_TYPES, h ? h.hookType : "pre_tool_use"),
      agentId: inp(h && h.agentId, { inputmode: "numeric" }),
      toolNameMatch: inp(h && h.toolNameMatch),
      priority: inp(h ? h.priority : 0, { inputmode: "numeric" }),
      enabled: select([["true", t("enabled")], ["false", t("disabled")]], h ? String(h.enabled !== false) : "true"),
      dispatchType: select(["webhook", "policy"], (h && h.dispatchType) || "webhook"),
      url: inp(dc.url, { type: "url", size: 40 }),
      timeoutMs: inp(dc.timeoutMs, { inputmode: "numeric" }),
      maxRetries: inp(dc.maxRetries, { inputmode: "numeric" }),
      failureMode: select([["", "—"], "ALLOW", "DENY"], dc.failureMode || ""),
      signatureScheme: select([["", "hookd"], "standard"], dc.signatureScheme || ""),
      signingSecret: inp(dc.signingSecret, { autocomplete: "off" }),
      policyDefault: select(["allow", "deny", "ask"], pc.default || "allow"),
    };
    const rules = el("div", { class: "rules" });
    const addRule = (r) => {
      const i = rules.children.length;
      const p = (k) => `policyConfig.rules[${i}].${k}`;
      const row = el("div", { class: "rule" },
        field(t("ruleName"), p("name"), inp(r.name)), field(t("when"), p("when"), inp(r.when)),
        field(t("decision"), p("decision"), select(["allow", "deny", "modify", "ask"], r.decision || "deny")),
        field(t("reason"), p("reason"), inp(r.reason)), field(t("modifiedValue"), p("modifiedValue"), inp(r.modifiedValue)),
        el("button", { type: "button", class: "danger", "aria-label": t("del"), onclick: () => row.remove(), text: "×" }));
      rules.append(row);
    };
    (pc.rules || []).forEach(addRule);
    const sample = el("textarea", { rows: 6, "data-field": "event" }, JSON.stringify({ hookType: "pre_tool_use", context: { toolName: "transferFunds", arguments: { amount: 20000 } } }, null, 2));
    const evalOut = el("div");
    const webhookBox = el("div", { class: "form wide" },
      field(t("url"), "dispatchConfig.url", F.url), field(t("timeoutMs"), "dispatchConfig.timeoutMs", F.timeoutMs),
      field(t("maxRetries"), "dispatchConfig.maxRetries", F.maxRetries), field(t("failureMode"), "dispatchConfig.failureMode", F.failureMode),
      field(t("signatureScheme"), "dispatchConfig.signatureScheme", F.signatureScheme), field(t("signingSecret"), "dispatchConfig.signingSecret", F.signingSecret));
    const policyBox = el("div", { class: "wide card" }, el("h2", { text: t("rules") }), rules,
      el("button", { type: "button", onclick: () => addRule({}), text: t("addRule") }),
      el("div", { class: "form" }, field(t("defaultDecision"), "policyConfig.default", F.policyDefault), field(t("failureMode"), "dispatchConfig.failureMode", Object.assign(select([["", "—"], "ALLOW", "DENY"], dc.failureMode || ""), { id: "f-policy-failureMode" }))),
      el("h2", { text: t("sampleEvent") }), sample,
      el("div", { class: "row" }, el("button", { type: "button", onclick: () => evaluate(), text: t("evaluate") })), evalOut);
    const syncKind = () => { const p = F.dispatchType.value === "policy"; webhookBox.hidden = p; policyBox.hidden = !p; };
    F.dispatchType.addEventListener("change", syncKind);
    const num = (v) => (v === "" ? undefined : Number(v));
    // A PUT replaces the whole hook: what the form does not edit (managedBy, policyConfig.costLimit,
    // the webhook's auth, …) is sent back as GET showed it, and a field the form left empty is
    // left out (its default), as it is on a new hook.
    const body = () => {
      const b = h ? strip(JSON.parse(JSON.stringify(h))) : {};
      const set = (o, k, v) => { if (v === "" || v === undefined) delete o[k]; else o[k] = v; };
      Object.assign(b, { hookName: F.hookName.value, hookType: F.hookType.value, priority: num(F.priority.value) || 0,
        enabled: F.enabled.value === "true", dispatchType: F.dispatchType.value });
      set(b, "agentId", num(F.agentId.value));
      set(b, "toolNameMatch", F.toolNameMatch.value);
      const same = h && (h.dispatchType || "webhook") === b.dispatchType; // what was stored is of this kind
      if (b.dispatchType === "policy") {
        const fm = policyBox.querySelector('[data-field="dispatchConfig.failureMode"]').value;
        delete b.dispatchConfig;
        if (fm) b.dispatchConfig = { failureMode: fm };
        b.policyConfig = Object.assign({}, same ? b.policyConfig : undefined, { rules: [...rules.children].map((row) => {
          const v = (k) => row.querySelector(`[data-field$=".${k}"]`).value;
          const r = { name: v("name"), when: v("when"), decision: v("decision") };
          if (v("reason")) r.reason = v("reason");
          if (v("modifiedValue")) r.modifiedValue = v("modifiedValue");
          return r;
        }), default: F.policyDefault.value });
      } else {
        const d = same ? Object.assign({}, dc) : {}; // dc.auth as GET shows it: the stored credential stays
        d.url = F.url.value;
        set(d, "timeoutMs", num(F.timeoutMs.value));
        set(d, "maxRetries", num(F.maxRetries.value));
        set(d, "failureMode", F.failureMode.value);
        set(d, "signatureScheme", F.signatureScheme.value);
        set(d, "signingSecret", F.signingSecret.value);
        delete b.policyConfig;
        b.dispatchConfig = d;
      }
      return b;
    };
    const form = el("form", { class: "card", novalidate: true },
      el("h1", { text: h ? t("edit") + " · " + h.hookName : t("newHook") }),
      el("p", { class: "field-error form-error" }),
      el("div", { class: "form" },
        field(t("hookName"), "hookName", F.hookName), field(t("hookType"), "hookType", F.hookType),
        field(t("toolNameMatch"), "toolNameMatch", F.toolNameMatch), field(t("agentId"), "agentId", F.agentId),
        field(t("priority"), "priority", F.priority), field(t("state"), "enabled", F.enabled),
        field(t("dispatchType"), "dispatchType", F.dispatchType), webhookBox, policyBox),
      el("div", { class: "row" }, el("button", { class: "primary", type: "submit", text: t("save") }),
        el("a", { href: "#/hooks" }, t("cancel")),
        h ? el("button", { type: "button", onclick: () => probe(), text: t("test") }) : null,
        h ? el("button", { type: "button", class: "danger", onclick: () => remove(), text: t("del") }) : null));
    const out = el("div");
    form.addEventListener("submit", async (e) => {
      e.preventDefault();
      clearErrors(form);
      try {
        if (h) await api("PUT", "/api/hooks/" + h.id, body());
        else await api("POST", "/api/hooks", body());
        toast(h ? t("saved") : t("created"));
        location.hash = "#/hooks";
      } catch (err) { showError(form, err); }
    });
    async function evaluate() {
      clearErrors(form);
      let event;
      try { event = JSON.parse(sample.value); } catch (err) { return showError(form, new APIError(400, "event: " + err.message)); }
      const b = body(), req = { policyConfig: b.policyConfig, event };
      if (b.dispatchConfig && b.dispatchConfig.failureMode) req.failureMode = b.dispatchConfig.failureMode;
      try { evalOut.replaceChildren(el("h2", { text: t("result") }), json(await api("POST", "/api/policies/evaluate", req))); }
      catch (err) { showError(form, err); }
    }
    async function probe() {
      try {
        const r = await api("POST", "/api/hooks/" + h.id + "/test", {});
        const { request, response, ...verdict } = r;
        out.replaceChildren(el("div", { class: "card", id: "probe" }, el("h2", { text: t("test") }), json(verdict),
          request ? el("div", {}, el("h2", { text: t("request") }), el("p", { class: "muted", text: "POST " + request.url }),
            json(request.headers), el("pre", { text: request.body })) : "",
          response ? el("div", {}, el("h2", { text: t("answer") + " · " + response.statusCode }), json(response.headers),
            el("pre", { text: response.body })) : ""));
      } catch (err) { toast(err.message, true); }
    }
    async function remove() {
      try { await api("DELETE", "/api/hooks/" + h.id); location.hash = "#/hooks"; } catch (err) { toast(err.message, true); }
    }
    syncKind();
    main().replaceChildren(form, out);
    F.hookName.focus();
    return Promise.resolve();
  }

  // ---- Decisions ----
  async function decisions() {
    const inp = (attrs) => el("input", attrs || {});
    const f = { hookType: select([["", t("any")], ...INTERCEPTIVE], ""), hookId: inp({ inputmode: "numeric", size: 6 }),
      outcome: select([["", t("any")], "allow", "deny", "modify", "ask", "error"], ""), principalId: inp({ inputmode: "numeric", size: 8 }),
      sessionId: inp({ inputmode: "numeric", size: 10 }), toolName: inp({ size: 12 }), decisionId: inp({ size: 14, name: "decisionId" }),
      from: inp({ type: "datetime-local" }), to: inp({ type: "datetime-local" }) };
    // #/decisions/<decisionId>: one decision's rows (every hook of its chain), linked from a task run.
    const [, , linked] = location.hash.split("/");
    if (linked) f.decisionId.value = decodeURIComponent(linked);
    const tail = el("input", { type: "checkbox", id: "tail" });
    const list = el("div"), detail = el("div");
    let cursor = "", rows = [], stream = null;
    const iso = (v) => (v ? new Date(v).toISOString() : "");
    const params = () => ({ hookType: f.hookType.value, hookId: f.hookId.value, outcome: f.outcome.value, principalId: f.principalId.value,
      sessionId: f.sessionId.value, toolName: f.toolName.value, decisionId: f.decisionId.value.trim(), since: iso(f.from.value), until: iso(f.to.value) });
    const cols = [
      { title: t("time"), cell: (d) => when(d.createdAt) },
      { title: t("hookType"), cell: (d) => d.hookType },
      { title: t("hook"), cell: (d) => (d.hookName || "") + (d.hookId ? " #" + d.hookId : "") },
      { title: t("outcome"), cell: (d) => el("span", {}, badge(d.outcome), d.fromFailureMode ? badge("failureMode") : "") },
      { title: t("tool"), cell: (d) => d.toolName || "" },
      { title: t("principal"), cell: (d) => d.principalId == null ? "" : String(d.principalId) },
      { title: t("session"), cell: (d) => d.sessionId == null ? "" : String(d.sessionId) },
      { title: t("why"), wrap: true, cell: (d) => d.reason || "" },
    ];
    const render = (page) => list.replaceChildren(table(cols, rows, show), page ? pager(page, (c) => { cursor = c; load(); }) : "");
    const load = async () => {
      const page = await api("GET", "/api/decisions" + query(Object.assign(params(), { cursor })));
      rows = items(page);
      render(page);
    };
    async function show(d) {
      let chainLine;
      try {
        const v = await api("GET", "/api/decisions/verify" + query({ upTo: d.id }));
        chainLine = v.ok ? el("p", {}, el("span", { class: "badge allow", text: "✓" }), " ", t("chainOK"), " (" + v.checked + ")")
          : el("p", {}, el("span", { class: "badge deny", text: "✗" }), " ", t("chainBroken") + " " + v.brokenId + (v.problem ? ": " + v.problem : ""));
      } catch (err) { chainLine = el("p", { class: "field-error", text: err.message }); }
      detail.replaceChildren(el("div", { class: "card", id: "decision-detail" }, el("h2", { text: t("detail") + " #" + d.id }),
        el("p", { class: "muted", text: t("chain") + ": prev " + (d.prevHash || "—") + " → " + (d.hash || "—") }), chainLine, json(d)));
      detail.scrollIntoView({ block: "nearest" });
    }
    tail.addEventListener("change", () => {
      if (stream) { stream.close(); stream = null; }
      if (!tail.checked) return;
      const p = params();
      stream = follow("/api/decisions/stream" + query({ hookType: p.hookType, outcome: p.outcome }), (e) => {
        const d = JSON.parse(e.data);
        rows = [d, ...rows].slice(0, 200);
        render(null);
      });
    });
    const bar = el("form", { class: "filters" },
      el("label", {}, t("hookType"), f.hookType), el("label", {}, t("hook") + " ID", f.hookId), el("label", {}, t("outcome"), f.outcome),
      el("label", {}, t("principal"), f.principalId), el("label", {}, t("session"), f.sessionId), el("label", {}, t("tool"), f.toolName),
      el("label", {}, t("decisionId"), f.decisionId),
      el("label", {}, t("from"), f.from), el("label", {}, t("to"), f.to), el("button", { type: "submit", text: t("filter") }),
      el("label", { for: "tail", class: "row" }, tail, t("liveTail")));
    bar.addEventListener("submit", (e) => { e.preventDefault(); cursor = ""; load().catch((err) => toast(err.message, true)); });
    main().replaceChildren(el("h1", { text: t("decisions") }), bar, list, detail);
    await load();
  }

  // ---- Deliveries ----
  async function deliveries() {
    const status = select([["", t("any")], "pending", "delivering", "delivered", "failed", "dead"], "");
    const hookId = el("input", { inputmode: "numeric", size: 6 });
    const list = el("div"), detail = el("div");
    let cursor = "", open = 0, busy = false;
    const load = async () => {
      const page = await api("GET", "/api/deliveries" + query({ status: status.value, hookId: hookId.value, cursor }));
      const rows = items(page);
      // While a shown delivery is on its way, the page follows it (its attempts come from the outbox).
      busy = rows.some((d) => d.status === "pending" || d.status === "delivering");
      const shown = rows.find((d) => d.id === open);
      if (shown) show(shown);
      list.replaceChildren(table([
        { title: t("id"), cell: (d) => String(d.id) },
        { title: t("time"), cell: (d) => when(d.occurredAt) },
        { title: t("hook"), cell: (d) => d.hookName + " #" + d.hookId },
        { title: t("hookType"), cell: (d) => d.hookType },
        { title: t("status"), cell: (d) => el("span", {}, badge(d.status), d.paused ? badge("paused") : "") },
        { title: t("attempts"), cell: (d) => String(d.attempts) },
        { title: t("lastError"), wrap: true, cell: (d) => d.lastError || (d.lastStatusCode ? String(d.lastStatusCode) : "") },
        { title: "", cell: (d) => el("button", { type: "button", onclick: (e) => { e.stopPropagation(); redeliver(d); }, text: t("redeliver") }) },
      ], rows, show), pager(page, (c) => { cursor = c; load(); }));
    };
    function show(d) {
      open = d.id;
      detail.replaceChildren(el("div", { class: "card", id: "delivery-detail" }, el("h2", { text: t("attempts") + " · #" + d.id }),
        el("ol", { class: "timeline" }, (d.attemptLog || []).map((a) => el("li", {},
          el("div", {}, "#" + a.attempt + " ", when(a.dispatchedAt), " ", badge(a.statusCode ? String(a.statusCode) : (a.errorClass || "error")), " " + a.latencyMs + " ms"),
          a.error ? el("div", { class: "muted", text: a.error }) : "",
          a.responseBody ? el("pre", { text: a.responseBody.slice(0, 500) }) : ""))),
        el("button", { type: "button", onclick: () => redeliver(d), text: t("redeliver") })));
    }
    async function redeliver(d) {
      try {
        await api("POST", "/api/deliveries/" + d.id + "/redeliver", {});
        toast(t("redeliver") + " #" + d.id);
        await load();
      } catch (err) { toast(err.message, true); }
    }
    async function purge() {
      try {
        const r = await api("DELETE", "/api/deliveries" + query({ status: "dead", hookId: hookId.value }));
        toast(t("purged") + ": " + (r && r.deleted !== undefined ? r.deleted : ""));
        await load();
      } catch (err) { toast(err.message, true); }
    }
    const bar = el("form", { class: "filters" }, el("label", {}, t("status"), status), el("label", {}, t("hook") + " ID", hookId),
      el("button", { type: "submit", text: t("filter") }), el("button", { type: "button", class: "danger", onclick: purge, text: t("purgeDead") }));
    bar.addEventListener("submit", (e) => { e.preventDefault(); cursor = ""; load().catch((err) => toast(err.message, true)); });
    main().replaceChildren(el("h1", { text: t("deliveries") }), bar, list, detail);
    await load();
    every(2000, () => { if (busy) load().catch(() => {}); });
  }

  // ---- Breakers ----
  async function breakers() {
    const draw = async () => {
      const bs = items(await api("GET", "/api/breakers"));
      main().replaceChildren(el("h1", { text: t("breakers") }), table([
        { title: t("url"), wrap: true, cell: (b) => b.url },
        { title: t("state"), cell: (b) => badge(b.state) },
        { title: t("failures"), cell: (b) => String(b.consecutiveFailures ?? "") },
        { title: t("openedAt"), cell: (b) => when(b.openedAt) },
        { title: t("halfOpenIn"), cell: (b) => b.halfOpenAt ? Math.max(0, Math.round((new Date(b.halfOpenAt) - Date.now()) / 1000)) + " s" : "—" },
      ], bs));
    };
    await draw();
    every(5000, () => draw().catch(() => {}));
  }

  // ---- Approvals ----
  async function approvals() {
    const list = el("div");
    const load = async () => {
      const as = items(await api("GET", "/api/approvals"));
      list.replaceChildren(...(as.length ? as.map(card) : [el("p", { class: "muted", text: t("noPending") })]));
    };
    function card(a) {
      const reason = el("input", { size: 30, "aria-label": t("reason") });
      const answer = async (approved) => {
        try {
          await api("POST", "/api/approvals/" + encodeURIComponent(a.askId), { approved, reason: reason.value });
          toast(t("answered") + ": " + a.toolName);
          await load();
        } catch (err) { toast(err.message, true); }
      };
      return el("div", { class: "card approval", "data-ask": a.askId },
        el("div", { class: "row" }, el("strong", { text: a.toolName }), badge("ask"), el("span", { class: "muted" }, t("who") + ": " + a.userId),
          el("span", { class: "muted" }, t("since") + ": "), when(a.since),
          a.askedBy ? el("span", { class: "muted", text: t("askedBy") + ": " + a.askedBy }) : ""),
        a.reason ? el("p", { text: a.reason }) : "",
        el("h2", { text: t("args") }), json(a.arguments === undefined ? null : a.arguments),
        el("div", { class: "row" }, reason,
          el("button", { type: "button", class: "primary", onclick: () => answer(true), text: t("approve") }),
          el("button", { type: "button", class: "danger", onclick: () => answer(false), text: t("deny") })));
    }
    main().replaceChildren(el("h1", { text: t("approvals") }), me.role === "reviewer" ? el("p", { class: "muted", text: t("reviewerOnly") }) : "", list);
    await load();
    follow("/api/approvals/stream", () => load().catch(() => {}));
  }

  // ---- Scheduled tasks ----
  async function tasks() {
    const detail = el("div");
    const ts = items(await api("GET", "/api/tasks"));
    async function show(task) {
      const runs = items(await api("GET", "/api/tasks/" + task.id + "/runs"));
      detail.replaceChildren(el("div", { class: "card" }, el("h2", { text: t("recentRuns") + " · " + (task.taskName || task.name || task.id) }), table([
        { title: t("time"), cell: (r) => when(r.scheduledAt) },
        { title: t("type"), cell: (r) => r.trigger },
        { title: t("status"), cell: (r) => badge(r.status) },
        { title: t("reason"), wrap: true, cell: (r) => r.reason || r.errorMessage || "" },
        { title: t("decision"), cell: (r) => r.decisionId
          ? el("a", { href: "#/decisions/" + encodeURIComponent(r.decisionId), class: "decision-link", text: r.decisionId }) : "" },
        { title: "ms", cell: (r) => String(r.durationMs) },
      ], runs)));
    }
    main().replaceChildren(el("h1", { text: t("tasks") }), table([
      { title: t("id"), cell: (x) => String(x.id) },
      { title: t("hookName"), cell: (x) => x.taskName || x.name || "" },
      { title: t("schedule"), cell: (x) => x.cron || x.schedule || "" },
      { title: t("state"), cell: (x) => badge(x.enabled === false ? "disabled" : "enabled") },
      { title: t("nextFire"), cell: (x) => when(x.nextFireAt || x.nextRunAt) },
    ], ts, show), detail);
  }

  // ---- start ----
  document.getElementById("lang").addEventListener("click", () => {
    lang = lang === "zh" ? "en" : "zh";
    localStorage.setItem("hookd.lang", lang);
    route();
  });
  document.getElementById("signout").addEventListener("click", async () => {
    try { await api("DELETE", "/console/session"); } catch (_) { /* signed out either way */ }
    me = null;
    location.hash = "";
    route();
  });
  window.addEventListener("hashchange", route);
  api("GET", "/console/session").then((id) => { me = id && id.signedIn ? id : null; }, () => { me = null; }).then(route);
})();
