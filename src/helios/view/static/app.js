// helios view: the runs, a run's trials, a trial's steps. Plain JS, no build step.
// Every text that comes from a run folder is untrusted: it goes into the page only
// through text nodes (el() below) and attributes set one by one; never innerHTML.
"use strict";

const POLL_MS = 1500;
const PAGE = 50;
const STEP_PAGE = 50;
let generation = 0; // bumped on each navigation: a stale poll or fetch stops
let pollTimer = null;

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name === "class") node.className = value;
    else if (name === "href") node.setAttribute("href", safeHref(value));
    else if (name === "src") node.setAttribute("src", safeSrc(value));
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.appendChild(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

// Links are our own hash routes, our API (relative) or http(s); anything else
// (javascript:, data:, vbscript:) becomes a dead link.
function safeHref(url) {
  const text = String(url);
  if (text.startsWith("#") || text.startsWith("api/") || text.startsWith("files/")) return text;
  try {
    const parsed = new URL(text, location.href);
    if (parsed.protocol === "http:" || parsed.protocol === "https:") return parsed.href;
  } catch (e) { /* not a URL */ }
  return "#";
}

function safeSrc(url) {
  const text = String(url);
  if (text.startsWith("api/file?") || /^files\/[0-9a-f]+\.(png|jpe?g|gif|webp)$/.test(text) || /^data:image\/(png|jpeg|gif|webp);base64,/.test(text)) return text;
  return "";
}

function route(path, params) {
  return "#" + path + (params ? "?" + new URLSearchParams(params).toString() : "");
}

function showError(message) {
  const box = document.getElementById("error");
  box.textContent = message || "";
  box.hidden = !message;
}

// A bundle (helios view --bundle) has no server: its documents are scripts under
// data/, and the page sorts, filters and pages a run's rows itself.
const BUNDLE = document.documentElement.dataset.bundle === "1";

function loadData(key) {
  return new Promise((resolve, reject) => {
    if (key in window.HELIOS_DATA) return resolve(window.HELIOS_DATA[key]);
    const file = window.HELIOS_BUNDLE.files[key];
    if (!file || !/^[0-9a-f]+\.js$/.test(file)) return reject(new Error("not in this bundle: " + key));
    const script = document.createElement("script");
    script.src = "data/" + file;
    script.onload = () => (key in window.HELIOS_DATA ? resolve(window.HELIOS_DATA[key]) : reject(new Error("data/" + file + " does not hold " + key)));
    script.onerror = () => reject(new Error("cannot read data/" + file));
    document.head.appendChild(script);
  });
}

const ROW_TESTS = {
  status: (v) => (row) => v.split(",").includes(row.status),
  task: (v) => (row) => row.task.toLowerCase().includes(v.toLowerCase()),
  error_type: (v) => (row) => row.error_type === v,
  attempt: (v) => (row) => row.attempt === Number(v),
};

function bundleTrials(run, params) {
  const tests = [];
  for (const [name, make] of Object.entries(ROW_TESTS)) if (params[name]) tests.push(make(params[name].trim()));
  for (const name of ["reward", "duration", "cost"]) {
    const low = params[name + "_min"], high = params[name + "_max"];
    if (low) tests.push((row) => row[name] !== null && row[name] >= Number(low));
    if (high) tests.push((row) => row[name] !== null && row[name] <= Number(high));
  }
  const sort = params.sort || "index";
  const desc = params.desc === "1";
  const rows = run.rows.filter((row) => tests.every((test) => test(row)));
  const present = rows.filter((row) => row[sort] !== null);
  present.sort((a, b) => (a[sort] < b[sort] ? -1 : a[sort] > b[sort] ? 1 : 0) * (desc ? -1 : 1));
  const ordered = present.concat(rows.filter((row) => row[sort] === null));
  const offset = Number(params.offset || 0), limit = Number(params.limit || PAGE);
  return { run, total: run.rows.length, matched: ordered.length, offset, rows: ordered.slice(offset, offset + limit), error_types: run.error_types };
}

async function bundleGet(path, params) {
  if (path === "runs") return loadData("runs");
  if (path === "run") return loadData("run:" + params.run);
  if (path === "trials") return bundleTrials(await loadData("run:" + params.run), params);
  if (path === "trial") return loadData("trial:" + params.run + ":" + params.folder);
  if (path === "record") return loadData("record:" + params.run + ":" + params.index);
  const steps = await loadData("steps:" + params.path);
  if (steps.error) throw new Error(steps.error);
  const offset = Number(params.offset || 0);
  return { ...steps, offset, steps: steps.steps.slice(offset, offset + Number(params.limit || STEP_PAGE)) };
}

async function getJSON(path, params) {
  if (BUNDLE) return bundleGet(path, params || {});
  const url = "api/" + path + (params ? "?" + new URLSearchParams(params).toString() : "");
  let response;
  try {
    response = await fetch(url, { credentials: "same-origin", cache: "no-store" });
  } catch (e) {
    throw new Error("the viewer's server does not answer (" + e.message + ")");
  }
  let body;
  try {
    body = await response.json();
  } catch (e) {
    throw new Error(url + ": HTTP " + response.status + " (not JSON)");
  }
  if (!response.ok || body.error) throw new Error(body.error || "HTTP " + response.status);
  return body;
}

// Rounding as the terminal's (helios/figures.py, Python's format): half to even on the
// number's exact value. toFixed rounds a tie up, so 56.25 would be "56.3" (Python: "56.2").
function fixed(value, digits) {
  const plain = value.toFixed(digits);
  if (!Number.isFinite(value) || Math.abs(value) >= 1e21) return plain;
  const exact = Math.abs(value).toFixed(100);  // a double's exact decimal expansion
  const dot = exact.indexOf(".");
  if (!/^50*$/.test(exact.slice(dot + 1 + digits))) return plain;  // not a tie
  const kept = digits ? exact.slice(0, dot + 1 + digits) : exact.slice(0, dot);
  if (Number(kept[kept.length - 1]) % 2 !== 0) return plain;  // a tie toFixed rounded up to even
  return (value < 0 ? "-" : "") + kept;
}
function fmt(value, digits) {
  if (value === null || value === undefined) return "–";
  if (typeof value === "number") return digits === undefined ? String(value) : fixed(value, digits);
  return String(value);
}
function pct(value) { return value === null || value === undefined ? "–" : fixed(100 * value, 1) + "%"; }
function money(value) { return value === null || value === undefined ? "–" : "$" + fixed(value, 4); }
// A run's cost: null is a cost nobody knows (no price for the model), never $0.
function runCost(value) { return value === null || value === undefined ? "unknown" : money(value); }
// A difference of dollars, as `helios compare` writes it: "+$0.0012", "-$1.50".
function signedMoney(value) {
  if (value === null || value === undefined) return "unknown";
  const size = Math.abs(value);
  const text = size === 0 ? "$0" : "$" + fixed(size, size >= 1 ? 2 : 4);
  return (value < 0 ? "-" : "+") + text;
}
function secs(value) {
  if (value === null || value === undefined) return "–";
  if (value < 60) return value.toFixed(1) + "s";
  return Math.floor(value / 60) + "m" + String(Math.round(value % 60)).padStart(2, "0") + "s";
}
function statusCell(status) { return el("td", { class: "status-" + String(status).replace(/[^a-z]/g, "") }, status); }

function setMain(...nodes) {
  const main = document.getElementById("main");
  main.replaceChildren(...nodes);
}

function crumbs(...items) {
  document.getElementById("crumbs").replaceChildren(...items.flatMap((item, i) => [i ? " / " : "", item]));
}

function stopPolling() {
  if (pollTimer !== null) clearTimeout(pollTimer);
  pollTimer = null;
}

function poll(mine, fn) {
  stopPolling();
  pollTimer = setTimeout(async () => {
    if (mine !== generation) return;
    await fn();
  }, POLL_MS);
}

// ---- runs list -----------------------------------------------------------

async function showRuns(mine) {
  crumbs("runs");
  const data = await getJSON("runs");
  if (mine !== generation) return;
  const head = [BUNDLE ? null : "", "Run", "Door", "Model", "Agent", "Date", "Trials", "Pass rate", "pass@k", "Mean reward", "Cost", "Duration", "Status"].filter((h) => h !== null);
  // Runs picked for a comparison, in the order they were picked (the first is the baseline).
  const picked = [];
  const compareButton = el("button", { type: "button", id: "compare-selected", disabled: true,
    onclick: () => { location.hash = "#/compare?" + new URLSearchParams(picked.map((key) => ["run", key])).toString(); } },
  "Compare selected");
  const pick = (key) => (event) => {
    event.stopPropagation();
    const at = picked.indexOf(key);
    if (event.target.checked && at < 0) picked.push(key);
    if (!event.target.checked && at >= 0) picked.splice(at, 1);
    compareButton.disabled = picked.length < 2;
    compareButton.textContent = picked.length < 2 ? "Compare selected" : "Compare " + picked.length + " runs (A is the first picked)";
  };
  // Runs that show the same name (a run's --name, else its folder's) also show where
  // their folder is: output/model-a/batch_… and output/model-b/batch_… are told apart.
  const shownAs = (run) => run.title || run.name;
  const counts = {};
  for (const run of data.runs) counts[shownAs(run)] = (counts[shownAs(run)] || 0) + 1;
  const rows = data.runs.map((run) => el("tr", { class: "link", "data-key": run.key, onclick: () => { location.hash = route("/run", { run: run.key }); } },
    BUNDLE ? null : el("td", { onclick: (event) => event.stopPropagation() },
      el("input", { type: "checkbox", class: "pick", title: "pick for a comparison", onclick: pick(run.key) })),
    el("td", { class: "run-cell" }, el("a", { href: route("/run", { run: run.key }) }, shownAs(run)),
      run.title || counts[shownAs(run)] > 1 ? el("div", { class: "muted run-where" }, run.where) : null,
      tagList(run.tags),
      run.labels_error ? el("div", { class: "status-failed labels-error" }, run.labels_error) : null,
      run.error ? el("div", { class: "status-failed run-error" }, run.error) : null),
    el("td", {}, run.door),
    el("td", {}, fmt(run.model)),
    el("td", {}, fmt(run.agent)),
    el("td", {}, run.created_at ? run.created_at.replace("T", " ").slice(0, 19) : "–"),
    el("td", { class: "num trials" }, fmt(run.trials)),
    el("td", { class: "num" }, run.door === "generate" ? fmt(run.rows_written) + " rows" : pct(run.pass_rate)),
    el("td", {}, passAtK(run.pass_at_k)),
    el("td", { class: "num" }, fmt(run.mean_reward, 3)),
    el("td", { class: "num" }, runCost(run.cost_usd)),
    el("td", { class: "num" }, secs(run.seconds)),
    statusCell(run.status)));
  const table = el("table", { id: "runs-table" }, el("thead", {}, el("tr", {}, head.map((h) => el("th", {}, h)))), el("tbody", {}, rows));
  setMain(
    el("p", { class: "muted" }, "Runs under " + (data.folders.join(", ") || "no existing folder")),
    BUNDLE || data.runs.length < 2 ? null : el("p", {}, compareButton),
    data.runs.length ? table : el("p", { id: "no-runs" }, "No run folders found."));
  if (!BUNDLE && data.runs.some((run) => run.status === "running")) poll(mine, () => showRuns(mine).catch(fail(mine)));
}

// A run's tags (run.json, --tag key=value): text only, like everything from a run folder.
function tagList(tags) {
  if (!tags || typeof tags !== "object") return null;
  const entries = Object.entries(tags);
  if (!entries.length) return null;
  return el("div", { class: "tags" }, entries.map(([k, v]) => el("span", { class: "tag" }, k + "=" + String(v))));
}

// Each model and agent of a run of several: its trials, pass rate, reward and cost.
function breakdownTable(rows) {
  if (!Array.isArray(rows) || rows.length < 2) return null;
  return el("div", {}, el("h3", {}, "By model and agent"), el("table", { id: "breakdown" },
    el("thead", {}, el("tr", {}, ["Model", "Agent", "Trials", "Passed", "Pass rate", "Mean reward", "Errors", "Cost"].map((h) => el("th", {}, h)))),
    el("tbody", {}, rows.map((g) => el("tr", {},
      el("td", { class: "model" }, fmt(g.model)), el("td", { class: "agent" }, fmt(g.agent)),
      el("td", { class: "num" }, fmt(g.trials)), el("td", { class: "num" }, fmt(g.passed)),
      el("td", { class: "num pass-rate" }, pct(g.pass_rate)), el("td", { class: "num" }, fmt(g.mean_reward, 3)),
      el("td", { class: "num" }, fmt(g.errors)), el("td", { class: "num" }, runCost(g.cost_usd)))))));
}

function passAtK(values) {
  if (!values || typeof values !== "object") return "–";
  return Object.entries(values).map(([k, v]) => k + " " + pct(typeof v === "number" ? v : null)).join(", ");
}

// ---- a run ---------------------------------------------------------------

const COLUMNS = [
  ["index", "#"], ["task", "Task"], ["attempt", "Attempt"], ["status", "Status"], ["reward", "Reward"],
  ["duration", "Duration"], ["cost", "Cost"], ["error_type", "Error"],
];

function runState(params) {
  return {
    run: params.get("run") || "",
    sort: params.get("sort") || "index",
    desc: params.get("desc") === "1",
    offset: Number(params.get("offset") || 0),
    filters: Object.fromEntries(["status", "task", "attempt", "error_type", "reward_min", "reward_max",
      "duration_min", "duration_max", "cost_min", "cost_max"].map((k) => [k, params.get(k) || ""])),
  };
}

function runParams(state) {
  const params = { run: state.run, sort: state.sort, offset: String(state.offset) };
  if (state.desc) params.desc = "1";
  for (const [k, v] of Object.entries(state.filters)) if (v) params[k] = v;
  return params;
}

async function showRun(mine, params) {
  const state = runState(params);
  const [run, page] = await Promise.all([
    getJSON("run", { run: state.run }),
    getJSON("trials", { ...runParams(state), limit: String(PAGE) }),
  ]);
  if (mine !== generation) return;
  crumbs(el("a", { href: "#/" }, "runs"), run.name);
  const summary = el("div", { id: "run-summary" });
  const desktops = el("div", { id: "desktops" });
  const table = el("div", { id: "trials" });
  renderSummary(summary, run, page.run);
  renderDesktops(desktops, page.desktops);
  renderTable(table, state, page);
  setMain(summary, desktops, filterForm(state, page), table);
  const refresh = async () => {
    const fresh = await getJSON("trials", { ...runParams(state), limit: String(PAGE) });
    if (mine !== generation) return;
    renderSummary(summary, run, fresh.run);
    renderDesktops(desktops, fresh.desktops);
    renderTable(table, state, fresh);
    if (fresh.run.status === "running") poll(mine, () => refresh().catch(fail(mine)));
  };
  if (page.run.status === "running" && !BUNDLE) poll(mine, () => refresh().catch(fail(mine)));
}

// A watched batch (helios batch --watch) lists the desktops of its GUI trials in
// flight: each links to its live view, served by the batch on 127.0.0.1.
function renderDesktops(box, desktops) {
  if (!desktops || !desktops.length) { box.replaceChildren(); return; }
  box.replaceChildren(el("div", { class: "panel" }, el("h3", {}, "Live desktops (trials in flight)"),
    el("ul", {}, desktops.map((d) => el("li", {}, el("a", { href: d.url, target: "_blank", rel: "noopener noreferrer" }, d.label))))));
}

function renderSummary(box, run, live) {
  const summary = run.summary || {};
  const statuses = Object.entries(live.statuses || {}).map(([k, v]) => k + " " + v).join(", ") || "none yet";
  const fields = [
    ["Status", el("span", { class: "status-" + live.status, id: "run-status" }, live.status)],
    ["Door", run.door], ["Model", fmt(run.model)], ["Agent", fmt(run.agent)], ["Provider", fmt(run.provider)],
    ["Trials", el("span", { id: "run-trials" }, fmt(live.trials))], ["By status", statuses],
    run.door === "generate" ? ["Rows written", el("span", { id: "rows-written" }, fmt(live.rows_written))]
      : ["Pass rate", el("span", { id: "run-pass-rate" }, pct(live.pass_rate))],
    ["Mean reward", fmt(live.mean_reward, 3)],
    ["Tokens", fmt(live.input_tokens) + " in / " + fmt(live.output_tokens) + " out"], ["Cost", el("span", { id: "run-cost" }, runCost(live.cost_usd))],
    ["Duration", secs(live.seconds)], ["Started", fmt(run.created_at)],
  ];
  if (typeof live.raw_pass_rate === "number" && live.raw_pass_rate !== live.pass_rate) {
    // the pass rate counts invalid tasks and trials not run as failed; this one does not
    fields.push(["Raw pass rate", pct(live.raw_pass_rate) + " of the trials run"]);
  }
  if (Array.isArray(summary.mean_reward_ci95)) fields.push(["Reward 95% CI", summary.mean_reward_ci95.map((v) => fmt(v, 3)).join(" – ")]);
  fields.push(["Folder", el("span", { id: "run-where" }, run.where)]);
  const children = [el("h2", { id: "run-title" }, run.title || run.name), tagList(run.tags),
    el("div", { class: "grid" }, fields.map(([k, v]) => el("div", {}, el("span", {}, k), v)))];
  if (run.labels_error) children.push(el("p", { class: "status-failed labels-error" }, run.labels_error));
  if (run.error) children.push(el("p", { class: "status-failed" }, run.error));
  if (run.summary_error) children.push(el("p", { class: "status-failed" }, run.summary_error));
  if (summary.pass_at_k && typeof summary.pass_at_k === "object") {
    const ci = summary.pass_at_k_ci95 || {};
    children.push(el("h3", {}, "pass@k"), el("table", { id: "pass-at-k" }, el("tbody", {},
      Object.entries(summary.pass_at_k).map(([k, v]) => el("tr", {}, el("td", {}, k), el("td", { class: "num" }, pct(typeof v === "number" ? v : null)),
        el("td", { class: "muted" }, Array.isArray(ci[k]) ? "95% CI " + ci[k].map(pct).join(" – ") : ""))))));
  }
  const breakdown = breakdownTable(live.breakdown);
  if (breakdown) children.push(breakdown);
  const errors = Object.entries(live.errors || {});
  if (errors.length) {
    children.push(el("h3", {}, "Errors by type"), el("table", { id: "errors-by-type" }, el("tbody", {},
      errors.map(([k, v]) => el("tr", {}, el("td", {}, k), el("td", { class: "num" }, v))))));
  }
  box.replaceChildren(el("div", { class: "panel" }, children));
}

function filterForm(state, page) {
  const input = (name, label, extra) => el("label", {}, label, el("input", { name, value: state.filters[name], ...extra }));
  const errorSelect = el("select", { name: "error_type" }, el("option", { value: "" }, "any"),
    (page.error_types || []).map((t) => el("option", { value: t, selected: t === state.filters.error_type }, t)));
  const known = Object.keys(page.run.statuses || {});
  if (state.filters.status && !known.includes(state.filters.status)) known.push(state.filters.status);
  const statusSelect = el("select", { name: "status" }, ["", ...known.sort()].map((s) =>
    el("option", { value: s, selected: s === state.filters.status }, s || "any")));
  const form = el("form", { class: "filters panel", id: "filters" },
    el("label", {}, "Status", statusSelect),
    input("task", "Task contains", { class: "wide" }), input("attempt", "Attempt"),
    el("label", {}, "Error type", errorSelect),
    input("reward_min", "Reward ≥"), input("reward_max", "Reward ≤"),
    input("duration_min", "Duration ≥ s"), input("duration_max", "Duration ≤ s"),
    input("cost_min", "Cost ≥ $"), input("cost_max", "Cost ≤ $"),
    el("button", { type: "submit" }, "Filter"),
    el("button", { type: "button", onclick: () => { location.hash = route("/run", { run: state.run }); } }, "Clear"));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const filters = {};
    for (const [k, v] of new FormData(form).entries()) filters[k] = String(v).trim();
    location.hash = route("/run", runParams({ ...state, offset: 0, filters: { ...state.filters, ...filters } }));
  });
  return form;
}

function renderTable(box, state, page) {
  // a generate run's prompts have no attempts (never "Attempt 0")
  const generate = Boolean(page.run && page.run.door === "generate");
  // a run of several models or agents names each trial's
  const several = Boolean(page.run && Array.isArray(page.run.breakdown) && page.run.breakdown.length > 1);
  const columns = COLUMNS.filter(([key]) => !(generate && key === "attempt"));
  const head = el("tr", {}, columns.map(([key, label]) => el("th", {
    class: "sortable" + (state.sort === key ? " sorted" + (state.desc ? " desc" : "") : ""), "data-sort": key,
    onclick: () => { location.hash = route("/run", runParams({ ...state, offset: 0, sort: key, desc: state.sort === key && !state.desc })); },
  }, label)), several ? [el("th", {}, "Model"), el("th", {}, "Agent")] : null, el("th", {}, "Note"));
  const rows = page.rows.map((row) => {
    const target = row.folder ? route("/trial", { run: state.run, folder: row.folder })
      : row.status === "damaged" ? null : route("/record", { run: state.run, index: String(row.index) });
    // a retry (--retry-failed-below) says so; a row a newer attempt replaced in the counts is dimmed
    const marks = [row.retry ? " (retry " + row.retry + ")" : "", row.superseded ? " · superseded" : ""].join("");
    return el("tr", { class: (target ? "link" : "") + (row.superseded ? " superseded" : ""), "data-index": row.index,
      title: row.superseded ? "a newer attempt of this trial counts instead" : null, onclick: target ? () => { location.hash = target; } : null },
      el("td", { class: "num" }, row.index + 1),
      el("td", {}, target ? el("a", { href: target }, row.task) : row.task, marks ? el("span", { class: "muted" }, marks) : null),
      generate ? null : el("td", { class: "num" }, fmt(row.attempt)),
      statusCell(row.status),
      el("td", { class: "num" }, fmt(row.reward, 3)),
      el("td", { class: "num" }, secs(row.duration)),
      el("td", { class: "num" }, money(row.cost)),
      el("td", { title: row.error || "" }, row.error_type),
      several ? [el("td", { class: "trial-model" }, fmt(row.model)), el("td", { class: "trial-agent" }, fmt(row.agent))] : null,
      el("td", { class: "muted" }, row.note || row.error || ""));
  });
  const last = Math.max(0, Math.ceil(page.matched / PAGE) - 1);
  const current = Math.floor(state.offset / PAGE);
  const go = (n) => { location.hash = route("/run", runParams({ ...state, offset: n * PAGE })); };
  const pager = el("div", { class: "pager" },
    el("button", { disabled: current <= 0, onclick: () => go(current - 1) }, "‹ Prev"),
    el("span", { id: "trial-count" }, page.matched + " of " + page.total + " trials" + (page.matched ? ", page " + (current + 1) + " of " + (last + 1) : "")),
    el("button", { disabled: current >= last, onclick: () => go(current + 1) }, "Next ›"));
  box.replaceChildren(pager, el("table", { id: "trials-table" }, el("thead", {}, head), el("tbody", {}, rows)));
}

// ---- a trial -------------------------------------------------------------

async function showTrial(mine, params) {
  const run = params.get("run") || "";
  const folder = params.get("folder") || "";
  const trial = await getJSON("trial", { run, folder });
  if (mine !== generation) return;
  crumbs(el("a", { href: "#/" }, "runs"), el("a", { href: route("/run", { run }) }, run.split("/").pop()), folder);
  const result = trial.result || {};
  const rewards = result.rewards && typeof result.rewards === "object" ? Object.entries(result.rewards) : [];
  const head = el("div", { class: "panel", id: "trial-head" },
    el("h2", {}, String(result.task_name || folder)),
    el("div", { class: "grid" },
      el("div", {}, el("span", {}, "Status"), el("span", { class: "status-" + String(result.status || "").replace(/[^a-z]/g, "") }, fmt(result.status))),
      el("div", {}, el("span", {}, "Reward"), fmt(result.reward)),
      el("div", {}, el("span", {}, "Attempt"), fmt(result.attempt)),
      el("div", {}, el("span", {}, "Duration"), secs(typeof result.duration === "number" ? result.duration : null)),
      el("div", {}, el("span", {}, "Model"), fmt(result.model)),
      el("div", {}, el("span", {}, "Agent"), fmt(result.agent))),
    trial.result_error ? el("p", { class: "status-failed" }, trial.result_error) : null,
    result.error ? el("pre", { id: "trial-error" }, String(result.error)) : null,
    rewards.length ? el("table", { id: "rewards" }, el("tbody", {}, rewards.map(([k, v]) => el("tr", {}, el("td", {}, k), el("td", { class: "num" }, fmt(v)))))) : null);
  const steps = el("div", { id: "steps" });
  const verifier = el("div", { class: "panel", id: "verifier" }, el("h3", {}, "Verifier"),
    output("stdout", trial.stdout), output("stderr", trial.stderr));
  const files = el("div", { class: "panel", id: "files" }, el("h3", {}, "Files"),
    el("table", {}, el("tbody", {}, trial.files.map((f) => el("tr", {},
      el("td", {}, f.href ? el("a", { href: f.href, target: "_blank", rel: "noopener" }, f.path) : f.path),
      el("td", { class: "num" }, f.size),
      el("td", {}, f.href ? el("a", { href: downloadHref(f.href), download: f.path.split("/").pop() }, "download") : "(not in this bundle)"))))),
    trial.files_cut ? el("p", { class: "muted" }, "(the list stops at 2,000 files)") : null);
  const raw = el("div", { class: "panel" }, el("h3", {}, "result.json and config.json"),
    el("details", {}, el("summary", {}, "result.json"), el("pre", {}, trial.result ? JSON.stringify(trial.result, null, 1) : trial.result_error)),
    el("details", {}, el("summary", {}, "config.json"), el("pre", {}, trial.config ? JSON.stringify(trial.config, null, 1) : trial.config_error)));
  setMain(head, el("div", { class: "panel" }, el("h3", {}, "Trajectory"), steps), verifier, files, raw);
  if (!trial.trajectory) {
    steps.append(el("p", { class: "muted", id: "no-trajectory" }, "This trial has no trajectory (agent/trajectory.json is missing)."));
    finalScreens(steps, trial);
    return;
  }
  await loadSteps(mine, steps, trial.trajectory, 0);
}

function downloadHref(href) {
  return href.startsWith("api/file?") ? href.replace("api/file?", "api/file?download=1&") : href;
}

// A trial without a trajectory may still have screenshots (the final screen).
function finalScreens(box, trial) {
  for (const f of trial.files) {
    if (f.href && /\.(png|jpe?g|gif|webp)$/i.test(f.path)) {
      box.append(el("div", {}, el("div", { class: "muted" }, f.path), el("img", { class: "inline", src: f.href, alt: f.path })));
    }
  }
}

function output(name, value) {
  if (!value || value.text === null) return el("p", { class: "muted" }, name + ": " + (value ? value.error : "missing"));
  return el("div", {}, el("div", { class: "muted" }, name + (value.truncated ? " (last 256 KB of " + value.size + " bytes)" : "")),
    el("pre", { class: "verifier-" + name }, value.text || "(empty)"));
}

async function loadSteps(mine, box, path, offset) {
  let page;
  try {
    page = await getJSON("steps", { path, offset: String(offset), limit: String(STEP_PAGE) });
  } catch (e) {
    box.append(el("p", { class: "status-failed", id: "trajectory-error" }, e.message));
    return;
  }
  if (mine !== generation) return;
  if (offset === 0) {
    const agent = page.agent || {};
    box.append(el("p", { class: "muted" }, page.total + " steps · " + fmt(page.schema_version) + " · agent " + fmt(agent.name) + " · model " + fmt(agent.model_name)));
  }
  for (const step of page.steps) box.append(renderStep(step));
  const next = offset + page.steps.length;
  if (next < page.total) {
    const more = el("button", { id: "more-steps", onclick: () => { more.remove(); loadSteps(mine, box, path, next); } },
      "Show the next " + Math.min(STEP_PAGE, page.total - next) + " of " + (page.total - next) + " more steps");
    box.append(more);
  }
}

function renderContent(content) {
  if (content === null || content === undefined || content === "") return null;
  if (typeof content === "string") return el("pre", { class: "text" }, content);
  return content.map((part) => part.type === "image"
    ? (part.src ? el("img", { class: "inline", src: part.src, alt: "image" }) : el("p", { class: "muted" }, "(an image missing, or outside the run: not shown)"))
    : el("pre", { class: "text" }, part.text));
}

function renderStep(step) {
  if (step.error) return el("div", { class: "step" }, el("p", { class: "status-failed" }, step.error));
  const metrics = step.metrics || {};
  const tokens = ["prompt_tokens", "completion_tokens", "cached_tokens"].filter((k) => typeof metrics[k] === "number")
    .map((k) => k.replace("_tokens", "") + " " + metrics[k]).join(" · ");
  const cost = typeof metrics.cost_usd === "number" ? " · " + money(metrics.cost_usd) : "";
  const marks = step.tool_calls.map((c) => c.mark).filter(Boolean);
  return el("div", { class: "step source-" + step.source.replace(/[^a-z]/g, ""), "data-step": step.index },
    el("div", { class: "meta" }, "#" + fmt(step.step_id) + " " + step.source + (step.model_name ? " · " + step.model_name : "") +
      (step.timestamp ? " · " + step.timestamp : "") + (tokens ? " · tokens " + tokens : "") + cost),
    step.reasoning ? el("details", { class: "reasoning" }, el("summary", {}, "reasoning"), el("pre", {}, step.reasoning)) : null,
    renderContent(step.message),
    step.tool_calls.map((call) => el("div", { class: "tool" }, "→ ", el("b", {}, call.name), el("pre", { class: "arguments" }, call.arguments))),
    step.acted_on && marks.length ? screenWithMarks(step.acted_on, marks) : null,
    step.observations.map((obs) => el("div", { class: "observation" }, el("div", { class: "muted" }, "observation" + (obs.call_id ? " of " + obs.call_id : "")), renderContent(obs.content))));
}

const SVG = "http://www.w3.org/2000/svg";
function svg(tag, attrs) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  return node;
}

// The screen the action was taken on, with the click (a ring) or the drag (a line
// from a dot to an arrow) drawn in the image's own pixels.
function screenWithMarks(src, marks) {
  const img = el("img", { src, alt: "the screen the action acted on" });
  const overlay = svg("svg", { class: "marks", preserveAspectRatio: "none" });
  const box = el("div", { class: "screen" }, img, overlay);
  const draw = () => {
    overlay.setAttribute("viewBox", "0 0 " + img.naturalWidth + " " + img.naturalHeight);
    const r = Math.max(6, img.naturalWidth / 80);
    for (const mark of marks) {
      const grid = typeof mark.grid === "number" && mark.grid > 0 ? mark.grid : null; // Gemini's 0-999
      const points = grid ? mark.points.map(([x, y]) => [x * img.naturalWidth / grid, y * img.naturalHeight / grid]) : mark.points;
      if (mark.kind === "drag") {
        overlay.append(svg("polyline", { class: "mark drag", points: points.map((p) => p.join(",")).join(" "), fill: "none", stroke: "#f04438", "stroke-width": r / 2 }));
        overlay.append(svg("circle", { class: "mark", cx: points[0][0], cy: points[0][1], r: r / 2, fill: "#f04438" }));
        const end = points[points.length - 1];
        overlay.append(svg("circle", { class: "mark", cx: end[0], cy: end[1], r, fill: "none", stroke: "#f04438", "stroke-width": r / 3 }));
      } else {
        overlay.append(svg("circle", { class: "mark click", cx: points[0][0], cy: points[0][1], r, fill: "none", stroke: "#f04438", "stroke-width": r / 3 }));
        overlay.append(svg("circle", { class: "mark", cx: points[0][0], cy: points[0][1], r: r / 4, fill: "#f04438" }));
      }
    }
  };
  if (img.complete && img.naturalWidth) draw(); else img.addEventListener("load", draw, { once: true });
  return box;
}

// ---- a record without a trial folder: a generate prompt, a tool-call test run ----

async function showRecord(mine, params) {
  const run = params.get("run") || "";
  const doc = await getJSON("record", { run, index: params.get("index") || "" });
  if (mine !== generation) return;
  crumbs(el("a", { href: "#/" }, "runs"), el("a", { href: route("/run", { run }) }, run.split("/").pop()), "#" + (doc.index + 1));
  const record = doc.record || {};
  const parts = [el("div", { class: "panel", id: "record-head" }, el("h2", {}, doc.task),
    el("div", { class: "grid" },
      el("div", {}, el("span", {}, "Status"), el("span", { class: "status-" + doc.status.replace(/[^a-z]/g, "") }, doc.status)),
      typeof record.match_rate === "number" ? el("div", {}, el("span", {}, "Match rate"), pct(record.match_rate)) : null,
      typeof record.duration === "number" ? el("div", {}, el("span", {}, "Duration"), secs(record.duration)) : null,
      record.reason ? el("div", {}, el("span", {}, "Reason"), String(record.reason)) : null),
    doc.error ? el("pre", { id: "record-error" }, String(doc.error)) : null)];
  if (typeof record.prompt === "string") parts.push(el("div", { class: "panel" }, el("h3", {}, "Prompt"), el("pre", { id: "prompt" }, record.prompt)));
  if (record.eval_result && typeof record.eval_result === "object") parts.push(toolCalls(record.eval_result));
  if (doc.row_error) parts.push(el("p", { class: "status-failed", id: "row-error" }, doc.row_error));
  if (doc.row && Array.isArray(doc.row.conversations)) parts.push(chat(doc.row.conversations));
  const stats = (doc.row && doc.row.tool_stats) || record.tool_stats;
  if (stats && typeof stats === "object") {
    parts.push(el("div", { class: "panel" }, el("h3", {}, "Tool stats"), el("table", { id: "tool-stats" }, el("tbody", {},
      Object.entries(stats).map(([tool, value]) => el("tr", {}, el("td", {}, tool), el("td", {}, typeof value === "object" ? JSON.stringify(value) : String(value))))))));
  }
  parts.push(el("div", { class: "panel" }, el("details", {}, el("summary", {}, "the record (results.jsonl)"), el("pre", {}, JSON.stringify(record, null, 1)))));
  setMain(...parts);
}

// ShareGPT turns (Hermes rows) as a chat: system, human, gpt, tool.
function chat(turns) {
  return el("div", { class: "panel", id: "chat" }, el("h3", {}, "Conversation"), turns.map((turn) => {
    const who = turn && typeof turn.from === "string" ? turn.from : "?";
    return el("div", { class: "turn from-" + who.replace(/[^a-z]/g, "") }, el("div", { class: "who" }, who),
      el("pre", {}, turn && typeof turn.value === "string" ? turn.value : JSON.stringify(turn)));
  }));
}

function callText(call) {
  if (!call || typeof call !== "object") return "–";
  return String(call.name ?? call.function_name ?? "?") + " " + JSON.stringify(call.arguments ?? {});
}

// Each expected call beside the actual call it matched (or came closest to); a
// mismatch is marked.
function toolCalls(result) {
  const matches = Array.isArray(result.matches) ? result.matches : [];
  const rows = matches.map((m) => el("tr", { class: m.matched ? "match" : "mismatch" },
    el("td", {}, m.matched ? "✓" : "✗"), el("td", {}, el("code", {}, callText(m.expected))),
    el("td", {}, el("code", {}, m.actual ? callText(m.actual) : "(none)")), el("td", { class: "muted" }, String(m.details || ""))));
  const actual = Array.isArray(result.actual) ? result.actual : [];
  return el("div", { class: "panel", id: "tool-calls" }, el("h3", {}, "Expected and actual calls"),
    el("table", {}, el("thead", {}, el("tr", {}, ["", "Expected", "Actual", "Details"].map((h) => el("th", {}, h)))), el("tbody", {}, rows)),
    el("p", { class: "muted" }, "All actual calls: " + (actual.map(callText).join(", ") || "none")));
}

// ---- routing -------------------------------------------------------------

// ---- a comparison (helios compare in the page) ----------------------------

const CHANGES = { regressed: "passed less often in B", fixed: "passed more often in B", same: "same",
  only_a: "only in A", only_b: "only in B" };
const TASK_ROWS = 500;

// A signed difference; unit "pp": of two rates (fractions), in percentage points.
function signed(value, digits, unit) {
  if (value === null || value === undefined) return "–";
  const text = unit === "pp" ? fixed(100 * value, digits) : fixed(value, digits);
  return (value > 0 ? "+" : "") + text + (unit === "pp" ? " pp" : unit || "");
}

function verdict(c) {
  if (c.significantly_worse) return el("b", { class: "status-failed verdict" }, "B is significantly worse than A");
  if (c.significantly_better) return el("b", { class: "status-passed verdict" }, "B is significantly better than A");
  return el("b", { class: "verdict" }, "no significant difference");
}

function taskList(id, title, names) {
  if (!names.length) return null;
  const shown = names.slice(0, 50);
  return el("div", { id },
    el("h3", {}, title + " (" + names.length + ")"),
    el("ul", {}, shown.map((name) => el("li", {}, name))),
    names.length > shown.length ? el("p", { class: "muted" }, "and " + (names.length - shown.length) + " more") : null);
}

async function showCompare(mine, params) {
  const keys = params.getAll("run");
  if (BUNDLE) throw new Error("a bundle holds no comparison: run helios view to compare runs");
  const report = await getJSON("compare?" + new URLSearchParams(keys.map((key) => ["run", key])).toString());
  if (mine !== generation) return;
  crumbs(el("a", { href: "#/" }, "runs"), "compare");
  const letters = report.runs.map((_, i) => String.fromCharCode(65 + i));
  const legend = el("table", { id: "compare-runs" },
    el("thead", {}, el("tr", {}, ["", "Run", "Model", "Agent", "Tasks", "Trials", "Pass rate", "Mean reward", "pass@k", "Cost", "Duration"].map((h) => el("th", {}, h)))),
    el("tbody", {}, report.runs.map((run, i) => el("tr", {},
      el("td", {}, el("b", {}, letters[i])),
      el("td", {}, el("a", { href: route("/run", { run: report.keys[i] }) }, run.name || run.path.split("/").pop()),
        run.name ? el("div", { class: "muted" }, run.path.split("/").slice(-2).join("/")) : null, tagList(run.tags),
        run.problems.length ? el("div", { class: "status-failed" }, run.problems.length + " damaged record(s): " + run.problems[0]) : null),
      el("td", {}, fmt(run.model)), el("td", {}, fmt(run.agent)),
      el("td", { class: "num" }, fmt(run.tasks)), el("td", { class: "num" }, fmt(run.trials)),
      el("td", { class: "num" }, run.door === "generate" ? fmt(run.rows_written) + " rows" : pct(run.pass_rate)), el("td", { class: "num" }, fmt(run.mean_reward, 3)),
      el("td", {}, passAtK(run.pass_at_k)), el("td", { class: "num" }, runCost(run.cost_usd)),
      el("td", { class: "num" }, secs(run.wall_seconds))))));
  const sections = report.comparisons.map((c, i) => {
    const b = letters[i + 1];
    const tasks = c.tasks.slice(0, TASK_ROWS);
    return el("div", { class: "panel comparison", "data-b": b },
      el("h2", {}, b + " against A"),
      el("p", { class: "delta" }, "pass rate " + pct(c.pass_rate_a) + " → " + pct(c.pass_rate_b) + ": " + signed(c.pass_rate_delta, 1, "pp"),
        " (" + Math.round(c.ci.confidence * 100) + "% CI " + signed(c.ci.low, 1, "pp") + " to " + signed(c.ci.high, 1, "pp") + ", " + c.ci.method + ") ", verdict(c)),
      el("p", { class: "muted" }, c.shared_tasks + " shared tasks · mean reward " + signed(c.reward_delta, 3) +
        " · cost " + signedMoney(c.cost_delta_usd) + " · trial time " + signed(c.duration_delta, 1) + " s"),
      c.note ? el("p", { class: "status-interrupted note" }, c.note) : null,
      taskList("regressions-" + b, "Passed less often in " + b, c.regressions),
      taskList("fixes-" + b, "Passed more often in " + b, c.fixes),
      el("details", {}, el("summary", {}, "every task (" + c.tasks.length + ")"),
        el("table", { class: "compare-tasks" },
          el("thead", {}, el("tr", {}, ["Task", "Change", "A pass rate", b + " pass rate", "Δ reward", "Δ duration", "Δ cost"].map((h) => el("th", {}, h)))),
          el("tbody", {}, tasks.map((t) => el("tr", { class: "change-" + t.change },
            el("td", {}, t.task), el("td", {}, CHANGES[t.change] || t.change),
            el("td", { class: "num" }, t.a ? pct(t.a.pass_rate) : "–"), el("td", { class: "num" }, t.b ? pct(t.b.pass_rate) : "–"),
            el("td", { class: "num" }, signed(t.reward_delta, 3)), el("td", { class: "num" }, signed(t.duration_delta, 1)),
            el("td", { class: "num" }, signedMoney(t.cost_delta_usd)))))),
        c.tasks.length > tasks.length ? el("p", { class: "muted" }, "and " + (c.tasks.length - tasks.length) + " more: helios compare --tasks --limit 0 lists them all") : null));
  });
  setMain(el("div", { class: "panel" }, el("h2", {}, "Runs (A is the baseline)"), legend), ...sections);
}

function fail(mine) {
  return (e) => { if (mine === generation) showError(e.message); };
}

async function navigate() {
  const mine = ++generation;
  stopPolling();
  showError("");
  const hash = location.hash.replace(/^#/, "") || "/";
  const [path, query] = hash.split("?", 2);
  const params = new URLSearchParams(query || "");
  try {
    if (path === "/run") await showRun(mine, params);
    else if (path === "/trial") await showTrial(mine, params);
    else if (path === "/record") await showRecord(mine, params);
    else if (path === "/compare") await showCompare(mine, params);
    else await showRuns(mine);
  } catch (e) {
    fail(mine)(e);
    if (mine === generation) setMain(el("p", { class: "muted" }, "Nothing to show."));
  }
}

window.addEventListener("hashchange", navigate);
navigate();
