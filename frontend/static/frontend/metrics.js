/* Live training-metric charts for a job page (Plotly, bundled; no CDN). */
"use strict";

const PortalMetrics = (() => {
  const TRACE_BUDGET = 3000; // points per trace before a fresh downsampled copy is fetched
  const WEBGL_MIN_POINTS = 5000; // SVG below this; WebGL only for long series…
  const WEBGL_MAX_FIGURES = 8; // …and few figures (browsers cap WebGL contexts near 16)
  const COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"];

  function chartWidth(el) {
    return Math.max(300, Math.min(1500, Math.round(el.clientWidth || 1000)));
  }

  // TensorBoard-style debiased exponential moving average.
  function smooth(values, weight) {
    if (!weight) return values;
    const out = new Array(values.length);
    let last = 0, n = 0;
    for (let i = 0; i < values.length; i++) {
      last = last * weight + (1 - weight) * values[i];
      n++;
      out[i] = last / (1 - Math.pow(weight, n));
    }
    return out;
  }

  function start(root, jobId) {
    const charts = root.querySelector("[data-charts]");
    const empty = root.querySelector("[data-metrics-empty]");
    const status = root.querySelector("[data-metrics-status]");
    const controls = {
      layout: root.querySelector("[data-layout]"),
      xaxis: root.querySelector("[data-xaxis]"),
      logy: root.querySelector("[data-logy]"),
      smoothing: root.querySelector("[data-smoothing]"),
      compare: root.querySelector("[data-compare]"),
    };
    const series = new Map(); // id -> {meta, step, value, time, seq:Set, run}
    const compared = new Map(); // job id -> [series]
    let figures = new Map(); // figure key -> {div, traces:[{id, smoothed}]}

    const opts = () => ({
      layout: controls.layout.value,
      x: controls.xaxis.value,
      logy: controls.logy.checked,
      smoothing: Number(controls.smoothing.value),
    });

    function store(meta, data, run) {
      return {
        meta, run,
        step: data.step.slice(), value: data.value.slice(), time: data.time.slice(),
        seq: new Set(data.seq), downsampled: data.downsampled,
        maxSeq: data.max_seq === undefined ? null : data.max_seq,
      };
    }

    function figureKey(meta) {
      if (meta.system) return "system:" + meta.key;
      return opts().layout === "overlay" ? "all" : meta.key;
    }

    // A copy: Plotly keeps the arrays it is given, and a live batch pushed onto entry.step
    // would then be in the trace already when extendTraces adds it (drawn twice).
    function xs(entry) {
      if (opts().x === "time") return entry.time.map((t) => new Date(t * 1000));
      return entry.step.slice();
    }

    function traceFor(entry, index, smoothed, glOk) {
      const o = opts();
      const raw = !smoothed;
      const own = entry.run === jobId;
      const name = (own ? "" : `#${entry.run} `) + entry.meta.label + (smoothed ? " (smoothed)" : "");
      const long = entry.step.length > WEBGL_MIN_POINTS;
      return {
        type: long && glOk ? "scattergl" : "scatter",
        mode: "lines",
        name,
        x: xs(entry),
        y: smoothed ? smooth(entry.value, o.smoothing) : entry.value.slice(),
        line: { color: COLORS[index % COLORS.length], width: raw && o.smoothing ? 1 : 2, dash: own ? "solid" : "dash" },
        opacity: raw && o.smoothing ? 0.3 : 1,
        meta: { series: entry.meta.id, smoothed },
        showlegend: !(raw && o.smoothing),
      };
    }

    function layoutFor(title) {
      const o = opts();
      return {
        title: { text: title, font: { size: 14 } },
        margin: { l: 50, r: 10, t: 30, b: 40 },
        height: 280,
        xaxis: { title: { text: o.x === "time" ? "wall time" : "step" }, type: o.x === "time" ? "date" : "linear" },
        yaxis: { type: o.logy ? "log" : "linear" },
        legend: { orientation: "h", y: -0.25 },
        uirevision: `${o.x}-${o.logy}-${o.layout}`,
      };
    }

    function allEntries() {
      const list = [...series.values()];
      compared.forEach((entries) => list.push(...entries));
      return list;
    }

    // Full redraw: after the history, a layout change or a re-read series.
    function render() {
      const groups = new Map();
      allEntries().forEach((entry) => {
        const key = figureKey(entry.meta);
        if (!groups.has(key)) groups.set(key, []);
        groups.get(key).push(entry);
      });
      empty.hidden = groups.size > 0;
      const glOk = groups.size <= WEBGL_MAX_FIGURES;
      const next = new Map();
      groups.forEach((entries, key) => {
        let fig = figures.get(key);
        if (!fig) {
          const div = document.createElement("div");
          div.className = "chart";
          div.dataset.figure = key;
          charts.appendChild(div);
          fig = { div };
          // Plotly's own "responsive" follows the window only; the grid also
          // resizes a chart when charts are added or removed.
          if (window.ResizeObserver) new ResizeObserver(() => { if (div.data) Plotly.Plots.resize(div); }).observe(div);
        }
        const traces = [];
        fig.traces = [];
        entries.forEach((entry, i) => {
          traces.push(traceFor(entry, i, false, glOk));
          fig.traces.push({ id: entry.meta.id, smoothed: false, run: entry.run });
          if (opts().smoothing) {
            traces.push(traceFor(entry, i, true, glOk));
            fig.traces.push({ id: entry.meta.id, smoothed: true, run: entry.run });
          }
        });
        const title = key === "all" ? "metrics" : key.replace(/^system:/, "");
        Plotly.react(fig.div, traces, layoutFor(title), { responsive: true, displaylogo: false });
        if (!fig.wired) wireZoom(fig);
        next.set(key, fig);
      });
      figures.forEach((fig, key) => { if (!next.has(key)) { Plotly.purge(fig.div); fig.div.remove(); } });
      figures = next;
      countPoints();
    }

    function countPoints() {
      let n = 0;
      figures.forEach((fig) => fig.div.data && fig.div.data.forEach((t, i) => {
        if (!fig.traces[i].smoothed && fig.traces[i].run === jobId) n += t.x.length;
      }));
      root.dataset.plottedPoints = String(n);
    }

    // Live batch: append with extendTraces; a new series or an over-budget one redraws.
    function appendPoints(message) {
      let redraw = false;
      const refetch = [];
      message.series.forEach((meta) => {
        const known = series.get(meta.id);
        if (!known) { series.set(meta.id, store(meta, { step: [], value: [], time: [], seq: [] }, jobId)); redraw = true; }
        else known.meta = meta;
      });
      const added = new Map();
      Object.entries(message.points).forEach(([id, rows]) => {
        const entry = series.get(Number(id));
        if (!entry) return;
        // A point may come twice (history and stream overlap at connect time).
        const fresh = rows.filter((r) => !entry.seq.has(r[3]) && !(entry.downsampled && entry.maxSeq !== null && r[3] <= entry.maxSeq));
        fresh.sort((a, b) => a[0] - b[0] || a[3] - b[3]);
        fresh.forEach((r) => { entry.step.push(r[0]); entry.value.push(r[1]); entry.time.push(r[2]); entry.seq.add(r[3]); });
        if (fresh.length) added.set(entry.meta.id, fresh);
        if (entry.step.length > TRACE_BUDGET) refetch.push(entry.meta.id);
      });
      if (message.reload) { loadHistory(); return; }
      if (redraw) { render(); }
      else {
        const o = opts();
        figures.forEach((fig) => {
          const update = { x: [], y: [] }, indices = [];
          fig.traces.forEach((t, i) => {
            const rows = t.run === jobId && added.get(t.id);
            if (!rows) return;
            const entry = series.get(t.id);
            update.x.push(rows.map((r) => (o.x === "time" ? new Date(r[2] * 1000) : r[0])));
            update.y.push(t.smoothed ? smooth(entry.value, o.smoothing).slice(-rows.length) : rows.map((r) => r[1]));
            indices.push(i);
          });
          if (indices.length) Plotly.extendTraces(fig.div, update, indices);
        });
        countPoints();
      }
      if (refetch.length) reread(refetch);
    }

    async function fetchJson(url) {
      const response = await fetch(url, { headers: { Accept: "application/json" } });
      const data = await response.json();
      if (!response.ok) throw new Error(data.error || response.statusText);
      return data;
    }

    async function reread(ids) {
      const data = await fetchJson(`/jobs/${jobId}/metrics/?series=${ids.join(",")}&width=${chartWidth(charts)}`);
      data.series.forEach((s) => series.set(s.id, store(s, s, jobId)));
      render();
    }

    async function loadHistory() {
      const data = await fetchJson(`/jobs/${jobId}/metrics/?width=${chartWidth(charts)}`);
      series.clear();
      data.series.forEach((s) => series.set(s.id, store(s, s, jobId)));
      render();
    }

    // Zoom: fetch the visible step range at full resolution (or downsampled to the
    // chart's width if even that is too much); a double-click goes back.
    function wireZoom(fig) {
      fig.wired = true;
      fig.div.on("plotly_relayout", async (ev) => {
        if (ev["xaxis.autorange"]) { render(); return; }
        const lo = ev["xaxis.range[0]"], hi = ev["xaxis.range[1]"];
        if (lo === undefined || hi === undefined) return;
        const range = opts().x === "time" ? stepRange(fig, new Date(lo).getTime() / 1000, new Date(hi).getTime() / 1000) : [Math.floor(lo), Math.ceil(hi)];
        if (!range) return;
        const byRun = new Map();
        fig.traces.forEach((t) => { if (!t.smoothed) { if (!byRun.has(t.run)) byRun.set(t.run, []); byRun.get(t.run).push(t.id); } });
        status.textContent = "loading the zoomed range…";
        try {
          for (const [run, ids] of byRun) {
            const data = await fetchJson(`/jobs/${run}/metrics/?series=${ids.join(",")}&lo=${range[0]}&hi=${range[1]}&width=${chartWidth(fig.div)}`);
            data.series.forEach((s) => {
              const entry = { meta: s, step: s.step, value: s.value, time: s.time };
              const o = opts();
              fig.traces.forEach((t, i) => {
                if (t.id !== s.id || t.run !== run) return;
                Plotly.restyle(fig.div, {
                  x: [o.x === "time" ? entry.time.map((v) => new Date(v * 1000)) : entry.step],
                  y: [t.smoothed ? smooth(entry.value, o.smoothing) : entry.value],
                }, [i]);
              });
            });
          }
          status.textContent = "";
        } catch (err) {
          status.textContent = "could not load the zoomed range: " + err.message;
        }
      });
    }

    function stepRange(fig, lo, hi) {
      let a = Infinity, b = -Infinity;
      fig.traces.forEach((t) => {
        const entry = t.run === jobId ? series.get(t.id) : null;
        if (!entry) return;
        entry.time.forEach((when, i) => { if (when >= lo && when <= hi) { a = Math.min(a, entry.step[i]); b = Math.max(b, entry.step[i]); } });
      });
      return a <= b ? [a, b] : null;
    }

    // Other runs for comparison, drawn dashed.
    async function addComparison(run) {
      if (!run || compared.has(Number(run))) return;
      const data = await fetchJson(`/jobs/${run}/metrics/?width=${chartWidth(charts)}`);
      compared.set(Number(run), data.series.filter((s) => !s.system).map((s) => store(s, s, Number(run))));
      render();
    }

    function connect() {
      Portal.socket(`/ws/jobs/${jobId}/metrics/?width=${chartWidth(charts)}`, {
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

    [controls.layout, controls.xaxis, controls.logy].forEach((c) => c.addEventListener("change", render));
    controls.smoothing.addEventListener("input", () => {
      root.querySelector("[data-smoothing-value]").textContent = controls.smoothing.value;
      render();
    });
    if (controls.compare) {
      controls.compare.addEventListener("change", async () => {
        const run = controls.compare.value;
        controls.compare.value = "";
        try { await addComparison(run); } catch (err) { status.textContent = "could not load run: " + err.message; }
      });
    }
    const clear = root.querySelector("[data-compare-clear]");
    if (clear) clear.addEventListener("click", () => { compared.clear(); render(); });
    connect();
  }

  return { start, smooth };
})();
