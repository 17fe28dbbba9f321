// planbook's live plan view: an anywidget ES module (no build step, no network).
//
// The kernel sends the view model in a few traits (see planbook/views/widget.py): head,
// rows, statuses, batch (panes and timeline bars that changed, numbered), revisions and
// selected. Everything a click needs is already here, so rows, tabs and panes answer
// in the browser while the kernel is still busy running the cell.

const STATUS = {
  n: ["not_started", "[ ]"], r: ["in_progress", "[→]"], c: ["completed", "[✓]"],
  f: ["failed", "[✗]"], s: ["skipped", "[-]"], b: ["blocked", "[!]"],
  w: ["waiting", "[?]"],  // not started, waiting for a person (widget.py WAITING_CODE)
};
const ORDER = ["completed", "in_progress", "failed", "skipped", "blocked", "not_started"];
const ROW_H = 24;        // px per row (virtual scrolling relies on it)
const VISIBLE_ROWS = 14; // rows shown at once
const MAX_NODES = 400;   // graph nodes drawn

const MIX = (c) => `color-mix(in srgb,${c} 60%,var(--pb-fg))`;   // a status colour readable on light and dark
const TINT = (c) => `color-mix(in srgb,${c} 12%,var(--pb-bg))`;  // a faint status background
const CSS = `
.pb-root{--pb-fg:var(--jp-content-font-color1,#222);--pb-fg2:color-mix(in srgb,var(--pb-fg) 72%,var(--pb-bg));
  --pb-bg:var(--jp-layout-color0,#fff);--pb-bg2:var(--jp-layout-color2,#eee);--pb-line:var(--jp-border-color2,#e0e0e0);
  font-family:var(--jp-ui-font-family,system-ui,sans-serif);font-size:13px;line-height:1.4;color:var(--pb-fg);max-width:100%}
.pb-title{font-weight:600;font-size:14px}.pb-dim{color:var(--pb-fg2);font-weight:normal}
.pb-bar{background:var(--jp-layout-color3,#e0e0e0);border-radius:4px;height:8px;max-width:480px;margin:4px 0}
.pb-bar>div{height:8px;border-radius:4px;background:#0b5394;transition:width .2s}
.pb-bar.ok>div{background:#2e7d32}.pb-bar.bad>div{background:#b71c1c}.pb-bar.warn>div{background:#c77700}
.pb-verdict{font-weight:600}.pb-verdict.ok{color:${MIX("#1b6e20")}}.pb-verdict.bad{color:${MIX("#b71c1c")}}
.pb-verdict.warn{color:${MIX("#8a5300")}}.pb-verdict.info{color:${MIX("#0b5394")}}
.pb-cached-count,.pb-row .c,.pb-cachedrow{color:${MIX("#5b3f99")}}
.pb-tabs{display:flex;gap:4px;margin:6px 0 4px 0;border-bottom:1px solid var(--jp-border-color1,#ccc)}
.pb-tab{border:1px solid var(--jp-border-color1,#ccc);border-bottom:none;background:var(--pb-bg2);padding:2px 10px;
  cursor:pointer;border-radius:4px 4px 0 0;font:inherit;color:var(--pb-fg)}
.pb-tab.on{background:var(--pb-bg);font-weight:600;position:relative;top:1px}
.pb-scroll{overflow-y:auto;position:relative;border:1px solid var(--pb-line)}
.pb-row{position:absolute;left:0;right:0;height:${ROW_H}px;display:flex;align-items:center;gap:8px;
  padding:0 6px;cursor:pointer;white-space:nowrap;overflow:hidden;border-bottom:1px solid var(--pb-line);box-sizing:border-box}
.pb-row:hover{text-decoration:underline}.pb-row.open{outline:2px solid ${MIX("#0b5394")};outline-offset:-2px}
.pb-row .m{font-family:monospace;width:2.4em}.pb-row .i{font-weight:600;min-width:3em}
.pb-row .x{font-family:monospace}.pb-row .k{flex:1;overflow:hidden;text-overflow:ellipsis}
.pb-row .d{min-width:5em;text-align:right}
.pb-not_started{color:${MIX("#555555")}}.pb-in_progress{background:${TINT("#0b5394")};color:${MIX("#0b5394")}}
.pb-completed{background:${TINT("#2e7d32")};color:${MIX("#1b6e20")}}.pb-failed{background:${TINT("#b71c1c")};color:${MIX("#b71c1c")}}
.pb-skipped{background:${TINT("#6d6d6d")};color:${MIX("#6d6d6d")}}.pb-blocked{background:${TINT("#c77700")};color:${MIX("#8a5300")}}
.pb-pane{border:1px solid var(--jp-border-color1,#ccc);border-radius:4px;padding:6px 8px;margin:6px 0;background:var(--pb-bg);position:relative;overflow:hidden;contain:content}
.pb-pane table{border-collapse:collapse}.pb-pane th{text-align:left;color:var(--pb-fg2);padding:1px 8px 1px 0;vertical-align:top;font-weight:normal}
.pb-pane td{padding:1px 0;vertical-align:top}.pb-pane .mono{font-family:monospace;white-space:pre-wrap;word-break:break-all}
.pb-label{color:var(--pb-fg2);font-size:11px;margin-top:6px}
.pb-pre,.pb-text{font-family:monospace;white-space:pre-wrap;margin:2px 0;max-height:320px;overflow:auto;
  color:var(--pb-fg);background:var(--pb-bg);border:1px solid var(--pb-line);padding:4px}
.pb-err,.pb-pre.pb-err{color:${MIX("#b71c1c")}}.pb-trunc{color:${MIX("#8a5300")};font-style:italic;margin-top:4px}
.pb-result{max-height:400px;overflow:auto;position:relative;contain:content}.pb-result img{max-width:100%}
.pb-close{float:right;cursor:pointer;border:none;background:none;font-size:14px;color:var(--pb-fg2)}
.pb-svgbox{overflow:auto;max-height:440px;border:1px solid var(--pb-line)}
.pb-note{color:var(--pb-fg2);font-size:11px;margin:2px 0}
.planbook-revisions .planbook-removed{color:${MIX("#b71c1c")}}
.planbook-revisions .planbook-added{color:${MIX("#1b6e20")}}
.planbook-revisions ins{background:${TINT("#2e7d32")};text-decoration:none}
.planbook-revisions .planbook-revised{color:${MIX("#8a5300")}}
.pb-waiting{background:#fff3cd;color:#7a4f00;font-weight:600}
.pb-banner{background:#ffe8a3;color:#6b4500;border:1px solid #e0b000;border-radius:4px;padding:3px 8px;margin:4px 0;font-weight:600}
.pb-ctl{display:flex;gap:6px;align-items:center;margin:4px 0}
.pb-ctl button,.pb-row button,.pb-decide button{font:inherit;font-size:12px;padding:0 8px;cursor:pointer;border-radius:3px;
  border:1px solid #999;background:var(--jp-layout-color1,#fafafa);color:var(--pb-fg)}
.pb-row button{height:18px;line-height:16px}
.pb-ctl button:disabled{opacity:.6;cursor:default}
.pb-editor{width:100%;box-sizing:border-box;font-family:monospace;font-size:12px;min-height:3.5em}
.planbook-revisions ul{margin:2px 0 6px 0;padding-left:20px;list-style:none}
.pb-forkbox{border-top:1px dashed var(--pb-line);margin-top:6px;padding-top:4px}
.pb-forkbox button,.pb-forkopen{font:inherit;font-size:12px;padding:0 8px;cursor:pointer;border-radius:3px;
  border:1px solid #999;background:var(--jp-layout-color1,#fafafa);color:var(--pb-fg)}
.pb-removed{margin:4px 0}.pb-removed .pb-rrow{cursor:pointer;padding:1px 6px}.pb-removed .pb-rrow:hover{text-decoration:underline}
.pb-forkcode{font-family:monospace;white-space:pre-wrap;word-break:break-all;font-size:12px;
  color:var(--pb-fg);background:var(--pb-bg2);padding:3px 4px;margin:2px 0}
.pb-lineage{color:var(--pb-fg2)}
.pb-gone .pb-ctl,.pb-gone .pb-decide,.pb-gone .pb-forkbox,.pb-gone .pb-row button,.pb-gone [data-replay]{display:none}
`;

// ------------------------------------------------------------------ per-model store
// Panes and bars arrive in numbered batches; the store keeps them for every view of the
// model (a cell's output can be drawn again) together with what the user has open. It is
// found by the model's ``uid`` (anywidget hands initialize and each view a different proxy
// of the model, so the proxy itself cannot be the key).
const stores = new Map();

function storeOf(model) {
  const uid = model.get("uid");
  let store = stores.get(uid);
  if (!store) {
    store = { panes: {}, bars: {}, executions: {}, openExecution: null, seq: 0, asked: false, tab: "steps", follow: true, scroll: 0, 
      listeners: new Set(), requested: new Set() };
    stores.set(uid, store);
  }
  return store;
}

function applyBatch(model, store) {
  const batch = model.get("batch") || {};
  if (!batch.seq || batch.seq <= store.seq && !batch.full) return;
  if (batch.full) { store.panes = {}; store.bars = {}; store.executions = {}; }
  else if (batch.seq !== store.seq + 1 && !store.asked) {
    // a batch went by before this module was listening: ask for everything (the kernel
    // answers when it is free; meanwhile what arrives is kept)
    store.asked = true;
    model.send({ type: "resend" });
  }
  Object.assign(store.panes, batch.panes || {});
  Object.assign(store.bars, batch.bars || {});
  Object.assign(store.executions, batch.executions || {});  // panes of executions a step's pane does not show
  store.seq = batch.seq;
  store.listeners.forEach((fn) => fn());
}

// ------------------------------------------------------------------ the record, on a reloaded page
// When a run ends, the kernel updates its display to the run's static record by the display's id;
// a page reloaded during the run does not know that id, and keeps the widget (which, saved, says
// "model not found" without a kernel). The kernel then sets ``ended`` and keeps the widget open
// until a page says its notebook shows the record: a page whose notebook still shows the widget
// asks for the record and puts it in the widget's place, so the notebook saves the record.
const WIDGET_MIME = "application/vnd.jupyter.widget-view+json";

// [outputs, index] of every output of this page's notebook that shows the model (null: the page
// gives no way to its notebook, e.g. a front end other than JupyterLab or Notebook 7)
function outputsShowing(model) {
  const context = model.widget_manager && model.widget_manager.context;
  const cells = context && context.model && context.model.cells;
  if (!cells || typeof cells.get !== "function") return null;
  const uid = model.get("uid"), found = [];
  for (let c = 0; c < cells.length; c++) {
    const outputs = cells.get(c).outputs;
    if (!outputs || typeof outputs.set !== "function") continue;
    for (let i = 0; i < outputs.length; i++) {
      const shown = (outputs.get(i).data || {})[WIDGET_MIME];
      if (shown && shown.model_id === uid) found.push([outputs, i]);
    }
  }
  return found;
}

function keepRecord(model, store) {
  if (!model.get("ended") || store.recordAsked) return;
  const found = outputsShowing(model);
  if (found === null) { store.noRecord = true; store.listeners.forEach((fn) => fn()); return; }
  store.recordAsked = true;
  // none: the display update reached this page, which shows the record already (the kernel may close
  // the widget); else ask for the record
  model.send({ type: found.length ? "record" : "recorded" });
}

function onRecord(model, msg) {
  if (!msg || msg.type !== "record" || !msg.data) return;
  const found = outputsShowing(model) || [];
  for (const [outputs, index] of found)
    outputs.set(index, { output_type: "display_data", data: msg.data, metadata: {} });
  if (found.length) model.send({ type: "recorded" });
}

// ------------------------------------------------------------------ a fork started from this view
// The kernel started the child in the background (a Fork click arrives outside any cell, so the
// kernel has no output to show it in): its live view goes in a new output of the cell that shows
// this view, below it. When the child ends, its widget asks for its record (keepRecord) and the
// record takes that output's place, as for a page reloaded during a run.
function onForked(model, store, msg) {
  if (!msg || msg.type !== "forked") return;
  const found = outputsShowing(model) || [];
  if (msg.model_id && found.length) {
    const [outputs] = found[found.length - 1];
    outputs.add({ output_type: "display_data", metadata: {},
      data: { [WIDGET_MIME]: { model_id: msg.model_id, version_major: 2, version_minor: 1 }, "text/plain": msg.text } });
  }
  (store.forked = store.forked || {})[msg.step] = msg.model_id && found.length ? msg.text :
    `${msg.text.replace(" (its live view is below)", "")}: this page cannot show its live view here; ` +
    `planbook.runs() lists it`;
  store.forking = null;
  store.listeners.forEach((fn) => fn());
}

// ------------------------------------------------------------------ what a saved notebook keeps
// A widget saved in a notebook says "Error displaying widget" once its kernel is gone. While the
// notebook saves, each output showing a model that has a ``saved`` record holds that record (the
// file gets it), and the widget is put back once the file is written: the page stays live.
function keepOnSave(model, store) {
  const context = model.widget_manager && model.widget_manager.context;
  const signal = context && context.saveState;
  if (!signal || typeof signal.connect !== "function") return () => {};
  let swapped = [];
  const onSave = (_, state) => {
    // a run its kernel left (a restart): what the page said, and the run as it last drew it
    const saved = store.gone ? goneRecord(model, store) : model.get("saved") || {};
    if (state === "started" && saved["text/html"]) {
      swapped = (outputsShowing(model) || []).map(([outputs, index]) => {
        const old = outputs.get(index).toJSON();
        outputs.set(index, { output_type: "display_data", data: saved, metadata: {} });
        return [outputs, index, old];
      });
    } else if (state !== "started" && swapped.length) {
      for (const [outputs, index, old] of swapped) outputs.set(index, old);
      swapped = [];
      if (state === "completed" && context.model) context.model.dirty = false; // the file has what the page means
    }
  };
  signal.connect(onSave);
  return () => signal.disconnect(onSave);
}

// ------------------------------------------------------------------ a kernel gone during the run
// A kernel restart closes no comm: the widget manager marks each model's comm dead (``comm_live``
// false, which triggers "comm_live_update"); a kernel that died or restarts by itself shows in the
// session's status. A run that was going on is over then, and the kernel cannot send its record:
// the page says so, stops its clocks, and a save writes that message with the run as the page last
// drew it (goneRecord), never the widget, which would reopen as "Error displaying widget".
const GOING = ["running", "paused"];

function kernelGone(model, store, how) {
  if (store.gone || model.get("ended") || !GOING.includes((model.get("head") || {}).status)) return;
  store.gone = { how, at: performance.now() };
  store.listeners.forEach((fn) => fn());
}

function watchKernel(model, store) {
  const manager = model.widget_manager;
  const onLive = () => {  // the proxy anywidget hands us has no comm_live: the manager's model has
    const found = manager && typeof manager.get_model === "function" ? manager.get_model(model.get("uid")) : null;
    Promise.resolve(found).then((m) => { if (!m || !m.comm_live) kernelGone(model, store, "restarted"); },
      () => kernelGone(model, store, "restarted"));
  };
  model.on("comm_live_update", onLive);
  const context = manager && manager.context;  // (a name like a secret's would be masked on its way out)
  const signal = context && context.sessionContext && context.sessionContext.statusChanged;
  const onStatus = (_, status) => {
    if (status === "dead") kernelGone(model, store, "stopped");
    else if (status === "autorestarting") kernelGone(model, store, "restarted");
  };
  const connected = !!(signal && typeof signal.connect === "function" && signal.connect(onStatus));
  return () => { model.off("comm_live_update", onLive); if (connected) signal.disconnect(onStatus); };
}

// what the page says once the kernel is gone: how to continue the run, or what was lost
function goneWords(model, store) {
  const what = store.gone.how === "stopped" ? "the kernel stopped" : "the kernel restarted";
  if ((model.get("replay") || {}).line) return `${what} during this replay: nothing ran, the run itself is as it was`;
  const name = (model.get("head") || {}).id || "NAME", kept = model.get("kept");
  if (kept) return `${what} during this run; \`%run_plan ${name} --resume\` continues it (its run store: ${kept})`;
  return `${what} during this run, which no run store kept (%plan_store was off or in memory): its progress ` +
    `is lost. Below is how it stood; \`%run_plan ${name}\` runs it again from the start`;
}

const GONE_STYLE = "background:#ffe8a3;color:#6b4500;border:1px solid #e0b000;border-radius:4px;padding:3px 8px;margin:4px 0;font-weight:600";

// the run as the page last drew it, with the message above: what a save writes in the widget's place
function goneRecord(model, store) {
  const head = model.get("head") || {}, rows = model.get("rows") || [], statuses = model.get("statuses") || "";
  const words = goneWords(model, store);
  const elapsed = head.elapsed === null || head.elapsed === undefined ? null
    : head.elapsed + (head.status === "running" ? Math.max(0, store.gone.at - (store.headSeen || store.gone.at)) / 1000 : 0);
  const counts = ORDER.filter((k) => (head.counts || {})[k]).map((k) => `${head.counts[k]} ${k.replace("_", " ")}`).join(" · ");
  const progress = `Progress: ${head.done || 0}/${head.total || 0} steps completed · ${counts}` +
    (elapsed === null ? "" : ` · elapsed ${duration(elapsed)}`) + " (when the kernel went)";
  const title = `Plan: ${head.title || ""} (ID: ${head.id || ""}${head.revision > 1 ? " · revision " + head.revision : ""})`;
  const cell = "padding:1px 8px 1px 0;text-align:left;vertical-align:top";
  const shown = rows.slice(0, 1000), lines = [words, title, progress];
  const table = h("table", { style: "border-collapse:collapse;margin-top:4px" },
    h("tr", {}, ...["", "step", "", "task", "time"].map((t) => h("th", { style: cell, text: t }))),
    ...shown.map(([id, executor, task], i) => {
      const code = statuses[i] || "n", [name, mark] = STATUS[code], pane = store.panes[id] || {};
      const time = code === "r" ? "cut short" : pane.duration === null || pane.duration === undefined ? "" : duration(pane.duration);
      const error = pane.error ? String(pane.error) : "";
      lines.push(`${mark} ${id}: ${task}${time ? ` (${time})` : ""}${error ? ` — ${error}` : ""}`);
      return h("tr", { "data-step": id, class: `planbook-${name}` }, h("td", { style: cell, text: mark }),
        h("td", { style: cell + ";font-weight:600", text: id }), h("td", { style: cell + ";font-family:monospace", text: executor }),
        h("td", { style: cell, text: task }), h("td", { style: cell, text: time }),
        error ? h("td", { style: cell + ";color:#b71c1c", text: error }) : null);
    }));
  if (rows.length > shown.length) lines.push(`… and ${rows.length - shown.length} more steps`);
  const record = h("div", { class: "planbook-record planbook-gone-record mathjax_ignore tex2jax_ignore" },
    h("div", { class: "planbook-kernel-gone", style: GONE_STYLE, text: words }),
    h("div", { style: "font-weight:600", text: title }),
    head.goal ? h("div", { text: `Goal: ${head.goal}` }) : null,
    h("div", { text: progress }), table,
    rows.length > shown.length ? h("div", { text: `… and ${rows.length - shown.length} more steps` }) : null);
  return { "text/html": record.outerHTML, "text/plain": lines.join("\n") };
}

function initialize({ model }) {
  const store = storeOf(model);
  const offSave = keepOnSave(model, store);
  const offKernel = watchKernel(model, store);
  const onBatch = () => applyBatch(model, store);
  const onEnded = () => keepRecord(model, store);
  const onMsg = (msg) => { onRecord(model, msg); onForked(model, store, msg); };
  model.on("change:batch", onBatch);
  model.on("change:ended", onEnded);
  model.on("msg:custom", onMsg);
  onBatch();
  onEnded();
  return () => { model.off("change:batch", onBatch); model.off("change:ended", onEnded); model.off("msg:custom", onMsg); offSave(); offKernel(); };
}

// ------------------------------------------------------------------ helpers
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") el.className = v;
    else if (k === "text") el.textContent = v;
    else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v);
  }
  for (const c of children) if (c !== null && c !== undefined) el.append(c);
  return el;
}

const SVG = "http://www.w3.org/2000/svg";
function s(tag, attrs, text) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, v);
  if (text !== undefined) el.textContent = text;
  return el;
}

function plural(n, word) { return `${n} ${word}${n === 1 ? "" : "s"}`; }

function duration(sec) {
  if (sec === null || sec === undefined) return "";
  return sec < 1 ? (sec * 1000).toFixed(1) + " ms" : sec.toFixed(2) + " s";
}

// The timeline follows the record's rules (planbook/views/charts.py, its module docstring). Each
// constant here mirrors the Python one named beside it; tests/test_timeline_parity.py checks they match.
// bar and node fills, white text on each (WCAG AA): planbook.views.html.FILLS
const FILLS = { completed: "#2e7d32", failed: "#b71c1c", in_progress: "#0b5394", running: "#0b5394",
  not_started: "#616161", skipped: "#616161", blocked: "#8a5300", interrupted: "#8a5300", cached: "#5b3f99",
  waiting: "#8a5300" };
const MIN_BAR = 0.6;   // charts.MIN_BAR: the narrowest bar, in percent of the timeline's width
const MAX_BARS = 200;  // charts.MAX_BARS: executions drawn one by one; more are summarised
const BUCKETS = 100;   // charts.BUCKETS: the slices of time of a summary
const WORST = ["failed", "interrupted", "running", "cached", "completed"];  // charts._WORST: worst first
// charts.timeline_html: what a summarised timeline's caption says after "N executions, 1.23 s: "
const SUMMARY_WORDS = `too many to draw one by one, so the run's time is cut in ${BUCKETS} slices, each coloured by the worst status in it (side by side slices alike are one bar; a bar's title lists its steps)`;
const CRITICAL = "#ff9800";  // charts._CRITICAL: the critical path's underline
const CACHED_MARK = "⟲";     // marks.CACHED_MARK
const CHAR_W = 6.2;

// a label cut with an ellipsis to fit a bar `width` px wide ("" when nothing fits)
function clip(text, width) {
  const room = Math.floor((width - 6) / CHAR_W);
  if (room <= 0) return "";
  return text.length <= room ? text : room > 1 ? text.slice(0, room - 1) + "…" : "";
}

// charts.fit, for one lane of {x0, w} in percent, in time order: a bar starts at its time or where
// the bar before it ends, whichever is later; bars that would run past the end are pulled back
// (from the last) so the lane fits in 100 %
function fit(bars) {
  let left = 0;
  for (const b of bars) { b.x0 = Math.max(b.x0, left); left = b.x0 + b.w; }
  let limit = 100;
  for (let i = bars.length - 1; i >= 0; i--) {
    const b = bars[i];
    if (b.x0 + b.w <= limit) break;
    b.w = Math.max(MIN_BAR, Math.min(b.w, limit - b.x0));
    b.x0 = Math.max(0, limit - b.w);
    limit = b.x0;
  }
}

// charts._summary: BUCKETS equal slices of the run's time, each coloured by the worst status in it;
// slices alike side by side are one bar (up to a tenth of the run), their counts summed
function summarise(items, span) {
  const rank = Object.fromEntries(WORST.map((state, i) => [state, i]));
  const count = new Array(BUCKETS).fill(0), worst = new Array(BUCKETS).fill(WORST.length);
  const first = new Array(BUCKETS).fill(null), last = new Array(BUCKETS).fill("");
  const scale = BUCKETS / span, top = BUCKETS - 1;
  for (const it of items) {
    const r = rank[it.state];
    const k1 = Math.min(Math.floor(it.end * scale), top);
    for (let k = Math.min(Math.floor(it.start * scale), top); k <= k1; k++) {
      count[k]++;
      if (r < worst[k]) worst[k] = r;
      if (first[k] === null) first[k] = it.step;
      last[k] = it.step;
    }
  }
  const slices = [];
  for (let k = 0; k < BUCKETS;) {
    if (!count[k]) { k++; continue; }
    let end = k + 1;
    while (end < BUCKETS && end - k < Math.floor(BUCKETS / 10) && count[end] && worst[end] === worst[k]) end++;
    let n = 0;
    for (let j = k; j < end; j++) n += count[j];
    slices.push({ k, end, n, state: WORST[worst[k]], first: first[k], last: last[end - 1] });
    k = end;
  }
  return slices;
}

// charts._state: a bar's status
function barState(b) {
  if (b.end === null) return "running";
  if (b.interrupted) return "interrupted";
  return b.ok ? "completed" : "failed";
}

// charts.tick_label: as many decimals as the ticks' spacing needs (never two ticks reading "0.1 ms")
function tickLabel(t, step) {
  if (t === 0) return "0";
  if (t < 1) { const ms = step * 1000; return (t * 1000).toFixed(ms < 1 ? Math.max(1, Math.ceil(-Math.log10(ms) - 1e-9)) : 1) + " ms"; }
  return t.toFixed(step < 1 ? Math.max(2, Math.ceil(-Math.log10(step) - 1e-9)) : 2) + " s";
}

function linearTicks(span) {
  if (span <= 0) return [0];
  const raw = span / 6, power = Math.pow(10, Math.floor(Math.log10(raw)));
  const step = [1, 2, 5, 10].map((f) => f * power).find((v) => raw <= v) || 10 * power;
  const out = [];
  for (let i = 0; i * step <= span * (1 + 1e-9); i++) out.push(i * step);
  return out;
}

// ------------------------------------------------------------------ the fork's code line
// planbook/views/forkbox.py's py_literal and code_line, for the line as the person edits it
function pyLiteral(v) {
  if (v === null || v === undefined) return "None";
  if (v === true) return "True";
  if (v === false) return "False";
  if (typeof v === "number") return Number.isFinite(v) ? String(v) : `float(${JSON.stringify(String(v))})`;
  if (typeof v === "string") return JSON.stringify(v);
  if (Array.isArray(v)) return `[${v.map(pyLiteral).join(", ")}]`;
  const keys = Object.keys(v);
  if (keys.length === 1 && keys[0] === "$secret" && typeof v.$secret === "string")
    return `planbook.Secret.from_ref(${JSON.stringify(v.$secret)})`;
  return `{${keys.map((k) => `${JSON.stringify(k)}: ${pyLiteral(v[k])}`).join(", ")}}`;
}

// whether the arguments a step holds are the ones an editor saved (JSON text; keys in any order)
function sameArgs(args, text) {
  const canon = (v) => Array.isArray(v) ? v.map(canon)
    : v && typeof v === "object" ? Object.keys(v).sort().map((k) => [k, canon(v[k])]) : v;
  try { return JSON.stringify(canon(args)) === JSON.stringify(canon(JSON.parse(text))); } catch (e) { return false; }
}

// a call as its pane shows it, from its arguments as the editor edits them: summarize(text="…")
function callOf(tool, args) {
  return `${tool}(${Object.entries(args || {}).map(([k, v]) => `${k}=${pyLiteral(v)}`).join(", ")})`;
}

function forkCode(fork, id, pane, draft) {
  const parts = [JSON.stringify(fork.run), `at=${JSON.stringify(id)}`];
  try {
    if (draft.result.trim()) parts.push(`result=${pyLiteral(JSON.parse(draft.result))}`);
    else if (pane.args !== undefined) parts.push(`args=${pyLiteral(JSON.parse(draft.args))}`);
  } catch (e) {
    return `(not JSON yet: ${e.message})`;
  }
  if (fork.store) parts.push(`store=${JSON.stringify(fork.store)}`);
  return `planbook.fork(${parts.join(", ")})`;
}

// ------------------------------------------------------------------ the view
function render({ model, el }) {
  const store = storeOf(model);
  el.classList.add("planbook-live", "mathjax_ignore", "tex2jax_ignore");
  const root = h("div", { class: "pb-root" });
  root.append(h("style", { text: CSS }));
  const header = h("div", { class: "pb-header" });
  const tabs = h("div", { class: "pb-tabs", role: "tablist" });
  const body = h("div", { class: "pb-body" });
  const paneBox = h("div", { class: "pb-panebox" });
  const decisionsBox = h("div", { class: "planbook-decisions-box" });
  const revisions = h("div", { class: "planbook-revisions" });
  root.append(header, tabs, body, paneBox, decisionsBox, revisions);
  el.append(root);

  // --- steps: a virtual list (only the rows in view are in the DOM)
  const scroll = h("div", { class: "pb-scroll", "data-view": "steps" });
  const spacer = h("div", { style: "position:relative" });
  scroll.append(spacer);
  const timeline = h("div", { class: "pb-svgbox", "data-view": "timeline" });
  const graph = h("div", { class: "pb-svgbox", "data-view": "graph" });
  const views = { steps: scroll, timeline, graph };
  for (const name of ["steps", "timeline", "graph"]) {
    const label = name[0].toUpperCase() + name.slice(1);
    tabs.append(h("button", { class: "pb-tab", "data-tab": name, role: "tab", text: label,
      onclick: () => { store.tab = name; draw(); } }));
  }
  // the steps each replan removed, under their revision (a click opens the pane of its last execution)
  const removedBox = h("div", { class: "pb-removed planbook-removed-steps-box", "data-view": "removed" });
  body.append(scroll, removedBox, timeline, graph);

  let programmatic = false;
  scroll.addEventListener("scroll", () => {
    if (programmatic) { programmatic = false; return; }
    store.scroll = scroll.scrollTop;
    store.follow = false; // the user scrolled: stop following the running steps
    drawRows();
  });

  // a bar whose execution has a pane of its own (an earlier attempt, a step a replan removed) opens it;
  // else the bar is its step's latest execution, whose pane is the step's
  const openBar = (id, n) => {
    if (n === null || n === undefined || !store.executions[n]) { open(id); return; }
    store.openExecution = store.openExecution === n ? null : n;
    if (model.get("selected")) { model.set("selected", ""); model.save_changes(); }
    drawRows(); drawPane();
  };

  const open = (id) => {
    store.openExecution = null;
    const now = model.get("selected") === id ? "" : id;
    model.set("selected", now);
    model.save_changes();
    drawRows(); drawPane();
    if (store.tab === "graph") drawGraph();
  };

  // a decision or control goes to the kernel (it arrives once no cell is running there)
  function send(action, step, args) {
    model.send({ type: "control", action, step: step || "", args });
  }

  // the buttons a step offers: Approve / Skip / Edit while it waits; Edit or Retry in a paused run
  function decideButtons(id, waits) {
    const stop = (fn) => (e) => { e.stopPropagation(); fn(); };
    const edit = h("button", { "data-decide": "edit", text: "Edit", onclick: stop(() => {
      store.editing = id;
      if (model.get("selected") !== id) open(id); else drawPane();
    }) });
    if (waits) return [
      h("button", { "data-decide": "approve", text: "Approve", onclick: stop(() => send("approve", id)) }),
      h("button", { "data-decide": "skip", text: "Skip", onclick: stop(() => send("skip", id)) }), edit];
    if (id in (model.get("editable") || {})) return [edit];
    if ((model.get("retryable") || []).includes(id))
      return [h("button", { "data-decide": "retry", text: "Retry", onclick: stop(() => send("retry", id)) })];
    return [];
  }

  function rowsAndStatus() {
    const rows = model.get("rows") || [];
    const statuses = model.get("statuses") || "";
    return [rows, statuses];
  }

  // a Stop or Pause given here or taken by the run, until the run shows it (it ends, or pauses):
  // the buttons that no longer apply are off meanwhile. A refused control clears it.
  function runPending(head) {
    const mine = store.pending;
    if (mine && (head.status !== mine.status || (model.get("errors") || {})[""])) store.pending = null;
    if (store.pending && store.pending.action !== "continue") return store.pending.action;
    const decisions = model.get("decisions") || [];
    for (let i = decisions.length - 1; i >= 0; i--) {
      const what = decisions[i][0];
      if (what === "stop") return "stop";
      if (what === "pause" && head.status === "running") return "pause";
      if (what === "pause" || what === "resume") return null;
    }
    return null;
  }

  function drawHeader() {
    const head = model.get("head") || {};
    const done = head.done || 0, total = head.total || 0;
    const pct = total ? (done / total) * 100 : 0;
    const tone = head.status ? head.tone : "info";
    const counts = ORDER.filter((k) => (head.counts || {})[k]).map((k) => `${head.counts[k]} ${k.replace("_", " ")}`).join(" · ");
    const parts = [
      h("div", { class: "pb-title" }, `Plan: ${head.title || ""} `,
        h("span", { class: "pb-dim", text: `(ID: ${head.id || ""}${head.revision > 1 ? " · revision " + head.revision : ""})` })),
    ];
    if (head.goal) parts.push(h("div", {}, h("b", { text: "Goal: " }), head.goal));
    if (head.lineage) parts.push(h("div", { class: "pb-lineage planbook-lineage", text: `↳ ${head.lineage}` }));
    const replay = model.get("replay") || {};
    if (replay.line) parts.push(h("div", { class: "pb-replay planbook-replay" }, replay.line, replay.next ? " " : null,
      replay.next ? h("button", { "data-replay": "next", text: "Next", onclick: () => model.send({ type: "replay", action: "next" }) }) : null));
    const bar = h("div", { class: `pb-bar ${head.status && head.status !== "running" ? tone : ""}`,
      title: `${done}/${total} steps completed` }, h("div", { style: `width:${pct.toFixed(1)}%` }));
    parts.push(bar);
    let line = `Progress: ${done}/${total} steps completed · ${counts}`;
    if (head.budgets) line += ` · ${head.budgets}`;
    if (head.elapsed !== null && head.elapsed !== undefined) {
      // while running, moved on by the browser's clock since the kernel's last update
      const moved = head.status === "running" ? Math.max(0, clock() - store.headSeen) / 1000 : 0;
      line += ` · elapsed ${duration(head.elapsed + moved)}`;
    }
    const countsLine = h("div", { class: "pb-counts", text: line, title: head.elapsed_means || null });
    if (head.cached_count) countsLine.append(" · ", h("span", { class: "pb-cached-count planbook-cached-count",
      title: "steps answered from the step cache or a resumed run: their tools did not run here",
      text: `${CACHED_MARK} ${head.cached_count}` }));
    parts.push(countsLine);
    if (head.waiting && !store.gone) parts.push(h("div", { class: "pb-banner planbook-waiting-banner",
      text: `Waiting for you: ${head.waiting} step${head.waiting > 1 ? "s" : ""} (${Object.keys(model.get("waiting") || {}).join(", ")}) · approve, skip or edit below` }));
    const going = !store.gone && (head.status === "running" || head.status === "paused");
    const pending = going ? runPending(head) : null;
    if (model.get("controls") && going) {
      const ctl = h("div", { class: "pb-ctl planbook-controls" });
      const control = (action, text, off) => h("button", { "data-control": action, text, disabled: off,
        onclick: () => { store.pending = { action, status: head.status }; drawHeader(); send(action); } });
      if (head.status === "running") ctl.append(control("pause", pending === "pause" ? "Pausing…" : "Pause", !!pending));
      else ctl.append(control("continue", "Continue", !!pending));
      ctl.append(control("stop", pending === "stop" ? "Stopping…" : "Stop", pending === "stop"));
      const error = (model.get("errors") || {})[""];
      if (error) ctl.append(h("span", { class: "pb-err", text: error }));
      parts.push(ctl);
    }
    if (store.gone) {  // the run's kernel is gone: no verdict will come
      parts.push(h("div", { class: "pb-banner planbook-kernel-gone", text: goneWords(model, store) }));
    } else if (head.status && head.status !== "running") {
      parts.push(h("div", { class: `pb-verdict planbook-verdict ${tone}`, text: head.verdict }));
      if (head.why) parts.push(h("div", { class: `pb-verdict ${tone}`, style: "font-weight:normal", text: head.why }));
      if (head.error) parts.push(h("div", { class: `pb-verdict ${tone}`, style: "font-weight:normal",
        text: (head.status === "completed" ? "Note: " : "Error: ") + head.error }));
    } else if (pending) {
      parts.push(h("div", { class: `pb-verdict info planbook-${pending === "stop" ? "stopping" : "pausing"}`,
        style: "font-weight:normal", text: pending === "stop" ? "stopping… (steps already running finish first)"
          : "pausing… (steps already running finish first)" }));
    } else if (head.status === "running") {
      parts.push(h("div", { class: "pb-verdict info", style: "font-weight:normal", text: "running…" }));
    }
    if (store.noRecord && model.get("ended")) parts.push(h("div", { class: "pb-banner planbook-no-record",
      text: "This run has ended, but this page cannot replace its live view with the run's record (the page was " +
        "reloaded during the run). To keep how it ended in the notebook, show the result in a new cell: " +
        "print(result), or planbook show RUN_ID for a stored run." }));
    header.replaceChildren(...parts);
  }

  function stepTime(id, code) {
    const pane = store.panes[id];
    if (!pane) return "";
    if (pane.duration !== null && pane.duration !== undefined && code !== "r") return duration(pane.duration);
    const head = model.get("head") || {};
    if (code === "r" && pane.start !== null && head.now !== null && head.now !== undefined) {
      // the kernel's time at its last update, moved on by the browser's clock since then
      const now = head.now + Math.max(0, clock() - store.headSeen) / 1000;
      return duration(Math.max(0, now - pane.start)) + (store.gone ? " · cut short" : "…");
    }
    return "";
  }

  function drawRows() {
    const [rows, statuses] = rowsAndStatus();
    const n = rows.length;
    const height = Math.min(n, VISIBLE_ROWS) * ROW_H + 2;
    scroll.style.height = `${height}px`;
    spacer.style.height = `${n * ROW_H}px`;
    if (store.follow) {
      let at = statuses.indexOf("r");
      if (at < 0) { at = statuses.length - 1; while (at > 0 && statuses[at] === "n") at--; }
      const top = Math.max(0, Math.min(at * ROW_H - ROW_H * 3, n * ROW_H - height + 2));
      if (Math.abs(scroll.scrollTop - top) > 1) { programmatic = true; scroll.scrollTop = top; }
      store.scroll = top;
    } else if (Math.abs(scroll.scrollTop - store.scroll) > 1) {
      programmatic = true; scroll.scrollTop = store.scroll;
    }
    const first = Math.max(0, Math.floor(store.scroll / ROW_H) - 4);
    const last = Math.min(n, first + VISIBLE_ROWS + 8);
    const selected = model.get("selected");
    const waiting = model.get("waiting") || {};
    const cachedSteps = (model.get("head") || {}).cached || {};
    const items = [];
    for (let i = first; i < last; i++) {
      const [id, executor, task, needs] = rows[i];
      const code = statuses[i] || "n";
      const [name, mark] = STATUS[code];
      const cached = cachedSteps[id];
      const waits = (code === "n" || code === "w") && id in waiting;
      const row = h("div", { class: `pb-row planbook-step pb-${name} planbook-${name}${waits ? " pb-waiting planbook-waiting" : ""}${id === selected ? " open" : ""}` +
        (cached ? " planbook-step-cached" : ""),
        "data-step": id, style: `top:${i * ROW_H}px`, title: needs.length ? `needs ${needs.join(", ")}` : null,
        onclick: () => open(id) },
        h("span", { class: "m", text: waits || code === "w" ? "[?]" : mark }),
        cached ? h("span", { class: "c planbook-cached", title: cached[1], text: CACHED_MARK }) : null,
        h("span", { class: "i", text: id }),
        h("span", { class: "x", text: executor }), h("span", { class: "k", text: waits ? `waiting for you: ${task}` : task }),
        ...(waits ? decideButtons(id, true) : []),
        h("span", { class: "d", text: cached ? cached[0] : stepTime(id, code) }));
      items.push(row);
    }
    spacer.replaceChildren(...items);
    drawRemoved();
  }

  function drawRemoved() {
    const groups = (model.get("head") || {}).removed || [];
    removedBox.replaceChildren(...groups.map(([revision, why, steps]) => h("div",
      { class: "planbook-removed-steps", "data-revision": revision },
      h("div", { class: "pb-label", text: `removed in revision ${revision}` + (why ? ` (after: ${why})` : "") }),
      ...steps.map(([id, line, n]) => {
        const ran = n !== null && n !== undefined;
        const ex = ran ? store.executions[n] : null;
        const mark = ex ? (STATUS[{ completed: "c", failed: "f" }[ex.status] || "n"] || [])[1] || "" : "";
        return h("div", { class: `pb-rrow planbook-removed-step${ex ? " pb-" + ex.status : ""}` +
          (ran && store.openExecution === n ? " open" : ""), "data-step": id, "data-execution": ran ? n : null,
          onclick: ran ? () => openBar(id, n) : null },
          `${mark ? mark + " " : ""}${id}: ${line}`, ran ? "" : h("span", { class: "pb-dim", text: " (never ran)" }));
      }))));
  }

  function paneRow(label, value, cls) {
    return h("tr", {}, h("th", { text: label }), h("td", { class: cls || "" }, value));
  }

  // Fork from here (a finished step of a background run): the arguments as Edit edits them, a box
  // to pin a result instead, and the line of Python the fork runs (planbook/views/forkbox.py)
  function forkPart(id, pane) {
    const fork = model.get("fork") || {};
    const error = (model.get("errors") || {})["fork:" + id] || "";
    const done = (store.forked || {})[id];
    const box = h("div", { class: "pb-forkbox planbook-forkbox", "data-step": id });
    if (store.forking !== id) {
      box.append(h("button", { class: "pb-forkopen", "data-fork": "open", text: "Fork from here",
        title: "a new run from this step: what if it had other arguments, or returned something else?",
        onclick: () => { store.forking = id; drawPane(); } }));
      if (done) box.append(" ", h("span", { class: "pb-note planbook-forked", text: done }));
      return box;
    }
    const drafts = (store.forkDrafts = store.forkDrafts || {});
    const draft = drafts[id] = drafts[id] || { args: pane.args === undefined ? "" : JSON.stringify(pane.args, null, 1),
      result: "" };
    const code = h("div", { class: "pb-forkcode planbook-fork-code" });
    const update = () => { code.textContent = forkCode(fork, id, pane, draft); };
    const area = (cls, key, placeholder) => {
      const a = h("textarea", { class: `pb-editor ${cls}`, "data-step": id, spellcheck: "false", placeholder });
      a.value = draft[key];
      a.addEventListener("input", () => { draft[key] = a.value; update(); });
      return a;
    };
    if (pane.args !== undefined)
      box.append(h("div", { class: "pb-label", text: "fork with new arguments (JSON), checked against the tool's signature" }),
        area("planbook-fork-args", "args"));
    box.append(h("div", { class: "pb-label", text: "or pin what the step returned (JSON; leave empty to run it again)" }),
      area("planbook-fork-result", "result", "e.g. [] or \"a pinned answer\""),
      h("div", { class: "pb-label", text: "the fork runs (in the background; its live view goes below):" }), code,
      h("div", {}, h("button", { "data-fork": "go", text: "Fork", onclick: () => model.send({ type: "fork", step: id,
          args: pane.args === undefined ? "" : draft.args, result: draft.result }) }),
        " ", h("button", { "data-fork": "cancel", text: "Cancel", onclick: () => { store.forking = null; drawPane(); } })),
      h("div", { class: "pb-err planbook-fork-error", text: error }));
    update();
    return box;
  }

  // one execution's pane (a click on its bar, or on a removed step): call, result or traceback, output, times
  function drawExecution(n) {
    const pane = store.executions[n];
    const table = h("table", {},
      paneRow("status", pane.status.replace("_", " ") + (pane.attempt > 1 ? `, attempt ${pane.attempt}` : ""),
        `pb-${pane.status}`),
      paneRow("call", pane.call || pane.step, "mono"));
    if (pane.task) table.append(paneRow("task", pane.task));
    if (pane.needs) table.append(paneRow("needs", pane.needs.join(", ")));
    if (pane.start !== null && pane.start !== undefined) {
      let t = `started +${duration(pane.start)}`;
      if (pane.end !== null && pane.end !== undefined) t += `, ended +${duration(pane.end)} (${duration(pane.duration)})`;
      table.append(paneRow("time", t));
    }
    if (pane.error) table.append(paneRow("error", pane.error, "pb-err"));
    if (pane.notes) table.append(paneRow("notes", pane.notes));
    const parts = [h("button", { class: "pb-close", title: "close", text: "✕", onclick: () => openBar(pane.step, n) }),
      h("b", { text: `Execution #${pane.execution}: step ${pane.step}, revision ${pane.revision}` +
        (pane.worker ? `, ${pane.worker}` : "") }), table];
    if (pane.result !== undefined) {
      const box = h("div", { class: "pb-result" });
      box.innerHTML = pane.result; // HTML made by the kernel's display formatter, through the sanitiser
      parts.push(h("div", { class: "pb-label", text: "returned" }), box);
    }
    if (pane.output) parts.push(h("div", { class: "pb-label", text: "printed" }), h("pre", { class: "pb-pre", text: pane.output }));
    if (pane.traceback) parts.push(h("div", { class: "pb-label", text: "traceback" }),
      h("pre", { class: "pb-pre pb-err", text: pane.traceback }));
    if (pane.truncated) parts.push(h("div", { class: "pb-trunc", text: pane.truncated }));
    paneBox.replaceChildren(h("div", { class: "pb-pane pb-execution-pane", "data-pane": pane.step,
      "data-execution": String(n) }, ...parts));
  }

  function drawPane() {
    const id = model.get("selected");
    if (!id && store.openExecution !== null && store.executions[store.openExecution]) {
      drawExecution(store.openExecution); return;
    }
    if (!id) { paneBox.replaceChildren(); return; }
    const [rows, statuses] = rowsAndStatus();
    const index = rows.findIndex((r) => r[0] === id);
    if (index < 0) { paneBox.replaceChildren(); return; }
    const [, executor, task, needs] = rows[index];
    const [status, mark] = STATUS[statuses[index] || "n"];
    const pane = store.panes[id] || {};
    const waiting = model.get("waiting") || {};
    const error = (model.get("errors") || {})[id] || "";
    const editable = model.get("editable") || {};
    const argsOf = id in waiting ? waiting[id] : editable[id];
    if (argsOf === undefined && store.editing === id) store.editing = null;
    // saved: the editor closes once the step holds the saved arguments; a refused edit keeps it open, saying why
    if (store.editing === id && argsOf !== undefined && id in (store.saved || {}) && sameArgs(argsOf, store.saved[id])) {
      store.editing = null;
      delete store.saved[id];
      if (store.drafts) delete store.drafts[id];
    }
    const editor = paneBox.querySelector("textarea.pb-editor");
    if (store.editing === id && editor && document.activeElement === editor && editor.dataset.step === id) {
      // the person is typing: keep the editor as it is, show only the latest error
      const shown = paneBox.querySelector(".planbook-edit-error");
      if (shown) shown.textContent = error;
      return;
    }
    const forkBox = paneBox.querySelector(".planbook-forkbox");
    if (store.forking === id && forkBox && forkBox.dataset.step === id && forkBox.contains(document.activeElement) &&
        document.activeElement.tagName === "TEXTAREA") {
      const shown = forkBox.querySelector(".planbook-fork-error");
      if (shown) shown.textContent = (model.get("errors") || {})["fork:" + id] || "";
      return;
    }
    const table = h("table", {},
      paneRow("status", pane.status_text || `${mark} ${status}`, `pb-${status}`),
      paneRow("call", pane.call || (argsOf ? callOf(executor, argsOf) : `${executor} ${task}`), "mono"));
    if (pane.task) table.append(paneRow("task", pane.task));
    if (needs.length) table.append(paneRow("needs", needs.join(", ")));
    if (pane.expect) table.append(paneRow("expect", pane.expect));
    if (pane.attempts) table.append(paneRow("attempts", String(pane.attempts)));
    if (pane.cached) table.append(paneRow("not run", pane.cached, "pb-cachedrow"));
    else if (pane.start !== null && pane.start !== undefined) {
      let t = `started +${duration(pane.start)}`;
      if (pane.end !== null && pane.end !== undefined) t += `, ended +${duration(pane.end)} (${duration(pane.duration)})`;
      table.append(paneRow("time", t));
    }
    if (pane.error) table.append(paneRow("error", pane.error, "pb-err"));
    if (pane.notes) table.append(paneRow("notes", pane.notes));
    const parts = [h("button", { class: "pb-close", title: "close", text: "✕", onclick: () => open(id) }),
      h("b", { text: `Step ${id}` }), table];
    if (pane.result !== undefined) {
      const box = h("div", { class: "pb-result" });
      box.innerHTML = pane.result; // HTML made by the kernel's display formatter (scripts do not run)
      parts.push(h("div", { class: "pb-label", text: "returned" }), box);
    }
    if (pane.output) parts.push(h("div", { class: "pb-label", text: "printed" }), h("pre", { class: "pb-pre", text: pane.output }));
    if (pane.traceback) parts.push(h("div", { class: "pb-label", text: "traceback" }),
      h("pre", { class: "pb-pre pb-err", text: pane.traceback }));
    const offered = decideButtons(id, id in waiting);
    if (offered.length) {
      const label = id in waiting ? "waiting for your decision" : "the run is paused: you can change this step";
      const decide = h("div", { class: "pb-decide planbook-decide" },
        h("div", { class: "pb-label", text: label }), ...offered);
      if (store.editing === id) {
        const area = h("textarea", { class: "pb-editor planbook-editor", "data-step": id, spellcheck: "false" });
        area.value = (store.drafts || {})[id] ?? JSON.stringify(argsOf, null, 1);
        area.addEventListener("input", () => { (store.drafts = store.drafts || {})[id] = area.value; });
        decide.append(h("div", { class: "pb-label", text: "new arguments (JSON), checked against the tool's signature" }), area,
          // a waiting step runs once saved; a paused run's step waits for Continue (the button says which)
          h("div", {}, h("button", { "data-decide": "save", text: id in waiting ? "Save and run" : "Save",
            onclick: () => { (store.saved = store.saved || {})[id] = area.value; send("edit", id, area.value); drawPane(); } }),
            " ", h("button", { "data-decide": "cancel", text: "Cancel", onclick: () => { store.editing = null; drawPane(); } })));
      }
      decide.append(h("div", { class: "pb-err planbook-edit-error", text: error }));
      parts.push(decide);
    } else if (!store.panes[id]) { // a step far from the running ones: its pane is built when asked for
      const ran = (statuses[index] || "n") !== "n";
      if (ran && !store.requested.has(id)) { store.requested.add(id); model.send({ type: "pane", step: id }); }
      parts.push(h("div", { class: "pb-note", text: ran ? "loading… (the kernel sends this pane once the cell is not busy)" : "not run yet" }));
    }
    if (pane.truncated) parts.push(h("div", { class: "pb-trunc", text: pane.truncated }));
    if (pane.fork && (model.get("fork") || {}).run) parts.push(forkPart(id, pane));
    paneBox.replaceChildren(h("div", { class: "pb-pane", "data-pane": id }, ...parts));
  }

  function drawTimeline() {
    const head = model.get("head") || {};
    // [step, attempt, revision, worker, start, end, ok, interrupted, execution], keyed by place in the timeline
    const bars = Object.values(store.bars).map((b) => ({ n: b[8], step: b[0], attempt: b[1], revision: b[2],
      worker: b[3], start: b[4], end: b[5], ok: b[6], interrupted: !!b[7] }));
    bars.sort((a, b) => a.start - b.start || a.n - b.n);
    const cached = Object.entries(head.cached || {}).filter(([, c]) => c[2] !== null && c[2] !== undefined)
      .map(([step, c]) => ({ step, kind: c[0], why: c[1], at: c[2] }));
    if (!bars.length && !cached.length) {
      timeline.replaceChildren(h("div", { class: "pb-note", text: "No step has run yet." })); return;
    }
    const now = head.now !== null && head.now !== undefined ? head.now : null;
    const endOf = (b) => (b.end === null ? Math.max(now === null ? b.start : now, b.start) : b.end);
    const items = bars.map((b) => ({ start: Math.max(0, b.start), end: Math.max(0, endOf(b)), step: b.step,
      state: barState(b), bar: b }))
      .concat(cached.map((c) => ({ start: Math.max(0, c.at), end: Math.max(0, c.at), step: c.step, state: "cached",
        cached: c })));
    items.sort((a, b) => a.start - b.start);
    // charts.timeline_html: the scale starts at the first start (not at the run's first event)
    const first = items.reduce((least, it) => Math.min(least, it.start), Infinity);
    const span = items.reduce((most, it) => Math.max(most, it.end - first), 1e-6);  // (no spread: a long run has 100k)
    const W = 760, left = 8, right = W - 12, laneH = 18, top = 20;
    const px = (pct) => left + pct / 100 * (right - left);
    const x = (t) => px(Math.max(0, t - first) / span * 100);  // a run time on the scale
    const withCached = cached.length ? `, ${cached.length} answered without running (${CACHED_MARK})` : "";
    const svg = s("svg", { class: "pb-gantt planbook-timeline", width: W });
    const legend = h("div", { class: "pb-note", text: "Bars: green completed, red failed, blue running, amber " +
      "interrupted, purple ⟲ answered from the cache or a resume; ↻ a retry; dashed line: a replan; underlined " +
      "orange: the critical path. One linear time scale; hover a bar for its times, click it to open its execution (the latest of a step opens the step)." });
    let axisY, height;
    if (items.length > MAX_BARS) {
      // rule 8 (charts.timeline_html): summarised, in the record's words
      svg.setAttribute("data-scale", "summary");
      const caption = `${bars.length.toLocaleString("en-US")} executions${withCached}, ${duration(span)}: ${SUMMARY_WORDS}`;
      svg.append(s("text", { x: 2, y: 12, "font-size": 11, style: "fill:var(--pb-fg)" }, caption));
      const shifted = items.map((it) => ({ ...it, start: it.start - first, end: it.end - first }));
      for (const slice of summarise(shifted, span)) {
        const g = s("g", { class: `pb-bar-ex pb-slice pb-${slice.state}`, "data-step": slice.first });
        g.append(s("title", {}, `${plural(slice.n, "execution")}, steps ${slice.first}..${slice.last}, ` +
          `+${duration(slice.k * span / BUCKETS)} → +${duration(slice.end * span / BUCKETS)}` +
          (slice.state !== "completed" ? `, worst: ${slice.state}` : "")));
        g.append(s("rect", { x: px(slice.k), y: top, width: px(slice.end) - px(slice.k), height: laneH - 4,
          style: `fill:${FILLS[slice.state]}` }));
        g.style.cursor = "pointer";
        g.addEventListener("click", () => open(slice.first));
        svg.append(g);
      }
      axisY = top + laneH + 2;
      height = axisY + 20;
    } else {
      // rules 1-7: one linear scale; lanes by real overlap in time (an execution goes in the first lane
      // whose last one ended by its start: a serial run is one lane); bars at least MIN_BAR wide, placed
      // by charts.fit; the critical path marked unless it is every bar (a serial run)
      const critical = new Set(head.critical || []);
      const keep = critical.size < bars.length ? critical : new Set();
      const ends = [], lanes = [];
      for (const it of items) {
        let lane = ends.findIndex((end) => end <= it.start);
        if (lane < 0) { lane = ends.length; ends.push(0); lanes.push([]); }
        ends[lane] = Math.max(it.end, it.start);
        it.lane = lane;
        it.x0 = (it.start - first) / span * 100;
        it.w = Math.max((it.end - it.start) / span * 100, MIN_BAR);
        lanes[lane].push(it);
      }
      lanes.forEach(fit);
      axisY = top + lanes.length * laneH + 2;
      // revision markers (rule 6): a label goes on the first row where it does not overlap another
      const starts = new Map();
      for (const b of bars) if (b.revision > 1 && (!starts.has(b.revision) || b.start < starts.get(b.revision)))
        starts.set(b.revision, b.start);
      const rowEnds = [], markers = [];
      for (const revision of [...starts.keys()].sort((a, b) => a - b)) {
        const mx = x(starts.get(revision)), width = `revision ${revision}`.length * CHAR_W + 6;
        let row = rowEnds.findIndex((end) => end <= mx);
        if (row < 0) { row = rowEnds.length; rowEnds.push(0); }
        rowEnds[row] = mx + width;
        markers.push([row, mx, revision]);
      }
      const markerTop = axisY + 20;
      height = markerTop + rowEnds.length * 12 + 6;
      svg.setAttribute("data-scale", "linear");
      const caption = `${plural(bars.length, "execution")} in ${plural(lanes.length, "lane")}${withCached}, ${duration(span)}` +
        (first > 0 ? ` from the first start (+${duration(first)}); the axis counts from there` : "");
      svg.append(s("text", { x: 2, y: 12, "font-size": 11, style: "fill:var(--pb-fg)" }, caption));
      for (const it of items) {
        const y = top + it.lane * laneH, bx = px(it.x0), bw = px(it.x0 + it.w) - bx;
        const g = s("g", {});
        let label, onPath = false;
        if (it.cached) {
          const c = it.cached;
          g.setAttribute("class", "pb-bar-cached pb-cached");
          g.setAttribute("data-step", c.step);
          g.append(s("title", {}, `${c.step} ${CACHED_MARK} ${c.why} (taken at +${duration(c.at)})`));
          label = `${CACHED_MARK} ${c.step}`;
        } else {
          const b = it.bar;
          onPath = keep.has(b.n);
          g.setAttribute("class", `pb-bar-ex pb-${it.state}${onPath ? " pb-critical" : ""}`);
          g.setAttribute("data-step", b.step);
          g.setAttribute("data-execution", b.n);
          g.append(s("title", {}, `#${b.n} step ${b.step}, attempt ${b.attempt}, revision ${b.revision}` +
            `${b.worker ? ", " + b.worker : ""}: +${duration(it.start)} → +${duration(it.end)} ` +
            `(${duration(it.end - it.start)}, ${it.state})` + (onPath ? " · critical path" : "")));
          label = `${b.attempt > 1 ? `${b.step} ↻${b.attempt}` : b.step} ${duration(it.end - it.start)}`;
        }
        g.append(s("rect", { x: bx, y, width: bw, height: laneH - 4, rx: 2, style: `fill:${FILLS[it.state]}` }));
        const text = clip(label, bw);
        if (text) g.append(s("text", { x: bx + 3, y: y + 10, "font-size": 10, class: "pb-on-bar",
          style: "fill:#fff;pointer-events:none" }, text));
        if (onPath) g.append(s("line", { class: "pb-critical-mark", x1: bx, x2: bx + bw, y1: y + laneH - 2.5,
          y2: y + laneH - 2.5, style: `stroke:${CRITICAL};stroke-width:3` }));
        g.style.cursor = "pointer";
        g.addEventListener("click", () => (it.cached ? open(it.step) : openBar(it.step, it.bar.n)));
        svg.append(g);
      }
      for (const [row, mx, revision] of markers) {
        const g = s("g", { class: "pb-replan" });
        g.append(s("title", {}, `revision ${revision} starts here (a replan)`));
        g.append(s("line", { x1: mx, x2: mx, y1: top - 4, y2: markerTop + row * 12 + 2,
          style: `stroke:${MIX("#b26a00")};stroke-dasharray:4 3` }));
        g.append(s("text", { x: mx + 2, y: markerTop + row * 12 + 9, "font-size": 10, style: `fill:${MIX("#b26a00")}` },
          `revision ${revision}`));
        svg.append(g);
      }
    }
    svg.setAttribute("height", height);
    svg.setAttribute("viewBox", `0 0 ${W} ${height}`);
    svg.append(s("line", { x1: left, x2: right, y1: axisY, y2: axisY, style: "stroke:var(--pb-fg)" }));
    let lastLabel = -1e9;
    const ticks = linearTicks(span), tickStep = ticks.length > 1 ? ticks[1] - ticks[0] : span;
    for (const t of ticks) {
      const tx = x(t + first), text = tickLabel(t, tickStep);
      svg.append(s("line", { class: "pb-tick", x1: tx, x2: tx, y1: axisY, y2: axisY + 4, style: "stroke:var(--pb-fg)" }));
      if (tx - lastLabel >= text.length * CHAR_W + 8) {
        svg.append(s("text", { class: "pb-tick-label", x: tx, y: axisY + 14, "font-size": 10,
          "text-anchor": tx > right - 20 ? "end" : tx < left + 20 ? "start" : "middle", style: "fill:var(--pb-fg)" }, text));
        lastLabel = tx;
      }
    }
    timeline.replaceChildren(svg, legend);
  }

  function drawGraph() {
    const [rows, statuses] = rowsAndStatus();
    if (!rows.length) { graph.replaceChildren(h("div", { class: "pb-note", text: "The plan has no steps." })); return; }
    const shown = rows.slice(0, MAX_NODES);
    const index = new Map(shown.map((r, i) => [r[0], i]));
    const layer = new Array(shown.length).fill(0);
    for (let i = 0; i < shown.length; i++) // plan order is a topological order (needs come first)
      for (const need of shown[i][3]) if (index.has(need)) layer[i] = Math.max(layer[i], layer[index.get(need)] + 1);
    const perLayer = [];
    const pos = shown.map((r, i) => {
      const l = layer[i];
      perLayer[l] = (perLayer[l] || 0) + 1;
      return [l, perLayer[l] - 1];
    });
    const nodeW = 110, nodeH = 26, gapX = 40, gapY = 10;
    const W = perLayer.length * (nodeW + gapX) + 10, H = Math.max(...perLayer) * (nodeH + gapY) + 10;
    const svg = s("svg", { class: "pb-graph", width: W, height: H, viewBox: `0 0 ${W} ${H}` });
    const at = (i) => [5 + pos[i][0] * (nodeW + gapX), 5 + pos[i][1] * (nodeH + gapY)];
    for (let i = 0; i < shown.length; i++) {
      for (const need of shown[i][3]) {
        if (!index.has(need)) continue;
        const [x1, y1] = at(index.get(need)), [x2, y2] = at(i);
        const ym = y2 + nodeH / 2;
        svg.append(s("path", { d: `M ${x1 + nodeW} ${y1 + nodeH / 2} C ${x1 + nodeW + gapX / 2} ${y1 + nodeH / 2}, ` +
          `${x2 - gapX / 2} ${ym}, ${x2 - 6} ${ym}`, class: "pb-edge", style: "fill:none;stroke:var(--pb-fg2);stroke-width:1.2" }));
        // the arrowhead as its own shape (a <marker> needs an id, and ids collide between views)
        svg.append(s("path", { d: `M ${x2 - 8} ${ym - 4} L ${x2} ${ym} L ${x2 - 8} ${ym + 4} z`, class: "pb-arrowhead",
          style: "fill:var(--pb-fg2)" }));
      }
    }
    const selected = model.get("selected");
    for (let i = 0; i < shown.length; i++) {
      const [id, , task] = shown[i];
      const [status] = STATUS[statuses[i] || "n"];
      const [x, y] = at(i);
      const g = s("g", { class: `pb-node planbook-${status}`, "data-step": id, cursor: "pointer" });
      const cached = ((model.get("head") || {}).cached || {})[id];
      g.append(s("rect", { x, y, width: nodeW, height: nodeH, rx: 5, style: `fill:${FILLS[status]}` +
        (id === selected ? ";stroke:var(--pb-fg);stroke-width:2" : cached ? ";stroke:#fff;stroke-dasharray:3 2;stroke-width:1.5" : "") }));
      g.append(s("text", { x: x + 6, y: y + 17, "font-size": 11, class: "pb-on-bar", style: "fill:#fff" },
        clip(cached ? `${id} ${CACHED_MARK}` : id, nodeW)));
      g.append(s("title", {}, `${id} (${status}${cached ? ", " + cached[0] : ""}): ${task}`));
      g.addEventListener("click", () => open(id));
      svg.append(g);
    }
    const note = rows.length > MAX_NODES ? `The first ${MAX_NODES} of ${rows.length} steps are drawn.` :
      "Arrows go from a step to the steps that need it; colours are statuses. Click a step to open it.";
    graph.replaceChildren(svg, h("div", { class: "pb-note", text: note }));
  }

  function drawRevisions() {
    const diffs = model.get("revisions") || [];
    const decisions = model.get("decisions") || [];
    // the same words as the run's record (planbook/views/record.py, decision_lines)
    decisionsBox.replaceChildren(...(decisions.length ? [h("div", { style: "font-weight:600;margin-top:6px", text: "Decisions" }),
      h("ul", { class: "planbook-decisions" }, ...decisions.map(([what, line]) =>
        h("li", { class: `planbook-decision planbook-decision-${what}`, text: line })))] : []));
    const parts = [];
    if (diffs.length) parts.push(h("div", { style: "font-weight:600;margin-top:6px", text: "Revision history" }));
    for (const d of diffs) {
      const items = [];
      for (const id of d.removed) items.push(h("li", { class: "planbook-removed" }, "− ", h("del", { text: `${id}: ${d.steps[id] || ""}` }), " (removed)"));
      for (const id of d.added) items.push(h("li", { class: "planbook-added" }, "+ ", h("ins", { text: `${id}: ${d.steps[id] || ""}` }), " (added)"));
      for (const id of d.revised) items.push(h("li", { class: "planbook-revised" }, `~ ${id}: ${d.steps[id] || ""} (revised)`));
      if (!items.length) items.push(h("li", { class: "pb-dim", text: "(no change)" }));
      if (d.rejected) items.push(h("li", { class: "planbook-rejected", style: "white-space:pre-wrap", text: `Refused: ${d.rejected}` }));
      parts.push(h("div", { class: "planbook-diff" },
        h("div", { text: `Revision ${d.from_revision} → ${d.to_revision}` + (d.reason ? ` (after: ${d.reason})` : "") +
          (d.rejected ? " — rejected, the plan did not change" : "") }),
        h("ul", {}, ...items)));
    }
    revisions.replaceChildren(...parts);
  }

  function draw() {
    root.classList.toggle("pb-gone", !!store.gone);
    for (const b of tabs.children) b.classList.toggle("on", b.dataset.tab === store.tab);
    for (const [name, node] of Object.entries(views)) node.style.display = name === store.tab ? "" : "none";
    removedBox.style.display = store.tab === "steps" ? "" : "none";
    drawHeader();
    if (store.tab === "steps") drawRows();
    else if (store.tab === "timeline") drawTimeline();
    else drawGraph();
    drawPane();
    drawRevisions();
  }

  // redraw at most once a frame, however many traits changed together
  let queued = false;
  const schedule = () => {
    if (queued) return;
    queued = true;
    requestAnimationFrame(() => { queued = false; draw(); });
  };
  // the browser's clock, stopped when the run's kernel went (its steps stopped then)
  const clock = () => (store.gone ? store.gone.at : performance.now());
  // when the kernel's latest head came (the model's: a view drawn again keeps the clocks where they were)
  if (!store.headSeen) store.headSeen = performance.now();
  const onHead = () => { store.headSeen = performance.now(); };
  const events = "change:head change:rows change:statuses change:revisions change:selected change:waiting change:errors change:controls change:decisions change:editable change:retryable change:ended change:fork change:replay";
  model.on("change:head", onHead);
  model.on(events, schedule);
  store.listeners.add(schedule);
  // while steps run, their times move on between the kernel's updates
  const ticker = setInterval(() => {
    if (store.gone || !(model.get("statuses") || "").includes("r")) return;
    drawHeader();
    if (store.tab === "steps") drawRows();
  }, 500);
  draw();
  return () => {
    clearInterval(ticker);
    model.off("change:head", onHead);
    model.off(events, schedule);
    store.listeners.delete(schedule);
  };
}

export default { initialize, render };
