// proctrace HTML report: a canvas timeline of the recorded process tree.
//
// The data comes in tree order with each row's depth and parent, so this
// script never derives the tree itself. Only the rows inside the viewport
// are drawn, on one canvas that stays in place while a tall spacer gives
// the scrollbar its length: that is what keeps 10,000 processes as quick as
// ten. With a CPU profile (`record --cpu-profile`), its flame graphs are
// drawn on canvases of their own, from the stacks html.rs embeds; with
// probes (`record --probe`), a flame graph of each probe's hits too; with
// waits (`record --off-cpu`), the same graphs of where the tree waited,
// and each test's wall time split into CPU and waits. Every
// text from the recording reaches the page through textContent or the
// canvas, never as markup.
"use strict";
(function () {
  const data = JSON.parse(document.getElementById("report-data").textContent);
  const procs = data.processes;
  const N = procs.length;

  const ROW_H = 20;
  const AXIS_H = 26;
  const INDENT = 14;
  const MAX_INDENT = 24; // deeper rows indent no further, so their text stays visible
  const BAR_PAD = 4;
  const FONT = "12px system-ui, -apple-system, 'Segoe UI', Roboto, 'Noto Sans', sans-serif";
  const MONO = "11px ui-monospace, 'DejaVu Sans Mono', Menlo, Consolas, monospace";
  const FG = "#1d2330";
  const MUTED = "#667085";
  const FAILED = "#d62728";
  const RUNNING = "#6a3d9a";
  const LINGERING = "#d97706";
  const CRITICAL = "#1d2330";
  const ALIVE = "rgba(47,111,219,0.28)";
  const BUSY = "#e36209";
  const LOAD_H = 56;
  // Mid-light colours that dark text reads well on; red is left out
  // because it means failure here.
  const PALETTE = ["#7aa6d6", "#f2a65a", "#7cc47f", "#b39ddb", "#e6c74c", "#6cc4c0",
    "#e8a0c8", "#c4a484", "#b5c46a", "#9fb0c0", "#c5b3f0", "#e0c9a0"];

  const $ = (id) => document.getElementById(id);
  const scroller = $("scroller");
  const spacer = $("spacer");
  const canvas = $("chart");
  const ctx = canvas.getContext("2d");
  const loadCanvas = $("load");
  const loadCtx = loadCanvas.getContext("2d");
  const tooltip = $("tooltip");
  const details = $("details");
  const status = $("status");
  const search = $("search");

  // ---- Derived once -------------------------------------------------------

  // One past the last row of each row's subtree: what collapsing skips.
  const subtreeEnd = new Int32Array(N);
  {
    const open = [];
    for (let i = 0; i < N; i++) {
      while (open.length && procs[open[open.length - 1]].depth >= procs[i].depth) {
        subtreeEnd[open.pop()] = i;
      }
      open.push(i);
    }
    for (const i of open) subtreeEnd[i] = N;
  }
  const hasChildren = (i) => subtreeEnd[i] > i + 1;

  const cpuOf = (p) => p.resources ? p.resources.cpu_ns : 0;
  // CPU of each row's whole subtree, from prefix sums over tree order.
  const subtreeCpu = (() => {
    const prefix = new Float64Array(N + 1);
    for (let i = 0; i < N; i++) prefix[i + 1] = prefix[i] + cpuOf(procs[i]);
    return (i) => prefix[subtreeEnd[i]] - prefix[i];
  })();

  // The rows in tree order with each parent's children sorted by `weight`,
  // heaviest first; subtrees stay whole, so collapsing still skips one.
  function sortedOrder(weight) {
    const kids = Array.from({ length: N + 1 }, () => []);
    for (let i = 0; i < N; i++) kids[procs[i].parent === null ? N : procs[i].parent].push(i);
    const byWeight = (a, b) => weight(b) - weight(a) || a - b;
    const order = [];
    const stack = kids[N].sort(byWeight).reverse();
    while (stack.length) {
      const i = stack.pop();
      order.push(i);
      stack.push(...kids[i].sort(byWeight).reverse());
    }
    return order;
  }
  const orders = {
    tree: Array.from({ length: N }, (_, i) => i),
    heaviest: null,
    longest: null,
  };
  const weights = { heaviest: subtreeCpu, longest: (i) => procs[i].end - procs[i].start };

  // Processes alive over time, as steps sorted by time.
  const steps = [];
  for (const p of procs) steps.push([p.start, 1], [p.end, -1]);
  // At one instant ends come first: a process that ends as another starts
  // never ran beside it.
  steps.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  let peakAlive = 0;
  {
    let alive = 0;
    for (const [, dAlive] of steps) {
      alive += dAlive;
      peakAlive = Math.max(peakAlive, alive);
    }
  }
  // CPUs busy over time. A process's CPU is known only in total, so it
  // counts as spread evenly over its life, averaged over windows of
  // 1/400 of the run (10 ms at least): short processes whose CPU comes
  // out above their life otherwise stack up to more CPUs than the machine
  // has. An estimate, labelled as one, and never above the CPUs online.
  const cpus = data.cpus || Infinity;
  const busyWindow = Math.max(data.end / 400, 10e6);
  const busyAt = new Float64Array(Math.ceil(data.end / busyWindow) + 1);
  for (const p of procs) {
    const cpu = cpuOf(p);
    if (!cpu) continue;
    const rate = cpu / Math.max(p.end - p.start, 1);
    const last = Math.min(Math.floor(p.end / busyWindow), busyAt.length - 1);
    for (let w = Math.floor(p.start / busyWindow); w <= last; w++) {
      const overlap = Math.min(p.end, (w + 1) * busyWindow) - Math.max(p.start, w * busyWindow);
      busyAt[w] += rate * Math.max(overlap, p.end === p.start ? 1 : 0) / busyWindow;
    }
  }
  for (let w = 0; w < busyAt.length; w++) busyAt[w] = Math.min(busyAt[w], cpus);
  const peakBusy = busyAt.reduce((a, b) => Math.max(a, b), 0);
  const hasCpu = procs.some((p) => p.resources);

  const haystack = procs.map((p) =>
    [p.label].concat(p.execs.map((e) => e.command + " " + e.filename)).join("\n").toLowerCase());

  // Short bar labels: the program's base name and its arguments.
  for (const p of procs) {
    for (const e of p.execs) e.short = e.command.slice(0, 300).replace(/^[^\s]*\//, "");
  }

  const groups = new Map(); // pgid -> { pgid, index, count, leader }
  for (let i = 0; i < N; i++) {
    const key = procs[i].pgid;
    let group = groups.get(key);
    if (!group) {
      group = { pgid: key, index: groups.size, count: 0, leader: null };
      groups.set(key, group);
    }
    group.count++;
    if (group.leader === null && procs[i].pid === key) group.leader = i;
  }
  const colourOf = (index) => index < PALETTE.length
    ? PALETTE[index]
    : "hsl(" + (30 + (index * 137.508) % 300).toFixed(0) + ", 50%, 70%)";
  for (const group of groups.values()) group.colour = colourOf(group.index);
  const colour = (i) => groups.get(procs[i].pgid).colour;

  let first = Infinity;
  for (const p of procs) first = Math.min(first, p.start);
  if (!isFinite(first)) first = 0;
  const full = { t0: first, t1: Math.max(data.end, first + 1000) };

  // ---- State --------------------------------------------------------------

  const collapsed = new Uint8Array(N);
  let terms = [];
  let matched = null; // per row: 1 if it matches the filter; null without one
  let matchCount = N;
  let visible = []; // the rows shown, in order
  let view = fitted();
  let hover = null; // { row, seg }
  let selected = -1;
  let width = 0, height = 0, labelW = 0, plotX = 0, plotW = 0;
  let rowsDrawn = 0;
  let sortBy = "tree";
  let order = orders.tree;
  let pending = false;

  // ---- Time ---------------------------------------------------------------

  function fitted() {
    const pad = (full.t1 - full.t0) * 0.02;
    return { t0: full.t0 - pad, t1: full.t1 + pad };
  }

  function fitView() {
    view = fitted();
    schedule();
  }

  const xOf = (t) => plotX + (t - view.t0) / (view.t1 - view.t0) * plotW;
  const tOf = (x) => view.t0 + (x - plotX) / plotW * (view.t1 - view.t0);

  function setView(t0, t1) {
    const fullSpan = (full.t1 - full.t0) * 1.04;
    const span = Math.min(Math.max(t1 - t0, 1000), fullSpan);
    if (span >= fullSpan) {
      view = fitted();
    } else {
      const pad = span * 0.1;
      const lo = full.t0 - pad, hi = full.t1 + pad - span;
      const start = Math.min(Math.max(t0, lo), hi);
      view = { t0: start, t1: start + span };
    }
    tooltip.hidden = true; // it would describe whatever moved away
    schedule();
  }

  function zoom(factor, atX) {
    const at = tOf(atX === undefined ? plotX + plotW / 2 : atX);
    setView(at - (at - view.t0) * factor, at + (view.t1 - at) * factor);
  }

  function pan(dx) {
    const dt = dx / plotW * (view.t1 - view.t0);
    setView(view.t0 + dt, view.t1 + dt);
  }

  function duration(ns) {
    if (ns < 1e3) return ns + " ns";
    if (ns < 1e6) return (ns / 1e3).toFixed(1) + " µs";
    if (ns < 1e9) return (ns / 1e6).toFixed(ns < 1e7 ? 2 : 1) + " ms";
    if (ns < 60e9) return (ns / 1e9).toFixed(3) + " s";
    const s = Math.round(ns / 1e9);
    return Math.floor(s / 60) + "m " + (s % 60) + "s";
  }

  function bytes(n) {
    const units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let k = 0;
    while (n >= 1024 && k < units.length - 1) { n /= 1024; k++; }
    return (k ? n.toFixed(1) : String(n)) + " " + units[k];
  }

  // Ticks a round number of units apart, about 110 pixels.
  function ticks() {
    const raw = (view.t1 - view.t0) * 110 / Math.max(plotW, 1);
    const magnitude = Math.pow(10, Math.floor(Math.log10(raw)));
    const step = [1, 2, 5, 10].map((m) => m * magnitude).find((s) => s >= raw);
    const [unit, scale] = step >= 1e9 ? ["s", 1e9] : step >= 1e6 ? ["ms", 1e6] : step >= 1e3 ? ["µs", 1e3] : ["ns", 1];
    const decimals = Math.max(0, -Math.floor(Math.log10(step / scale) + 1e-9));
    const list = [];
    for (let t = Math.ceil(view.t0 / step) * step; t <= view.t1; t += step) {
      list.push({ t, text: (t / scale).toFixed(decimals) + unit });
    }
    return list;
  }

  function clock(ns) {
    const base = Date.parse(String(data.start_time || "").replace(/(\.\d{3})\d+/, "$1"));
    if (isNaN(base)) return "";
    return new Date(base + ns / 1e6).toISOString().replace("T", " ").slice(0, 23) + " UTC";
  }

  // ---- Rows: collapsing and filtering -------------------------------------

  function matches(i) {
    const p = procs[i];
    return terms.every((term) => {
      const [key, value] = term.split(/:(.*)/s);
      switch (key) {
        case "is":
          if (value === "failed") return p.failed;
          if (value === "running") return p.running;
          if (value === "lingering") return p.lingering;
          if (value === "critical") return p.critical !== null;
          break;
        case "pid": case "ppid": case "pgid": case "sid":
          if (/^\d+$/.test(value)) return String(p[key]) === value;
      }
      return haystack[i].includes(term);
    });
  }

  // Without a filter: the tree minus collapsed subtrees. With one: the
  // matching rows and, for context, their ancestors.
  function rebuild() {
    visible = [];
    if (!terms.length) {
      matched = null;
      matchCount = N;
      for (let k = 0; k < N; ) {
        const i = order[k];
        visible.push(i);
        k += collapsed[i] ? subtreeEnd[i] - i : 1;
      }
    } else {
      matched = new Uint8Array(N);
      const shown = new Uint8Array(N);
      matchCount = 0;
      for (let i = 0; i < N; i++) {
        if (!matches(i)) continue;
        matched[i] = 1;
        matchCount++;
        for (let j = i; j !== null && !shown[j]; j = procs[j].parent) shown[j] = 1;
      }
      for (const i of order) if (shown[i]) visible.push(i);
    }
    $("matches").textContent = terms.length ? matchCount + " of " + N + " processes" : "";
    layout();
  }

  function setQuery(text, updateHash) {
    if (search.value !== text) search.value = text;
    terms = text.toLowerCase().split(/\s+/).filter(Boolean);
    rebuild();
    if (updateHash) {
      try {
        history.replaceState(null, "", text ? "#search=" + encodeURIComponent(text) : location.pathname);
      } catch (_) {
        // Some browsers refuse history changes for file: pages; the
        // filter works all the same.
      }
    }
  }

  function setSort(by) {
    if (!(by in orders)) by = "tree";
    if (!orders[by]) orders[by] = sortedOrder(weights[by]);
    sortBy = by;
    order = orders[by];
    $("sort").value = by;
    rebuild();
  }

  // `#search=TEXT` filters, `#select=PID` opens a process's details,
  // `#sort=heaviest` orders, `#cpu` shows the CPU profile (`#cpu=TEST`
  // a test's), `#waits` the waits: links into a report, and how the
  // browser test drives it.
  function applyHash() {
    const params = new URLSearchParams(location.hash.slice(1));
    if (params.has("sort")) setSort(params.get("sort"));
    setQuery(params.get("search") || "", false);
    if (cpu && params.has("cpu")) showCpu(params.get("cpu"));
    else if (waits && params.has("waits")) showProfile(profiles.waits, params.get("waits"));
    else showTimeline();
    const pid = Number(params.get("select"));
    const row = params.has("select") ? procs.findIndex((p) => p.pid === pid) : -1;
    if (row < 0) return;
    showDetails(row, procs[row].execs.length - 1);
    const k = visible.indexOf(row);
    if (k >= 0) scroller.scrollTop = Math.max(0, k * ROW_H - (height - AXIS_H) / 2);
  }

  function setAll(value) {
    for (let i = 0; i < N; i++) collapsed[i] = value && hasChildren(i) ? 1 : 0;
    rebuild();
  }

  // ---- Drawing ------------------------------------------------------------

  function layout() {
    width = scroller.clientWidth;
    height = scroller.clientHeight;
    labelW = Math.round(Math.min(Math.max(width * 0.3, 200), 480));
    plotX = labelW + 10;
    plotW = Math.max(width - plotX - 70, 50); // room on the right for "exit 3"
    const ratio = window.devicePixelRatio || 1;
    canvas.width = Math.round(width * ratio);
    canvas.height = Math.round(height * ratio);
    canvas.style.width = width + "px";
    canvas.style.height = height + "px";
    ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
    loadCanvas.width = Math.round(width * ratio);
    loadCanvas.height = Math.round(LOAD_H * ratio);
    loadCanvas.style.width = width + "px";
    loadCanvas.style.height = LOAD_H + "px";
    loadCtx.setTransform(ratio, 0, 0, ratio, 0, 0);
    spacer.style.height = Math.max(height, AXIS_H + visible.length * ROW_H) + "px";
    schedule();
  }

  function schedule() {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => {
      pending = false;
      draw();
    });
  }

  const stripes = (() => {
    const tile = document.createElement("canvas");
    tile.width = tile.height = 6;
    const t = tile.getContext("2d");
    t.strokeStyle = "rgba(255,255,255,0.5)";
    t.lineWidth = 2;
    t.beginPath();
    t.moveTo(-1, 7); t.lineTo(7, -1);
    t.stroke();
    return ctx.createPattern(tile, "repeat");
  })();

  // `text` cut with an ellipsis to fit `room` pixels in the current font
  // of `c` (the timeline's canvas unless given).
  function fit(text, room, c) {
    c = c || ctx;
    if (room < 10) return "";
    text = text.length > 400 ? text.slice(0, 400) : text;
    if (c.measureText(text).width <= room) return text;
    let lo = 0, hi = text.length;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (c.measureText(text.slice(0, mid) + "…").width <= room) lo = mid; else hi = mid - 1;
    }
    return lo ? text.slice(0, lo) + "…" : "";
  }

  function draw() {
    ctx.clearRect(0, 0, width, height);
    ctx.textBaseline = "middle";
    const top = scroller.scrollTop;
    const from = Math.floor(top / ROW_H);
    const to = Math.min(visible.length, Math.ceil((top + height - AXIS_H) / ROW_H));
    const tickList = ticks();
    for (let k = from; k < to; k++) drawBackground(k, AXIS_H + k * ROW_H - top);
    drawGrid(tickList);
    rowsDrawn = 0;
    for (let k = from; k < to; k++) {
      drawRow(visible[k], AXIS_H + k * ROW_H - top);
      rowsDrawn++;
    }
    drawAxis(tickList);
    drawLoad();
    if (!N) {
      ctx.fillStyle = MUTED;
      ctx.font = FONT;
      ctx.fillText("The recording holds no processes.", 12, AXIS_H + ROW_H);
    }
    report();
  }

  // The strip above the timeline, on its time axis: processes alive as an
  // area, CPUs busy as a line, each pixel column showing its peak.
  function drawLoad() {
    const c = loadCtx;
    c.clearRect(0, 0, width, LOAD_H);
    c.font = FONT;
    c.textBaseline = "middle";
    c.fillStyle = MUTED;
    c.fillText(fit("Processes alive, peak " + peakAlive, labelW - 12), 8, LOAD_H / 3);
    if (hasCpu) {
      c.fillStyle = BUSY;
      c.fillText(fit("CPUs busy (est.), peak " + peakBusy.toFixed(1), labelW - 12), 8, 2 * LOAD_H / 3);
    }
    c.fillStyle = "#c9ced8";
    c.fillRect(labelW, 0, 1, LOAD_H);
    const scale = (LOAD_H - 8) / Math.max(peakAlive, peakBusy, 1);
    const y = (v) => LOAD_H - 2 - v * scale;
    const columns = Math.ceil(plotW);
    const alive = new Float64Array(columns), busy = new Float64Array(columns);
    let a = 0, j = 0;
    for (let x = 0; x < columns; x++) {
      const from = tOf(plotX + x), until = tOf(plotX + x + 1);
      let peakA = a;
      while (j < steps.length && steps[j][0] < until) {
        a += steps[j][1];
        peakA = Math.max(peakA, a);
        j++;
      }
      alive[x] = peakA;
      const w0 = Math.max(Math.floor(from / busyWindow), 0);
      const w1 = Math.min(Math.floor(until / busyWindow), busyAt.length - 1);
      for (let w = w0; w <= w1; w++) busy[x] = Math.max(busy[x], busyAt[w]);
    }
    c.fillStyle = ALIVE;
    for (let x = 0; x < columns; x++) if (alive[x]) c.fillRect(plotX + x, y(alive[x]), 1, alive[x] * scale);
    if (!hasCpu) return;
    c.strokeStyle = BUSY;
    c.lineWidth = 1.5;
    c.beginPath();
    for (let x = 0; x < columns; x++) c.lineTo(plotX + x + 0.5, y(busy[x]));
    c.stroke();
  }

  function drawBackground(k, y) {
    const i = visible[k];
    let fill = k % 2 ? "#f4f5f8" : "#ffffff";
    if (hover && hover.row === i) fill = "#eaf1fc";
    if (i === selected) fill = "#d9e6fb";
    ctx.fillStyle = fill;
    ctx.fillRect(0, y, width, ROW_H);
  }

  function drawGrid(tickList) {
    ctx.fillStyle = "rgba(30,40,60,0.08)";
    for (const tick of tickList) ctx.fillRect(Math.round(xOf(tick.t)), AXIS_H, 1, height);
    const end = Math.round(xOf(data.end));
    ctx.fillStyle = "rgba(30,40,60,0.35)";
    ctx.fillRect(end, AXIS_H, 1, height);
  }

  function drawAxis(tickList) {
    ctx.fillStyle = "#eef0f4";
    ctx.fillRect(0, 0, width, AXIS_H);
    ctx.fillStyle = "#c9ced8";
    ctx.fillRect(0, AXIS_H - 1, width, 1);
    ctx.fillRect(labelW, 0, 1, height);
    ctx.font = FONT;
    ctx.fillStyle = MUTED;
    ctx.textAlign = "left";
    const count = terms.length ? matchCount + " of " + N : String(N);
    ctx.fillText(fit("Process (" + count + ")  ·  pid  command", labelW - 12), 8, AXIS_H / 2);
    ctx.save();
    ctx.beginPath();
    ctx.rect(labelW + 1, 0, width - labelW, AXIS_H);
    ctx.clip();
    ctx.textAlign = "center";
    for (const tick of tickList) {
      const x = Math.round(xOf(tick.t));
      ctx.fillStyle = "#9aa3b2";
      ctx.fillRect(x, AXIS_H - 6, 1, 5);
      ctx.fillStyle = FG;
      ctx.fillText(tick.text, x, AXIS_H / 2 - 2);
    }
    // The end of the recording: a mark on the axis, named where no tick
    // label is in the way.
    const end = xOf(data.end);
    ctx.fillStyle = MUTED;
    ctx.beginPath();
    ctx.moveTo(end - 4, AXIS_H - 7); ctx.lineTo(end + 4, AXIS_H - 7); ctx.lineTo(end, AXIS_H - 1);
    ctx.fill();
    const clear = tickList.every((tick) => Math.abs(xOf(tick.t) - end) > 50);
    if (clear) ctx.fillText("end", end, AXIS_H / 2 - 2);
    ctx.restore();
    ctx.textAlign = "left";
  }

  function drawRow(i, y) {
    const p = procs[i];
    ctx.globalAlpha = matched && !matched[i] ? 0.45 : 1;
    drawLabel(i, p, y);
    ctx.save();
    ctx.beginPath();
    ctx.rect(labelW + 1, y, width - labelW - 1, ROW_H);
    ctx.clip();
    drawBar(i, p, y);
    ctx.restore();
    ctx.globalAlpha = 1;
  }

  function indentOf(p) {
    return 6 + Math.min(p.depth, MAX_INDENT) * INDENT;
  }

  function drawLabel(i, p, y) {
    const mid = y + ROW_H / 2;
    let x = indentOf(p);
    if (hasChildren(i)) {
      ctx.fillStyle = MUTED;
      ctx.beginPath();
      if (collapsed[i] && !terms.length) {
        ctx.moveTo(x + 2, mid - 4); ctx.lineTo(x + 7, mid); ctx.lineTo(x + 2, mid + 4);
      } else {
        ctx.moveTo(x, mid - 2); ctx.lineTo(x + 8, mid - 2); ctx.lineTo(x + 4, mid + 3);
      }
      ctx.fill();
    }
    x += 12;
    ctx.fillStyle = colour(i);
    ctx.fillRect(x, mid - 4, 4, 8);
    x += 8;
    ctx.font = MONO;
    ctx.fillStyle = MUTED;
    const pid = String(p.pid);
    ctx.fillText(pid, x, mid);
    x += ctx.measureText(pid).width + 6;
    ctx.font = FONT;
    if (p.lingering || p.failed || p.running) {
      // Lingering says more than how it ended: it is the leak.
      ctx.fillStyle = p.lingering ? LINGERING : p.failed ? FAILED : RUNNING;
      const mark = p.lingering ? "◆" : p.failed ? "✗" : "●";
      ctx.fillText(mark, x, mid);
      x += ctx.measureText(mark).width + 4;
    }
    ctx.fillStyle = p.failed ? FAILED : FG;
    ctx.fillText(fit(p.label, labelW - x - 6), x, mid);
  }

  function drawBar(i, p, y) {
    const top = y + BAR_PAD, h = ROW_H - 2 * BAR_PAD;
    const x0 = xOf(p.start);
    const x1 = Math.max(xOf(p.end), x0 + 2); // even a 50 µs process stays visible
    if (x1 < labelW || x0 > width) return;
    const fill = colour(i);
    const firstExec = p.execs.length ? p.execs[0].start : p.end;
    // Before its first exec a process still runs its parent's program:
    // the lighter part of the bar.
    ctx.fillStyle = fill;
    ctx.globalAlpha *= 0.4;
    ctx.fillRect(x0, top, Math.max(xOf(firstExec) - x0, p.execs.length ? 0 : x1 - x0), h);
    ctx.globalAlpha = matched && !matched[i] ? 0.45 : 1;
    ctx.font = "11px system-ui, sans-serif";
    p.execs.forEach((e, k) => {
      const a = xOf(e.start), b = Math.max(xOf(e.end), a + 2);
      if (b < labelW || a > width) return;
      ctx.fillStyle = fill;
      ctx.fillRect(a, top, b - a, h);
      if (p.running) {
        ctx.fillStyle = stripes;
        ctx.fillRect(a, top, b - a, h);
      }
      if (k > 0) {
        ctx.fillStyle = "#ffffff";
        ctx.fillRect(Math.round(a), top, 1, h);
      }
      const left = Math.max(a, plotX) + 4, room = Math.min(b, width) - left - 3;
      if (room > 24) {
        ctx.fillStyle = FG;
        ctx.fillText(fit(e.short, room), left, y + ROW_H / 2);
      }
    });
    if (p.critical !== null) {
      ctx.fillStyle = CRITICAL;
      ctx.fillRect(x0, top + h, x1 - x0, 3);
    }
    if (p.lingering) {
      ctx.strokeStyle = LINGERING;
      ctx.lineWidth = 2;
      ctx.strokeRect(x0 + 1, top + 1, Math.max(x1 - x0 - 2, 1), h - 2);
      ctx.lineWidth = 1;
      outcomeText("◆ lingering, " + p.status, LINGERING, x1, y);
    } else if (p.running) {
      ctx.strokeStyle = RUNNING;
      ctx.setLineDash([3, 2]);
      ctx.strokeRect(x0 + 0.5, top + 0.5, x1 - x0 - 1, h - 1);
      ctx.setLineDash([]);
      outcomeText("▸ still running", RUNNING, x1, y);
    } else if (p.failed) {
      ctx.strokeStyle = FAILED;
      ctx.lineWidth = 2;
      ctx.strokeRect(x0 + 1, top + 1, Math.max(x1 - x0 - 2, 1), h - 2);
      ctx.lineWidth = 1;
      outcomeText("✗ " + p.status, FAILED, x1, y);
    }
    if (i === selected) {
      ctx.strokeStyle = FG;
      ctx.strokeRect(x0 - 1.5, top - 1.5, x1 - x0 + 3, h + 3);
    }
  }

  function outcomeText(text, colour, x, y) {
    ctx.font = "11px system-ui, sans-serif";
    ctx.fillStyle = colour;
    ctx.fillText(text, x + 4, y + ROW_H / 2);
  }

  // What the browser test reads: see tests/kernel/html.rs.
  function report() {
    status.dataset.ready = "1";
    status.dataset.processes = N;
    status.dataset.rows = visible.length;
    status.dataset.rowsDrawn = rowsDrawn;
    status.dataset.matches = matchCount;
    status.dataset.sort = sortBy;
    status.dataset.order = visible.slice(0, 20).map((i) => procs[i].pid).join(",");
    status.dataset.critical = procs.filter((p) => p.critical !== null).length;
    status.dataset.peakAlive = peakAlive;
    status.dataset.peakBusy = peakBusy.toFixed(2);
  }

  // ---- Header -------------------------------------------------------------

  function el(tag, text, className) {
    const node = document.createElement(tag);
    if (text !== undefined) node.textContent = text;
    if (className) node.className = className;
    return node;
  }

  function fact(term, value, className, query) {
    const item = el("div", undefined, className);
    item.append(el("dt", term));
    const dd = el("dd");
    if (query) {
      const button = el("button", value, "link");
      button.type = "button";
      button.title = typeof query === "function" ? "Show it" : "Show only these";
      button.addEventListener("click", () => typeof query === "function" ? query() : setQuery(query, true));
      dd.append(button);
    } else {
      dd.textContent = value;
    }
    item.append(dd);
    $("facts").append(item);
  }

  function header() {
    const command = data.command || (N ? procs[0].label : "");
    $("command").textContent = command;
    document.title = "proctrace: " + (command.length > 80 ? command.slice(0, 79) + "…" : command);
    const failed = procs.filter((p) => p.failed).length;
    const running = procs.filter((p) => p.running).length;
    const lingering = procs.filter((p) => p.lingering).length;
    const execs = procs.reduce((n, p) => n + p.execs.length, 0);
    if (data.start_time) fact("Started", clock(0));
    fact("Wall time", duration(data.wall_time));
    fact("Processes", N + " (" + execs + (execs === 1 ? " exec)" : " execs)"));
    fact("Failed", String(failed), failed ? "bad" : "", failed ? "is:failed" : null);
    // With `record --linger` the leaks are known, killed or not; without,
    // what still ran at the end is the best guess at them.
    if (lingering) fact("Lingering", String(lingering), "lingering", "is:lingering");
    else fact("Still running at the end", String(running), running ? "lingering" : "", running ? "is:running" : null);
    const root = procs.find((p) => p.pid === data.root_pid);
    if (root) fact("Command's status", root.status, root.failed ? "bad" : "");
    fact("Lost events", data.lost === null ? "unknown" : String(data.lost), data.lost ? "bad" : "");
    if (data.cut) fact("Recording", "cut short: no trailer, what came after the cut is missing", "bad");
    else if (data.interrupted) fact("Recording", "interrupted", "bad");
    if (cpu && cpu.headline) fact("CPU profile", samplesText(cpu.samples), "", () => showCpu(""));
    if (waits) fact("Waits", duration(waits.ns), "", () => showProfile(profiles.waits, ""));
    // `record --probe`: each probe's hits, which show the stacks at them,
    // or that no process of the tree hit it.
    for (const probe of data.probes || []) {
      const drawn = cpu && cpu.probes.some((p) => p.label === probe.label);
      fact("Probe " + probe.label, probe.hits
        ? hitsText(probe.hits) + " by " + probe.processes + (probe.processes === 1 ? " process" : " processes")
        : "no process of the tree hit it", "", drawn ? () => showCpu(probe.label) : null);
    }
    if (data.kernel) fact("Kernel", data.kernel);
  }

  function legend() {
    const box = $("legend");
    const MAX = 10;
    const sorted = Array.from(groups.values()).sort((a, b) => b.count - a.count || a.index - b.index);
    for (const group of sorted.slice(0, MAX)) {
      const leader = group.leader !== null ? group.leader : procs.findIndex((p) => p.pgid === group.pgid);
      const item = el("span", undefined, "item");
      item.title = "Show only process group " + group.pgid;
      const swatch = el("span", undefined, "swatch");
      swatch.style.background = group.colour;
      const name = group.pgid === null ? "no group known" : "pgid " + group.pgid;
      item.append(swatch, el("span", name + " · " + procs[leader].label.slice(0, 60) + " (" + group.count + ")"));
      if (group.pgid !== null) item.addEventListener("click", () => setQuery("pgid:" + group.pgid, true));
      box.append(item);
    }
    if (sorted.length > MAX) box.append(el("span", "+ " + (sorted.length - MAX) + " more groups", "item note"));
    const marker = (className, text) => {
      const item = el("span", undefined, "item note");
      item.append(el("span", undefined, "swatch " + className), el("span", text));
      box.append(item);
    };
    marker("failed-swatch", "failed (non-zero exit or signal)");
    marker("running-swatch", "still running at the end");
    if (procs.some((p) => p.lingering)) marker("lingering-swatch", "lingering (outlived its parent: a leak)");
    if (procs.some((p) => p.critical !== null)) marker("critical-swatch", "critical path (set the run's wall time)");
    const light = el("span", undefined, "item note");
    const swatch = el("span", undefined, "swatch");
    swatch.style.background = PALETTE[0];
    swatch.style.opacity = "0.4";
    light.append(swatch, el("span", "before exec (parent's program)"));
    box.append(light);
  }

  // ---- Details ------------------------------------------------------------

  // A card about row `i`; `full` lists every exec and all of argv, else
  // only the exec `seg` (or the last) with argv shortened.
  function card(i, seg, full) {
    const p = procs[i];
    const box = el("div", undefined, "card");
    box.append(el("h2", p.pid + "  " + p.label));
    const dl = el("dl");
    const row = (term, value, className) => {
      dl.append(el("dt", term), el("dd", value === null || value === undefined ? "unknown" : String(value), className));
    };
    row("pid", p.pid);
    row("ppid", p.ppid);
    row("pgid", p.pgid);
    row("sid", p.sid);
    row("start", "+" + duration(p.start) + (data.start_time ? "  (" + clock(p.start) + ")" : ""));
    row("duration", duration(p.end - p.start) + (p.running ? " so far" : ""));
    row("status", p.status, p.failed ? "failed" : p.running ? "running" : "");
    if (p.lingering) row("lingering", p.lingering, "lingering");
    if (p.critical !== null) row("critical path", duration(p.critical) + " of its own");
    const r = p.resources;
    if (r) {
      row("CPU", duration(r.cpu_ns) + "  (user " + duration(r.user_ns) + ", system " + duration(r.system_ns) + ")");
      row("peak RSS", (p.rss_upper_bound ? "≤ " : "") + bytes(r.max_rss_bytes) +
        (p.rss_upper_bound ? " (with memory from before its exec)" : ""));
      if (r.read_bytes !== undefined && r.read_bytes !== null) row("storage I/O", "read " + bytes(r.read_bytes) + ", written " + bytes(r.write_bytes));
      row("context switches", r.voluntary_switches + " voluntary, " + r.involuntary_switches + " involuntary");
    }
    if (hasChildren(i)) row("children", procs.filter((q) => q.parent === i).length);
    box.append(dl);
    if (full && cpu && cpu.headline) box.append(processProfile(i));
    if (!p.execs.length) box.append(el("div", "Never exec'd: it ran its parent's program.", "hint"));
    const shown = full ? p.execs.map((_, k) => k) : p.execs.length ? [seg !== null && seg >= 0 ? seg : p.execs.length - 1] : [];
    for (const k of shown) box.append(execCard(p.execs[k], k, p.execs.length, full, k === seg));
    if (!full) box.append(el("div", "Click for all details; double-click to zoom to it.", "hint"));
    return box;
  }

  function execCard(e, k, count, full, current) {
    const box = el("div", undefined, "exec" + (current && full ? " current" : ""));
    const dl = el("dl");
    const title = count > 1 ? "exec " + (k + 1) + " of " + count : "exec";
    dl.append(el("dt", title), el("dd", "+" + duration(e.start) + " for " + duration(e.end - e.start)));
    dl.append(el("dt", "filename"), el("dd", e.filename || "unknown"));
    box.append(dl);
    const argv = e.argv.length ? e.argv : [e.command];
    const limit = full ? argv.length : 12;
    box.append(el("div", "argv" + (e.argv_truncated ? " (cut by the recorder)" : ""), "hint"));
    const list = el("ol", undefined, "argv");
    list.start = 0;
    for (const word of argv.slice(0, limit)) list.append(el("li", word.length > 2000 && !full ? word.slice(0, 2000) + "…" : word));
    box.append(list);
    if (argv.length > limit) box.append(el("div", "… " + (argv.length - limit) + " more", "hint"));
    return box;
  }

  function showDetails(i, seg) {
    selected = i;
    const body = $("details-body");
    body.replaceChildren(card(i, seg, true));
    details.hidden = false;
    // Drawn once the panel is shown: the graph takes the panel's width.
    const box = body.querySelector(".flame");
    if (box) new Flame(box, "Process").show(box.tree, profiles.cpu);
    schedule();
  }

  function hideDetails() {
    details.hidden = true;
    selected = -1;
    schedule();
  }

  // ---- CPU profile: flame graphs ------------------------------------------

  // The sampled stacks of `record --cpu-profile` (null without a profile):
  // the heaviest, each process's own, as html.rs keeps them. Samples a
  // graph stands for but the page lacks (stacks left out) are one grey
  // frame beside the rest, so that every share is of the true total. The
  // waits of `record --off-cpu` (null without) come alike, weighed in
  // microseconds, each stack ending in its reason.
  const cpu = data.cpu;
  const waits = data.waits;
  const FLAME_ROW = 18;
  const MIN_FRAME = 0.5; // narrower frames are not drawn, nor what they called
  const HIGHLIGHT = "#c95fdc";
  const cpuFind = $("cpu-find");
  let page = "timeline"; // or "cpu", "waits": what the window shows
  let runFlame = null;
  let scope = null; // the profile view's: "" for the whole run, else a test's name

  const thousands = (n) => String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ",");
  const share = (part, of) => (of ? part * 100 / of : 0).toFixed(1) + "%";
  const samplesText = (n) => thousands(n) + (n === 1 ? " sample" : " samples");
  const hitsText = (n) => thousands(n) + (n === 1 ? " hit" : " hits");

  // What the profile view draws: the CPU's samples (and the probes'
  // hits), or the waits; each names its weight in its own words.
  const profiles = {
    cpu: {
      data: cpu, page: "cpu", name: "CPU profile", weight: samplesText, term: "samples",
      folded: "cpu-folded", trees: new Map(), scope: null,
      cut: ". The recording is cut short: its samples come at its end, and are missing with it.",
      none: ". No sample of the tree was taken (it used too little CPU).",
    },
    waits: {
      data: waits, page: "waits", name: "Waits", weight: (us) => duration(us * 1000), term: "time waited",
      folded: "offcpu-folded", trees: new Map(), scope: null,
      cut: ". The recording is cut short: its waits come at its end, and are missing with it.",
      none: ". No wait of the tree was recorded.",
    },
  };
  let shown = null; // the profile the view shows

  // The tree of `stacks` under a root: each stack's path from `path`, as
  // [name, kind] pairs from the outermost caller. `total` is all the
  // samples the graph stands for, in the page or not.
  function flameTree(rootName, stacks, path, total) {
    const node = (name, kind, parent) =>
      ({ name, kind, parent, samples: 0, kids: new Map(), children: null, height: 1, depth: 0 });
    const root = node(rootName, "root", null);
    for (const s of stacks) {
      root.samples += s.samples;
      let at = root;
      for (const [name, kind] of path(s)) {
        const key = kind + "\u0000" + name;
        let child = at.kids.get(key);
        if (!child) {
          child = node(name, kind, at);
          child.depth = at.depth + 1;
          at.kids.set(key, child);
        }
        child.samples += s.samples;
        at = child;
      }
    }
    const missing = total - root.samples;
    if (missing > 0) {
      const rest = node("stacks left out of the page", "left-out", root);
      rest.samples = missing;
      rest.depth = 1;
      root.kids.set("left-out", rest);
      root.samples = total;
    }
    // Children heaviest first: the hot paths line up on the left, and
    // the graph of one recording is always the same.
    const all = [];
    const todo = [root];
    while (todo.length) {
      const n = todo.pop();
      all.push(n);
      n.children = Array.from(n.kids.values()).sort((a, b) =>
        b.samples - a.samples || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
      n.kids = null;
      todo.push(...n.children);
    }
    // Parents come before their children in `all`: backwards, each
    // node's height (the rows its subtree takes) is known from its
    // children's.
    for (let k = all.length - 1; k >= 0; k--) {
      const n = all[k];
      for (const c of n.children) n.height = Math.max(n.height, c.height + 1);
    }
    return root;
  }

  const functionKind = (name) => name.endsWith("_[k]") ? "kernel" : "function";

  // The scope `of` names in the profile shown: a test (-1 for the whole
  // run), or a probe, whose hits' stacks are a flame graph of their own.
  const testOf = (of) => of === "" ? -1 : shown.data.tests.findIndex((t) => t.name === of);
  const probeOf = (of) => testOf(of) < 0 ? (shown.data.probes || []).findIndex((p) => p.label === of) : -1;

  // The kind of the `k`th of a stack's `n` frames: its program first, and
  // a wait's reason last.
  function frameKind(name, k, n) {
    if (k === 0) return "program";
    return shown === profiles.waits && k === n - 1 ? "reason" : functionKind(name);
  }

  // The whole run's samples (`scope` ""), each stack under its test and
  // program, one test's, each under its program, or one probe's hits,
  // each under its test and program; or the waits alike.
  function runTree(of) {
    const d = shown.data;
    if (shown.trees.has(of)) return shown.trees.get(of);
    const probe = probeOf(of);
    const test = testOf(of);
    const mine = (s) => probe >= 0 ? s.probe === probe : s.probe === null && (test < 0 || s.test === test);
    const path = (s) => {
      const frames = s.frames.map((f, k) => [d.names[f], frameKind(d.names[f], k, s.frames.length)]);
      if (test < 0 && s.test !== null) frames.unshift([d.tests[s.test].name, "test"]);
      return frames;
    };
    const total = probe >= 0 ? d.probes[probe].hits : test < 0 ? d.samples : d.tests[test].samples;
    const tree = flameTree(test < 0 && probe < 0 ? "all" : of, d.stacks.filter(mine), path, total);
    shown.trees.set(of, tree);
    return tree;
  }

  // One process's stacks: its functions, under a root named after it.
  function processTree(i) {
    const stacks = cpu.stacks.filter((s) => s.row === i && s.probe === null);
    const program = stacks.length ? cpu.names[stacks[0].frames[0]] : procs[i].label;
    const path = (s) => s.frames.slice(1).map((f) => [cpu.names[f], functionKind(cpu.names[f])]);
    return flameTree(procs[i].pid + " " + program, stacks, path, procs[i].cpu_samples);
  }

  // "The page holds …": what a graph of profile `p` lacks, or "".
  function leftOutText(tree, p) {
    const rest = tree.children.find((n) => n.kind === "left-out");
    if (!rest) return "";
    return " Stacks left out of the page (it holds the " + thousands(p.data.stacks.length) +
      " heaviest of " + thousands(p.data.stacks.length + p.data.left_out_stacks) + ") hold " +
      p.weight(rest.samples) + " (" + share(rest.samples, tree.samples) + ") of these: one grey frame.";
  }

  function hashName(name) {
    let h = 2166136261;
    for (let k = 0; k < name.length; k++) {
      h ^= name.charCodeAt(k);
      h = Math.imul(h, 16777619);
    }
    return h >>> 0;
  }

  // A function's colour follows its name, as in FlameGraph: warm for the
  // processes' code, cool for the kernel's, grey for what only groups.
  function frameColour(n) {
    const h = hashName(n.name);
    switch (n.kind) {
      case "root": return "#d3d8e2";
      case "test": return "#bccbe3";
      case "program": return "#a9c1e4";
      case "left-out": return "#d9d9d9";
      case "reason": return "#9fb7d6";
      case "kernel": return "hsl(" + (190 + h % 40) + ", 45%, " + (70 + (h >> 8) % 10) + "%)";
      default: return "hsl(" + (6 + h % 44) + ", " + (72 + (h >> 8) % 18) + "%, " + (62 + (h >> 16) % 10) + "%)";
    }
  }

  // A flame graph on a canvas in `box`, the root on top, as the
  // timeline's tree is (and as Chrome's and speedscope's are): the part a
  // panel shows first is the root, and a frame zoomed into stays in its
  // row. Click a frame to zoom to it, the frame zoomed to to zoom back
  // out. `name` is what the browser test reads it as in #status.
  class Flame {
    constructor(box, name) {
      this.box = box;
      this.name = name;
      this.canvas = document.createElement("canvas");
      this.canvas.className = "flame-canvas";
      this.canvas.setAttribute("role", "img");
      box.replaceChildren(this.canvas);
      this.ctx = this.canvas.getContext("2d");
      this.root = null;
      this.focus = null;
      this.hover = null;
      this.find = "";
      this.rects = [];
      this.labels = [];
      this.width = 0;
      this.canvas.addEventListener("mousemove", (event) => this.move(event));
      this.canvas.addEventListener("mouseleave", () => {
        tooltip.hidden = true;
        this.setHover(null);
      });
      this.canvas.addEventListener("click", (event) => {
        const n = this.hit(event);
        if (n) this.zoom(n === this.focus && n.parent ? n.parent : n);
      });
      new ResizeObserver(() => {
        if (this.box.clientWidth !== this.width) this.draw();
      }).observe(box);
    }

    // `p`: the profile the tree is of, which says what its weights are.
    show(root, p) {
      this.root = root;
      this.focus = root;
      this.profile = p;
      this.canvas.setAttribute("aria-label", "Flame graph of " + root.name + ": " + p.weight(root.samples));
      this.draw();
    }

    zoom(n) {
      this.focus = n;
      tooltip.hidden = true;
      this.draw();
    }

    setHover(n) {
      if (n === this.hover) return;
      this.hover = n;
      this.draw();
    }

    // Highlights the functions whose names hold `text`; returns the
    // samples under them, each counted once.
    highlight(text) {
      this.find = text.toLowerCase();
      this.draw();
      if (!this.find || !this.root) return 0;
      let matched = 0;
      const todo = [this.root];
      while (todo.length) {
        const n = todo.pop();
        if (this.matches(n)) matched += n.samples; else todo.push(...n.children);
      }
      return matched;
    }

    matches(n) {
      return this.find !== "" && (n.kind === "function" || n.kind === "kernel") &&
        n.name.toLowerCase().includes(this.find);
    }

    draw() {
      const width = this.box.clientWidth;
      this.width = width;
      if (!this.root || !width) return;
      const ancestors = [];
      for (let a = this.focus.parent; a; a = a.parent) ancestors.unshift(a);
      const height = (ancestors.length + this.focus.height) * FLAME_ROW;
      const ratio = window.devicePixelRatio || 1;
      this.canvas.width = Math.round(width * ratio);
      this.canvas.height = Math.round(height * ratio);
      this.canvas.style.width = width + "px";
      this.canvas.style.height = height + "px";
      const c = this.ctx;
      c.setTransform(ratio, 0, 0, ratio, 0, 0);
      c.clearRect(0, 0, width, height);
      c.font = FONT;
      c.textBaseline = "middle";
      this.rects = [];
      this.labels = [];
      // Above the frame zoomed to, its callers, as wide as it.
      ancestors.forEach((a, row) => this.frame(a, 0, width, row, true));
      const todo = [[this.focus, 0, width, ancestors.length]];
      while (todo.length) {
        const [n, x, w, row] = todo.pop();
        this.frame(n, x, w, row, false);
        let cx = x;
        for (const child of n.children) {
          const cw = w * child.samples / n.samples;
          if (cw >= MIN_FRAME) todo.push([child, cx, cw, row + 1]);
          cx += cw;
        }
      }
      status.dataset["flame" + this.name] = this.labels.slice(0, 200).join("|");
      status.dataset["flame" + this.name + "Frames"] = this.rects.length;
    }

    frame(n, x, w, row, ancestor) {
      const c = this.ctx;
      const y = row * FLAME_ROW;
      const h = FLAME_ROW - 1;
      const inner = w > 2 ? w - 1 : w; // a pixel between neighbours
      c.globalAlpha = ancestor ? 0.6 : 1;
      c.fillStyle = this.matches(n) ? HIGHLIGHT : frameColour(n);
      c.fillRect(x, y, inner, h);
      if (n.kind === "left-out") {
        c.fillStyle = stripes;
        c.fillRect(x, y, inner, h);
      }
      if (n === this.hover) {
        c.strokeStyle = FG;
        c.strokeRect(x + 0.5, y + 0.5, Math.max(inner - 1, 1), h - 1);
      }
      if (w > 24) {
        const text = fit(n.name, w - 8, c);
        if (text) {
          c.fillStyle = FG;
          c.fillText(text, x + 4, y + FLAME_ROW / 2);
          if (text === n.name) this.labels.push(n.name);
        }
      }
      c.globalAlpha = 1;
      this.rects.push({ x, y, w, n });
    }

    hit(event) {
      const r = this.canvas.getBoundingClientRect();
      const x = event.clientX - r.left, y = event.clientY - r.top;
      const found = this.rects.find((f) => x >= f.x && x < f.x + f.w && y >= f.y && y < f.y + FLAME_ROW);
      return found ? found.n : null;
    }

    move(event) {
      const n = this.hit(event);
      this.setHover(n);
      this.canvas.style.cursor = n ? "pointer" : "default";
      if (!n) {
        tooltip.hidden = true;
        return;
      }
      const box = el("div", undefined, "card");
      box.append(el("h2", n.name));
      const dl = el("dl");
      const row = (term, value) => dl.append(el("dt", term), el("dd", value));
      const p = this.profile;
      const count = this.name === "Run" && probeOf(scope) >= 0 ? hitsText : p.weight;
      row(count === hitsText ? "hits" : p.term, count(n.samples) + ", " + share(n.samples, this.root.samples) + " of " + this.root.name);
      if (this.focus !== this.root && n !== this.focus && n.depth > this.focus.depth) {
        row("zoomed", share(n.samples, this.focus.samples) + " of " + this.focus.name);
      }
      if (n.kind === "function" || n.kind === "kernel") {
        const own = n.samples - n.children.reduce((sum, child) => sum + child.samples, 0);
        row("self", count(own) + ", " + share(own, this.root.samples) + " (in it, not in what it called)");
      }
      box.append(dl);
      const notes = {
        kernel: "Kernel code, run for the process.",
        test: "A test, as its runner names it.",
        program: "The program the processes ran.",
        reason: "What the process waited on: `proctrace render -d wall` splits each test's time by it.",
        "left-out": "The page holds the " + thousands(p.data.stacks.length) +
          " heaviest stacks of the recording: the others are this one frame. `proctrace render -d " +
          p.folded + "` has them all.",
      };
      if (notes[n.kind]) box.append(el("div", notes[n.kind], "hint"));
      box.append(el("div", n === this.focus && n.parent ? "Click to zoom out." : "Click to zoom in.", "hint"));
      tooltip.replaceChildren(box);
      placeTooltip(event);
    }
  }

  // A process's part of the details: its share, and its own flame graph
  // (drawn by showDetails once the panel is shown).
  function processProfile(i) {
    const p = procs[i];
    const box = el("div", undefined, "cpu");
    box.append(el("h3", "CPU profile"));
    if (!p.cpu_samples) {
      box.append(el("div", "No sample of it was taken.", "hint"));
      return box;
    }
    const tree = processTree(i);
    box.append(el("div", samplesText(p.cpu_samples) + ", " + share(p.cpu_samples, cpu.samples) +
      " of the run's." + leftOutText(tree, profiles.cpu), "hint"));
    const flame = el("div", undefined, "flame");
    flame.tree = tree;
    box.append(flame);
    return box;
  }

  function profilesSetup() {
    if (!cpu && !waits) return;
    $("tabs").hidden = false;
    $("tab-cpu").hidden = !cpu;
    $("tab-waits").hidden = !waits;
    if (cpu && !cpu.samples) $("tab-cpu").textContent = "Probes";
    $("cpu-scope").addEventListener("change", (event) => showProfile(shown, event.target.value));
    $("tab-timeline").addEventListener("click", showTimeline);
    for (const p of Object.values(profiles)) {
      $("tab-" + p.page).addEventListener("click", () => showProfile(p, p.scope));
    }
    $("cpu-reset").addEventListener("click", () => runFlame && runFlame.zoom(runFlame.root));
    cpuFind.addEventListener("input", () => setFind(cpuFind.value));
    if (cpu) status.dataset.cpuStacks = cpu.stacks.length;
    if (waits) status.dataset.waitsStacks = waits.stacks.length;
  }

  // The scopes of profile `p` in the view's menu: the run, its tests, its
  // probes.
  function fillScopes(p) {
    const d = p.data;
    const select = $("cpu-scope");
    select.replaceChildren();
    const option = (value, text) => {
      const o = el("option", text);
      o.value = value;
      select.append(o);
    };
    if (d.samples) {
      option("", "the whole run (" + p.weight(d.samples) + ")");
      for (const t of d.tests) option(t.name, "test " + t.name + " (" + share(t.samples, d.samples) + " of the run's " + p.term + ")");
    }
    for (const probe of d.probes || []) option(probe.label, "probe " + probe.label + " (" + hitsText(probe.hits) + ")");
  }

  // The window shows the timeline, or a profile instead of it.
  function setPage(which) {
    page = which;
    const timeline = which === "timeline";
    document.querySelector("#top .controls").hidden = !timeline;
    $("legend").hidden = !timeline;
    $("load-strip").hidden = !timeline;
    scroller.hidden = !timeline;
    $("cpu-view").hidden = timeline;
    for (const tab of ["timeline", "cpu", "waits"]) $("tab-" + tab).setAttribute("aria-pressed", String(which === tab));
    status.dataset.page = which;
    tooltip.hidden = true;
  }

  function showTimeline() {
    setPage("timeline");
  }

  // The CPU view of `of`: "" for the whole run, else a test's name, or a
  // probe's label for the stacks at its hits.
  function showCpu(of) {
    showProfile(profiles.cpu, of);
  }

  // The view of profile `p`'s scope `of`.
  function showProfile(p, of) {
    const d = p.data;
    if (!d) return;
    if (shown !== p) {
      shown = p;
      fillScopes(p);
    }
    if (of === null || (testOf(of) < 0 && probeOf(of) < 0)) of = d.samples || !(d.probes || []).length ? "" : d.probes[0].label;
    scope = of;
    p.scope = of;
    setPage(p.page);
    $("cpu-scope").value = of;
    const note = $("cpu-note");
    const probe = probeOf(of);
    showSplit(p, of);
    if (!d.samples && probe < 0) {
      note.textContent = p.name + ": " + d.headline + (data.cut ? p.cut : p.none);
      $("cpu-flame").replaceChildren();
      runFlame = null;
      return;
    }
    const tree = runTree(of);
    const what = probe >= 0 ? "Probe " + of + ": the stacks at its " + hitsText(tree.samples) + "."
      : of === "" ? p.name + ": " + d.headline + "."
      : "Test " + of + ": " + p.weight(tree.samples) + ", " + share(tree.samples, d.samples) + " of the run's.";
    const cut = d.cut_names ? " " + thousands(d.cut_names) + (d.cut_names === 1 ? " name is" : " names are") +
      " cut to " + d.max_name + " columns (…)." : "";
    note.textContent = what + leftOutText(tree, p) + cut + " Hover a frame for its " + (probe >= 0 ? "hits" : p.term) + " and share, click to zoom in or out.";
    if (!runFlame) runFlame = new Flame($("cpu-flame"), "Run");
    runFlame.show(tree, p);
    setFind(cpuFind.value);
  }

  // Rows of the wall time split the waits view lists at most.
  const SPLIT_ROWS = 20;

  // The waits view's table: each test's (or program's) wall time as its
  // CPU and its waits by reason, which add up to it; one test's alone.
  function showSplit(p, of) {
    const box = $("waits-split");
    box.replaceChildren();
    box.hidden = p !== profiles.waits || !waits.wall.length;
    if (box.hidden) return;
    const what = waits.wall_of_tests ? "test" : "program";
    const lines = of === "" ? waits.wall : waits.wall.filter((line) => line.name === of);
    box.append(el("h3", "Wall time = CPU + waits, of the main threads, by " + what + (of === "" ? ", the slowest first" : "")));
    const table = el("table");
    const head = el("tr");
    for (const column of [what, "wall", "CPU", "waits by reason"]) head.append(el("th", column));
    table.append(head);
    for (const line of lines.slice(0, SPLIT_ROWS)) {
      const tr = el("tr");
      const runs = line.processes > 1 ? " ×" + line.processes : "";
      const reasons = line.waits.map((w) => duration(w.ns) + " " + w.reason + (w.function ? " in " + w.function : "") +
        (w.waker ? " woken by " + w.waker : "") + " (" + thousands(w.count) + (w.count === 1 ? " wait)" : " waits)"));
      tr.append(el("td", line.name + runs), el("td", duration(line.wall_ns)), el("td", duration(line.cpu_ns)),
        el("td", reasons.join(" + ")));
      table.append(tr);
    }
    box.append(table);
    const rest = lines.slice(SPLIT_ROWS);
    if (rest.length) {
      const ns = rest.reduce((sum, line) => sum + line.wall_ns, 0);
      box.append(el("p", "… and " + thousands(rest.length) + " more " + what + "s (" + duration(ns) + " in all): " +
        "`proctrace render -d wall` has the slowest.", "note"));
    }
    status.dataset.waitsSplit = lines.length;
  }

  function setFind(text) {
    if (cpuFind.value !== text) cpuFind.value = text;
    if (!runFlame) return;
    const matched = runFlame.highlight(text);
    $("cpu-found").textContent = text ? "matched " + share(matched, runFlame.root.samples) + " (" + shown.weight(matched) + ")" : "";
  }

  // ---- Pointer and keys ---------------------------------------------------

  // The row and exec segment under a point of the canvas: seg is -1 on the
  // label or before the first exec, null off the bar.
  function hit(x, y) {
    if (y < AXIS_H) return null;
    const k = Math.floor((y - AXIS_H + scroller.scrollTop) / ROW_H);
    if (k < 0 || k >= visible.length) return null;
    const i = visible[k], p = procs[i];
    if (x < labelW) {
      const toggle = hasChildren(i) && x >= indentOf(p) - 3 && x <= indentOf(p) + 11;
      return { row: i, seg: -1, toggle, label: true };
    }
    const x0 = xOf(p.start), x1 = Math.max(xOf(p.end), x0 + 2);
    if (x < x0 - 3 || x > x1 + 3) return { row: i, seg: null };
    const t = tOf(x);
    let seg = -1;
    p.execs.forEach((e, k2) => { if (t >= e.start) seg = k2; });
    return { row: i, seg };
  }

  function point(event) {
    const r = canvas.getBoundingClientRect();
    return [event.clientX - r.left, event.clientY - r.top];
  }

  function showTooltip(h, event) {
    if (!h || h.seg === null) {
      tooltip.hidden = true;
      return;
    }
    tooltip.replaceChildren(card(h.row, h.seg, false));
    placeTooltip(event);
  }

  // Shows the tooltip beside the pointer, inside the window.
  function placeTooltip(event) {
    tooltip.hidden = false;
    const pad = 14;
    const w = tooltip.offsetWidth, hgt = tooltip.offsetHeight;
    let left = event.clientX + pad, top = event.clientY + pad;
    if (left + w > window.innerWidth - 4) left = Math.max(4, event.clientX - w - pad);
    if (top + hgt > window.innerHeight - 4) top = Math.max(4, event.clientY - hgt - pad);
    tooltip.style.left = left + "px";
    tooltip.style.top = top + "px";
  }

  let drag = null;

  canvas.addEventListener("mousedown", (event) => {
    if (event.button !== 0) return;
    const [x] = point(event);
    drag = { x, startX: x, moved: false, onPlot: x > labelW };
  });

  window.addEventListener("mousemove", (event) => {
    const [x, y] = point(event);
    if (drag && drag.onPlot) {
      if (Math.abs(x - drag.startX) > 3) drag.moved = true;
      if (drag.moved) {
        canvas.classList.add("dragging");
        pan(drag.x - x);
        drag.x = x;
        tooltip.hidden = true;
        return;
      }
    }
    if (event.target !== canvas) {
      if (hover) { hover = null; schedule(); }
      // A flame graph shows tooltips of its own.
      if (!(event.target.closest && event.target.closest(".flame"))) tooltip.hidden = true;
      return;
    }
    const h = hit(x, y);
    const row = h ? h.row : -1;
    if ((hover ? hover.row : -1) !== row) schedule();
    hover = h;
    canvas.style.cursor = h && (h.toggle || h.seg !== null) ? "pointer" : "default";
    showTooltip(h, event);
  });

  window.addEventListener("mouseup", (event) => {
    const d = drag;
    drag = null;
    canvas.classList.remove("dragging");
    if (!d || d.moved || event.target !== canvas) return;
    const h = hit(...point(event));
    if (!h) return;
    if (h.toggle) {
      if (terms.length) return;
      collapsed[h.row] ^= 1;
      rebuild();
    } else if (h.seg !== null) {
      showDetails(h.row, h.seg);
    }
  });

  canvas.addEventListener("dblclick", (event) => {
    const h = hit(...point(event));
    if (!h || h.toggle || h.seg === null) return;
    const p = procs[h.row];
    const pad = Math.max((p.end - p.start) * 0.05, 500);
    setView(p.start - pad, p.end + pad);
  });

  canvas.addEventListener("mouseleave", () => {
    tooltip.hidden = true;
    if (hover) { hover = null; schedule(); }
  });

  scroller.addEventListener("wheel", (event) => {
    const [x] = point(event);
    if (event.ctrlKey || event.metaKey) {
      event.preventDefault();
      zoom(Math.exp(event.deltaY * 0.002), Math.max(x, plotX));
    } else if (event.shiftKey || Math.abs(event.deltaX) > Math.abs(event.deltaY)) {
      event.preventDefault();
      pan(event.deltaX || event.deltaY);
    }
  }, { passive: false });

  scroller.addEventListener("scroll", () => {
    tooltip.hidden = true;
    schedule();
  });

  document.addEventListener("keydown", (event) => {
    if (event.target === search) {
      if (event.key === "Escape") setQuery("", true);
      return;
    }
    if (event.target === cpuFind) {
      if (event.key === "Escape") setFind("");
      return;
    }
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    if (page !== "timeline") {
      const action = { "/": () => cpuFind.focus(), "Escape": hideDetails }[event.key];
      if (action) {
        event.preventDefault();
        action();
      }
      return;
    }
    const actions = {
      "+": () => zoom(0.5), "=": () => zoom(0.5), "-": () => zoom(2), "0": fitView,
      "ArrowLeft": () => pan(-plotW / 5), "ArrowRight": () => pan(plotW / 5),
      "Escape": hideDetails, "/": () => search.focus(),
    };
    const action = actions[event.key];
    if (action) {
      event.preventDefault();
      action();
    }
  });

  search.addEventListener("input", () => setQuery(search.value, true));
  window.addEventListener("hashchange", applyHash);
  $("expand").addEventListener("click", () => setAll(false));
  $("collapse").addEventListener("click", () => setAll(true));
  $("zoom-in").addEventListener("click", () => zoom(0.5));
  $("zoom-out").addEventListener("click", () => zoom(2));
  $("zoom-fit").addEventListener("click", fitView);
  $("close-details").addEventListener("click", hideDetails);
  $("sort").addEventListener("change", (event) => setSort(event.target.value));
  new ResizeObserver(layout).observe(scroller);

  header();
  legend();
  profilesSetup();
  applyHash();
  // The first frame at once, not on an animation frame: a page that is
  // loaded only to be read back (or printed) may never get one.
  draw();
})();
