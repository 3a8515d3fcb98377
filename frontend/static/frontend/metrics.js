/* Live training-metric charts for a job page (Plotly, bundled; no CDN).

One chart per metric, sorted by name (or all of them overlaid, one y-axis per metric
family); system metrics (CPU, memory, GPU) in their own panel, always against time,
linear and unsmoothed (readings of a machine, not a noisy training signal), one trace
per node. Compared runs keep one colour each across every chart, named in the legends.
A distributed job's ranks are all drawn, one, or as a min/mean/max band per metric.
Fed by the job's metrics websocket (history, then live points). Beside it on the page:
metrics-series.js (what these scripts share, loaded first), metrics-compare.js (the
other runs to compare) and metrics-ranks.js (the rank panel, with its own poll). */
"use strict";

const PortalMetrics = (() => {
  const TRACE_BUDGET = 3000; // points per trace before a fresh downsampled copy is fetched
  const WEBGL_MIN_POINTS = 5000; // SVG below this; WebGL only for long series…
  const WEBGL_MAX_FIGURES = 8; // …and few figures (browsers cap WebGL contexts near 16)
  const MARKERS_BELOW = 20; // a short series shows its points: a lone point draws no line
  const BAND_BINS = 600; // step intervals of a min/mean/max band
  const BAND_REDRAW_MS = 2000; // live bands are redrawn at most this often
  const DASHES = ["solid", "dot", "dash", "dashdot", "longdash"];
  const UNITS = [[180, 1, "s"], [3 * 3600, 60, "min"], [Infinity, 3600, "h"]]; // [up to s, per, name]
  const { COLORS, isSystem, family, unitOf, smooth, curveOf, assignClips, splitAt, chartWidth, push, store, fetchJson } = PortalSeries;

  // One job page's charts (start() is called once per page): its elements and what it
  // has read so far.
  let root, jobId, boxes, empty, status, controls;
  let series; // this job's series: id -> {meta, run, step, value, time, seq:Set, t0, t1}
  let compared; // job id -> [entries] (the other runs metrics-compare.js adds)
  let runs; // run -> {name, color}, in legend order
  let figures = new Map(); // figure key -> {box, div, mode, traces:[{id, run, smoothed}]}
  let starts = new Map(); // run -> time of its first point (relative-time origin)
  let unit = UNITS[0];
  let rendered; // what else follows each render()
  const $ = (selector) => root.querySelector(selector);

  function start(rootElement, job) {
    root = rootElement;
    jobId = job;
    boxes = { metrics: $("[data-charts]"), system: $("[data-system-charts]") };
    empty = $("[data-metrics-empty]");
    status = $("[data-metrics-status]");
    controls = { layout: $("[data-layout]"), xaxis: $("[data-xaxis]"), logy: $("[data-logy]"), smoothing: $("[data-smoothing]"), ranks: $("[data-ranks]") };
    series = new Map();
    compared = new Map();
    runs = new Map([[jobId, { name: root.dataset.runName || `#${jobId}`, color: COLORS[0] }]]);
    rendered = [];
    wireControls();
    connect();
    // For metrics-compare.js: the runs drawn, the other runs' series, a redraw.
    return { runs, compared, render, status, width: () => chartWidth(boxes.metrics), afterRender: (f) => rendered.push(f) };
  }

  const opts = () => ({
    layout: controls.layout.value,
    x: controls.xaxis.value, // step | relative | time
    logy: controls.logy.checked,
    smoothing: Number(controls.smoothing.value),
    ranks: controls.ranks.value, // all | band | rank:N
  });

  // Which of the training series the rank choice shows (system series: every node's).
  function shownByRank(e) {
    const mode = opts().ranks;
    if (isSystem(e.meta) || mode === "all" || mode === "band") return true;
    return e.meta.rank === Number(mode.slice(5));
  }

  // The rank choice lists this job's ranks; it shows only for a job with several.
  function updateRankChoice() {
    const found = [...new Set([...series.values()].filter((e) => !isSystem(e.meta)).map((e) => e.meta.rank))].sort((a, b) => a - b);
    const label = controls.ranks.closest("label");
    label.hidden = found.length < 2;
    const wanted = ["all", "band", ...found.slice(0, 256).map((r) => `rank:${r}`)];
    const have = [...controls.ranks.options].map((o) => o.value);
    if (wanted.join() === have.join()) return;
    const keep = controls.ranks.value;
    controls.ranks.innerHTML = "";
    controls.ranks.add(new Option("all ranks", "all"));
    controls.ranks.add(new Option("min / mean / max band", "band"));
    found.slice(0, 256).forEach((r) => controls.ranks.add(new Option(`rank ${r}`, `rank:${r}`)));
    controls.ranks.value = wanted.includes(keep) ? keep : "all";
  }

  // Several ranks' series of one metric as three traces: max (no line), min filled up to
  // it, and the mean. Points fall into at most `BAND_BINS` equal step intervals (each
  // series is downsampled on its own, and ranks may log at other steps), drawn where at
  // least half the ranks have a point; x is the bin's mean step (or mean time).
  function bandTraces(group, style, mode) {
    let lo = Infinity, hi = -Infinity;
    group.forEach((e) => e.step.forEach((step) => { lo = Math.min(lo, step); hi = Math.max(hi, step); }));
    const width = Math.max(1, (hi - lo) / BAND_BINS);
    const bins = new Map(); // bin -> {values, steps, times, ranks:Set}
    group.forEach((e) => e.step.forEach((step, i) => {
      const b = Math.floor((step - lo) / width);
      if (!bins.has(b)) bins.set(b, { values: [], steps: [], times: [], ranks: new Set() });
      const bin = bins.get(b);
      bin.values.push(e.value[i]); bin.steps.push(step); bin.times.push(e.time[i]); bin.ranks.add(e.meta.rank);
    }));
    const mean = (v) => v.reduce((a, b) => a + b, 0) / v.length;
    const kept = [...bins.keys()].sort((a, b) => a - b).map((b) => bins.get(b)).filter((bin) => 2 * bin.ranks.size >= group.length);
    const steps = kept.map((bin) => mean(bin.steps));
    const pick = (f) => kept.map((bin) => f(bin.values));
    const times = kept.map((bin) => mean(bin.times));
    const x = xOf(mode, group[0].run, steps, times);
    const base = { type: "scatter", yaxis: style.yaxis, legendgroup: style.name, cliponaxis: false };
    return [
      { ...base, x, y: pick((v) => v.reduce((a, b) => Math.max(a, b), -Infinity)), mode: "lines", line: { width: 0, color: style.color }, showlegend: false, hoverinfo: "skip", name: `${style.name} max` },
      { ...base, x: x.slice(), y: pick((v) => v.reduce((a, b) => Math.min(a, b), Infinity)), mode: "lines", line: { width: 0, color: style.color }, fill: "tonexty", fillcolor: style.color + "33", showlegend: false, hoverinfo: "skip", name: `${style.name} min` },
      { ...base, x: x.slice(), y: pick(mean), mode: steps.length < MARKERS_BELOW ? "lines+markers" : "lines", line: { color: style.color, width: 2 }, name: `${style.name} (mean of ${group.length} ranks)` },
    ];
  }

  function allEntries() {
    const list = [...series.values()];
    compared.forEach((entries) => list.push(...entries));
    return list;
  }

  const cmp = (a, b) => (a < b ? -1 : a > b ? 1 : 0);
  const runOrder = (run) => [...runs.keys()].indexOf(run);
  const byRunThenName = (a, b) => runOrder(a.run) - runOrder(b.run) || cmp(a.meta.key, b.meta.key)
    || a.meta.rank - b.meta.rank || a.meta.attempt - b.meta.attempt;
  const byName = (a, b) => (a.startsWith("system:") - b.startsWith("system:")) || cmp(a, b); // system last

  // System charts are always against time: relative when the others are against step.
  const modeFor = (system) => (system && opts().x === "step" ? "relative" : opts().x);

  // Always new arrays: Plotly keeps the ones it is given, and push() must not grow them
  // behind its back (extendTraces would then add the same points a second time).
  function xOf(mode, run, steps, times) {
    if (mode === "step") return steps.slice();
    if (mode === "time") return times.map((t) => new Date(t * 1000));
    const t0 = starts.get(run);
    return times.map((t) => (t - t0) / unit[1]);
  }

  function traceFor(entry, style, smoothed, mode, glOk, part = entry) {
    const o = opts();
    const weight = isSystem(entry.meta) ? 0 : o.smoothing;
    const faint = !smoothed && weight > 0;
    const n = part.step.length;
    return {
      type: n > WEBGL_MIN_POINTS && glOk ? "scattergl" : "scatter",
      mode: n < MARKERS_BELOW ? "lines+markers" : "lines",
      name: style.name,
      legendgroup: `${entry.run}:${entry.meta.id}`, // the legend toggles raw and smoothed together
      x: xOf(mode, entry.run, part.step, part.time),
      y: smoothed ? smooth(part.value, weight) : part.value.slice(),
      yaxis: style.yaxis,
      line: { color: style.color, dash: style.dash, width: faint ? 1 : 2 },
      marker: { size: n === 1 ? 8 : 5 },
      cliponaxis: false, // a point on the axis (a run's first, at 0) is drawn whole
      opacity: faint ? 0.3 : 1,
      showlegend: !faint,
    };
  }

  function layoutFor(key, mode, families, legend) {
    const o = opts();
    const system = key.startsWith("system:");
    const type = o.logy && !system ? "log" : "linear";
    const xtitle = { step: "step", time: "wall time", relative: `relative time (${unit[2]})` }[mode];
    const layout = {
      height: 300,
      margin: { l: 50, r: 15, t: 10, b: 40 },
      // Relative time starts at 0; system values (%, GB) are never negative.
      xaxis: { title: { text: xtitle }, type: mode === "time" ? "date" : "linear", automargin: true, rangemode: mode === "relative" ? "tozero" : "normal" },
      yaxis: { type, title: { text: system ? unitOf(key) : "" }, automargin: true, rangemode: system ? "tozero" : "normal" },
      // Above the plot: never on the x-axis title (Plotly grows the top margin to fit).
      showlegend: legend,
      legend: { orientation: "h", x: 0, y: 1.02, yanchor: "bottom" },
      uirevision: `${mode}-${unit[2]}-${o.logy}-${o.layout}`,
    };
    // Overlaid: one y-axis per family, alternating sides; Plotly shifts the outer ones.
    (families || []).forEach((name, i) => {
      const axis = { type, title: { text: name }, automargin: true };
      if (i > 0) Object.assign(axis, { overlaying: "y", side: i % 2 ? "right" : "left", tickmode: "auto", showgrid: false });
      if (i > 1) Object.assign(axis, { anchor: "free", autoshift: true, position: i % 2 ? 1 : 0 });
      layout[i ? `yaxis${i + 1}` : "yaxis"] = axis;
    });
    return layout;
  }

  function newFigure(key) {
    const box = document.createElement("figure");
    box.className = "chart";
    box.dataset.figure = key;
    const caption = document.createElement("figcaption");
    caption.textContent = key === "all" ? "all metrics" : key.replace(/^system:(sys\/)?/, "");
    const div = document.createElement("div");
    box.append(caption, div);
    // Plotly's own "responsive" follows the window only; the grid also resizes a
    // chart when charts are added or removed.
    if (window.ResizeObserver) new ResizeObserver(() => { if (div.data) Plotly.Plots.resize(div); }).observe(div);
    return { box, div };
  }

  // Full redraw: after the history, a control change, a new series or run.
  function render() {
    const o = opts();
    updateRankChoice();
    const groups = groupEntries(o);
    const byRun = compared.size > 0; // comparing: colour by run, dash by metric
    const glOk = groups.size <= WEBGL_MAX_FIGURES;
    const next = new Map();
    const placed = { metrics: 0, system: 0 };
    [...groups.keys()].sort(byName).forEach((key) => {
      const system = key.startsWith("system:");
      const fig = drawFigure(key, groups.get(key).sort(byRunThenName), o, byRun, glOk);
      // In name order, live or after a reload (a new metric does not go last).
      const box = boxes[system ? "system" : "metrics"];
      const index = placed[system ? "system" : "metrics"]++;
      if (box.children[index] !== fig.box) box.insertBefore(fig.box, box.children[index] || null);
      next.set(key, fig);
    });
    figures.forEach((fig, key) => { if (!next.has(key)) { Plotly.purge(fig.div); fig.box.remove(); } });
    figures = next;
    showToolbar(placed);
    countPoints();
  }

  // The shown series by figure key (one per metric, "all" overlaid, "system:<key>"), after
  // setting each run's relative-time origin and the time unit.
  function groupEntries(o) {
    const entries = allEntries().filter(shownByRank);
    assignClips(entries);
    starts = new Map();
    entries.forEach((e) => starts.set(e.run, Math.min(starts.get(e.run) ?? Infinity, e.t0)));
    const span = Math.max(0, ...entries.filter((e) => e.time.length).map((e) => e.t1 - starts.get(e.run)));
    unit = UNITS.find(([limit]) => span <= limit);
    const groups = new Map();
    entries.forEach((e) => {
      const key = isSystem(e.meta) ? `system:${e.meta.key}` : o.layout === "overlay" ? "all" : e.meta.key;
      if (!groups.has(key)) groups.set(key, []);
      groups.get(key).push(e);
    });
    return groups;
  }

  // One figure's traces and layout, drawn (a new figure is made here, placed by render).
  function drawFigure(key, members, o, byRun, glOk) {
    const system = key.startsWith("system:");
    const fig = figures.get(key) || newFigure(key);
    fig.mode = modeFor(system);
    fig.traces = [];
    const families = key === "all" ? [...new Set(members.map((e) => family(e.meta.key)))].sort() : null;
    const traces = [];
    const bands = bandsOf(fig, members, o, system, families, byRun, traces);
    const banded = new Set([...bands.values()].flat());
    const lines = members.filter((e) => !banded.has(e));
    // One colour (and legend entry) per curve: a requeued run's attempts are one curve.
    const curves = [...new Set(lines.map(curveOf))];
    const shapes = lineTraces(fig, members, lines, curves, o, system, families, byRun, glOk, traces);
    const layout = layoutFor(key, fig.mode, families, byRun || curves.length + bands.size > 1);
    // Attempt boundaries (one per attempt, even where several metrics share the chart).
    const seen = new Set();
    layout.shapes = shapes.filter((sh) => !seen.has(`${sh.x0}|${sh.name}`) && seen.add(`${sh.x0}|${sh.name}`));
    layout.annotations = layout.shapes.map((sh) => ({ x: sh.x0, y: 1, xref: "x", yref: "paper", text: sh.name, showarrow: false, xanchor: "left", yanchor: "top", font: { size: 10, color: "#666" } }));
    fig.div.dataset.attemptMarkers = String(layout.shapes.length);
    Plotly.react(fig.div, traces, layout, { responsive: true, displaylogo: false });
    if (!fig.wired) wireZoom(fig);
    return fig;
  }

  // Bands: one per run, metric and attempt that several ranks log (a metric only
  // rank 0 logs stays a line); the legend names the metric.
  function bandsOf(fig, members, o, system, families, byRun, traces) {
    const bands = new Map();
    if (o.ranks === "band" && !system) {
      members.forEach((e) => {
        const k = `${e.run}|${e.meta.key}|${e.meta.attempt}`;
        if (!bands.has(k)) bands.set(k, []);
        bands.get(k).push(e);
      });
      bands.forEach((group, k) => { if (group.length < 2) bands.delete(k); });
      [...bands.values()].forEach((group, i) => {
        const e = group[0];
        const run = runs.get(e.run);
        const name = (byRun ? `${run.name} · ` : "") + e.meta.key + (e.meta.attempt ? ` (attempt ${e.meta.attempt + 1})` : "");
        const axis = families ? families.indexOf(family(e.meta.key)) : 0;
        const style = { color: byRun ? run.color : COLORS[i % COLORS.length], name, yaxis: axis ? `y${axis + 1}` : "y" };
        bandTraces(group, style, fig.mode).forEach((t) => { traces.push(t); fig.traces.push({ id: null, run: e.run, smoothed: false, band: true }); });
      });
    }
    return bands;
  }

  // A line (and its smoothed copy) per series; the points of an attempt the next one
  // redid, faded; where each later attempt starts, as shapes for the layout.
  function lineTraces(fig, members, lines, curves, o, system, families, byRun, glOk, traces) {
    const nodes = new Set(members.map((e) => e.meta.node).filter(Boolean));
    const shapes = [];
    lines.forEach((e) => {
      const i = curves.indexOf(curveOf(e));
      const own = [...new Set(members.filter((m) => m.run === e.run).map(curveOf))];
      const run = runs.get(e.run);
      const label = system ? e.meta.label : e.meta.key + (e.meta.rank ? ` [rank ${e.meta.rank}]` : "");
      const style = byRun
        ? { color: run.color, dash: DASHES[own.indexOf(curveOf(e)) % DASHES.length], name: run.name + (own.length > 1 ? ` · ${label}` : "") }
        : { color: COLORS[i % COLORS.length], dash: "solid", name: system && nodes.size > 1 && e.meta.node ? `${e.meta.node}` : label };
      const axis = families ? families.indexOf(family(e.meta.key)) : 0;
      style.yaxis = axis ? `y${axis + 1}` : "y";
      const first = lines.find((m) => curveOf(m) === curveOf(e)) === e; // one legend entry per curve
      const { kept, overlap } = splitAt(e, e.clip);
      (o.smoothing && !system ? [false, true] : [false]).forEach((smoothed) => {
        const trace = traceFor(e, style, smoothed, fig.mode, glOk, kept);
        trace.legendgroup = `${e.run}:${curveOf(e)}`;
        if (!first) trace.showlegend = false;
        trace.meta = { attempt: e.meta.attempt + 1 };
        traces.push(trace);
        fig.traces.push({ id: e.meta.id, run: e.run, smoothed, clip: e.clip, part: "kept" });
      });
      if (overlap.step.length) {
        // Replaced by the next attempt from its resume step: kept, faded, never dropped.
        const faded = traceFor(e, style, false, fig.mode, glOk, overlap);
        Object.assign(faded, { opacity: 0.25, showlegend: false, legendgroup: `${e.run}:${curveOf(e)}`, name: `${style.name} (attempt ${e.meta.attempt + 1}, redone by the next)`, meta: { attempt: e.meta.attempt + 1, overlapped: true } });
        faded.line = { ...faded.line, dash: "dot", width: 1 };
        traces.push(faded);
        fig.traces.push({ id: e.meta.id, run: e.run, smoothed: false, clip: e.clip, part: "overlap" });
      }
      if (e.meta.attempt > 0 && e.step.length && !system) {
        // Where this attempt starts: a marker line across the chart.
        const at = xOf(fig.mode, e.run, [Math.min(...e.step)], [e.t0])[0];
        shapes.push({ type: "line", xref: "x", yref: "paper", x0: at, x1: at, y0: 0, y1: 1, line: { color: "#888", width: 1, dash: "dash" }, name: `attempt ${e.meta.attempt + 1}` });
      }
    });
    return shapes;
  }

  function showToolbar(placed) {
    empty.hidden = figures.size > 0;
    // The chart controls only once there is a chart to control.
    $(".metrics-toolbar").hidden = figures.size === 0;
    $("[data-system]").hidden = placed.system === 0;
    rendered.forEach((f) => f());
  }

  // Bands are recomputed over all points: live, at most every BAND_REDRAW_MS.
  let bandTimer = null;
  function renderBandSoon() {
    if (bandTimer) return;
    bandTimer = setTimeout(() => { bandTimer = null; render(); }, BAND_REDRAW_MS);
  }

  function countPoints() {
    let n = 0;
    figures.forEach((fig) => fig.div.data && fig.div.data.forEach((t, i) => {
      if (!fig.traces[i].smoothed && !fig.traces[i].band && fig.traces[i].run === jobId) n += t.x.length;
    }));
    root.dataset.plottedPoints = String(n);
  }

  // Live batch: append with extendTraces; a new series, an over-budget one or one that
  // outgrows its markers or the time unit redraws.
  function appendPoints(message) {
    let redraw = false;
    const refetch = [];
    message.series.forEach((meta) => {
      const known = series.get(meta.id);
      if (!known) { series.set(meta.id, store(meta, { step: [], value: [], time: [], seq: [] }, jobId)); redraw = true; }
      else known.meta = meta;
    });
    const added = new Map();
    const t0 = starts.get(jobId);
    Object.entries(message.points).forEach(([id, rows]) => {
      const entry = series.get(Number(id));
      if (!entry) return;
      // A point may come twice (history and stream overlap at connect time).
      const fresh = rows.filter((r) => !entry.seq.has(r[3]) && !(entry.downsampled && entry.maxSeq !== null && r[3] <= entry.maxSeq));
      fresh.sort((a, b) => a[0] - b[0] || a[3] - b[3]);
      const before = entry.step.length;
      fresh.forEach((r) => push(entry, r[0], r[1], r[2], r[3]));
      if (!fresh.length) return;
      added.set(entry.meta.id, fresh);
      if (entry.clip !== undefined && entry.clip !== Infinity) redraw = true; // an earlier attempt
      if (before < MARKERS_BELOW && entry.step.length >= MARKERS_BELOW) redraw = true;
      if (!(entry.t0 >= t0) || entry.t1 - t0 > unit[0]) redraw = true;
      if (entry.step.length > TRACE_BUDGET) refetch.push(entry.meta.id);
    });
    if (message.reload) { loadHistory(); return; }
    if (redraw) { render(); }
    else if (opts().ranks === "band") { renderBandSoon(); }
    else {
      const o = opts();
      figures.forEach((fig) => {
        const update = { x: [], y: [] }, indices = [];
        fig.traces.forEach((t, i) => {
          const rows = t.run === jobId && t.part !== "overlap" && added.get(t.id);
          if (!rows) return;
          const entry = series.get(t.id);
          update.x.push(xOf(fig.mode, jobId, rows.map((r) => r[0]), rows.map((r) => r[2])));
          update.y.push(t.smoothed ? smooth(entry.value, o.smoothing).slice(-rows.length) : rows.map((r) => r[1]));
          indices.push(i);
        });
        if (indices.length) Plotly.extendTraces(fig.div, update, indices);
      });
      countPoints();
    }
    if (refetch.length) reread(refetch);
  }

  async function reread(ids) {
    const data = await fetchJson(`/jobs/${jobId}/metrics/?series=${ids.join(",")}&width=${chartWidth(boxes.metrics)}`);
    data.series.forEach((s) => series.set(s.id, store(s, s, jobId)));
    render();
  }

  async function loadHistory() {
    const data = await fetchJson(`/jobs/${jobId}/metrics/?width=${chartWidth(boxes.metrics)}`);
    series.clear();
    data.series.forEach((s) => series.set(s.id, store(s, s, jobId)));
    render();
  }

  // Zoom: fetch the visible range at full resolution (or downsampled to the chart's
  // width if even that is too much), by step, run by run; a double-click goes back.
  function wireZoom(fig) {
    fig.wired = true;
    fig.div.on("plotly_relayout", async (ev) => {
      if (ev["xaxis.autorange"]) { render(); return; }
      const lo = ev["xaxis.range[0]"], hi = ev["xaxis.range[1]"];
      if (lo === undefined || hi === undefined) return;
      const byRun = new Map();
      fig.traces.forEach((t) => {
        if (t.smoothed || t.band) return;
        if (!byRun.has(t.run)) byRun.set(t.run, []);
        byRun.get(t.run).push(t.run === jobId ? series.get(t.id) : compared.get(t.run).find((e) => e.meta.id === t.id));
      });
      status.textContent = "loading the zoomed range…";
      try {
        for (const [run, entries] of byRun) {
          const range = stepRange(fig.mode, run, entries, lo, hi);
          if (!range) continue;
          const ids = entries.map((e) => e.meta.id).join(",");
          const data = await fetchJson(`/jobs/${run}/metrics/?series=${ids}&lo=${range[0]}&hi=${range[1]}&width=${chartWidth(fig.div)}`);
          data.series.forEach((s) => fig.traces.forEach((t, i) => {
            if (t.id !== s.id || t.run !== run) return;
            const parts = splitAt(s, t.clip === undefined ? Infinity : t.clip);
            const d = t.part === "overlap" ? parts.overlap : parts.kept;
            Plotly.restyle(fig.div, {
              x: [xOf(fig.mode, run, d.step, d.time)],
              y: [t.smoothed ? smooth(d.value, opts().smoothing) : d.value],
            }, [i]);
          }));
        }
        status.textContent = "";
      } catch (err) {
        status.textContent = "could not load the zoomed range: " + err.message;
      }
    });
  }

  // The steps a run logged inside the visible x range (the server reads by step).
  function stepRange(mode, run, entries, lo, hi) {
    if (mode === "step") return [Math.floor(lo), Math.ceil(hi)];
    const seconds = mode === "time" ? (v) => new Date(v).getTime() / 1000 : (v) => starts.get(run) + v * unit[1];
    const from = seconds(lo), to = seconds(hi);
    let a = Infinity, b = -Infinity;
    entries.forEach((e) => e.time.forEach((when, i) => {
      if (when >= from && when <= to) { a = Math.min(a, e.step[i]); b = Math.max(b, e.step[i]); }
    }));
    return a <= b ? [a, b] : null;
  }

  function connect() {
    Portal.socket(`/ws/jobs/${jobId}/metrics/?width=${chartWidth(boxes.metrics)}`, {
      onMessage: (message) => {
        if (message.type === "history") {
          series.clear();
          message.series.forEach((s) => series.set(s.id, store(s, s, jobId)));
          render();
          status.textContent = "";
        } else if (message.type === "points") {
          appendPoints(message);
        }
      },
      onDrop: () => { status.textContent = "live updates interrupted; reconnecting…"; },
    });
  }

  function wireControls() {
    [controls.layout, controls.xaxis, controls.logy, controls.ranks].forEach((c) => c.addEventListener("change", render));
    controls.smoothing.addEventListener("input", () => {
      $("[data-smoothing-value]").textContent = controls.smoothing.value;
      render();
    });
  }

  return { start, smooth, family };
})();
