/* The experiment page: a live table of trials (sortable, filterable, best highlighted) and
   four Plotly charts, refreshed from /experiments/<id>/data/ every 3 s while it runs. */
"use strict";
(function () {
  const POLL_MS = 3000;
  const text = (s) => (s === null || s === undefined ? "" : String(s));
  const fmt = (v) => (typeof v === "number" ? (Math.abs(v) >= 1e4 || (Math.abs(v) < 1e-3 && v !== 0) ? v.toExponential(3) : Number(v.toPrecision(4)).toString()) : text(v));
  const layout = (extra) => Object.assign({ margin: { t: 10, r: 20, b: 45, l: 60 }, height: 320, uirevision: "keep", showlegend: false }, extra);
  const config = { displaylogo: false, responsive: true };

  function start(root) {
    const state = { sort: { key: "number", dir: 1 }, data: null };
    const rows = root.parentNode.querySelector("[data-trial-rows]");
    const head = root.parentNode.querySelector("[data-trial-head]");
    const stateFilter = root.parentNode.querySelector("[data-trial-state]");
    const textFilter = root.parentNode.querySelector("[data-trial-filter]");
    const chart = (name) => root.parentNode.querySelector(`[data-chart="${name}"]`);
    stateFilter.addEventListener("change", () => drawTable(state));
    textFilter.addEventListener("input", () => drawTable(state));
    state.rows = rows; state.head = head; state.stateFilter = stateFilter; state.textFilter = textFilter;

    // The first answer was asked for by the page before Plotly loaded (the template).
    let early = window.portalExperimentData;
    async function poll() {
      let data;
      try {
        const pending = early || fetch(root.dataset.dataUrl, { headers: { Accept: "application/json" } });
        early = null;
        const response = await pending;
        if (!response.ok) throw new Error(response.status);
        data = await response.json();
      } catch (err) {
        setTimeout(poll, POLL_MS * 2);
        return;
      }
      state.data = data;
      drawSummary(root, data);
      drawTable(state);
      drawHistory(chart("history"), data);
      drawCurves(chart("curves"), data);
      drawImportance(chart("importance"), data);
      // Parallel coordinates are WebGL, whose first draw costs most (a context and its
      // shaders, most of a second without a GPU): after the others are painted.
      requestAnimationFrame(() => setTimeout(() => drawParallel(chart("parallel"), data), 0));
      root.dataset.refreshed = String(Date.now());
      if (data.state === "running") setTimeout(poll, POLL_MS);
    }
    poll();
  }

  function drawSummary(root, data) {
    const page = root.parentNode;
    const badge = root.querySelector("[data-exp-state]");
    badge.textContent = data.cancelling ? "cancelling" : data.state;
    badge.className = `badge big state-${data.state}`;
    page.querySelector("[data-exp-message]").textContent = data.message;
    const counts = Object.entries(data.counts).map(([k, n]) => `${n} ${k}`).join(", ");
    page.querySelector("[data-exp-progress]").textContent = `${data.trials_started} of ${data.max_trials} trials started${counts ? ": " + counts : ""}`;
    page.querySelector("[data-exp-best]").textContent = data.best
      ? `trial ${data.best.number}: ${data.metric} = ${fmt(data.best.value)}${data.best.value_std !== null ? " ± " + fmt(data.best.value_std) : ""} (${Object.entries(data.best.params).map(([k, v]) => `${k}=${fmt(v)}`).join(", ")})`
      : "—";
    if (data.usage) {
      page.querySelector("[data-exp-usage]").textContent =
        `${data.usage.gpu_hours.toFixed(3)} GPU-hours, ${data.usage.cpu_hours.toFixed(3)} CPU-hours, ${data.usage.wall_hours.toFixed(2)} h of jobs (from accounting, every trial and fold)`;
    }
    const cancel = page.querySelector("[data-exp-cancel]");
    if (cancel) cancel.hidden = data.state !== "running" || data.cancelling;
    const relaunch = page.querySelector("[data-relaunch-best]");
    if (relaunch) relaunch.disabled = !data.best;
  }

  function columns(data) {
    const params = Object.keys(data.parameters);
    return [
      { key: "number", label: "#", value: (t) => t.number },
      { key: "state", label: "State", value: (t) => t.state },
      ...params.map((p) => ({ key: "p:" + p, label: p, value: (t) => t.params[p] })),
      { key: "value", label: data.metric + (data.folds > 1 ? " (mean ± std)" : ""), value: (t) => t.value },
      { key: "last", label: "Latest (step)", value: (t) => t.last_value },
      { key: "message", label: "Note", value: (t) => t.message },
    ];
  }

  function drawTable(state) {
    const data = state.data;
    if (!data) return;
    const cols = columns(data);
    state.head.replaceChildren(...cols.map((c) => {
      const th = document.createElement("th");
      const button = document.createElement("button");
      button.type = "button"; button.className = "link sort";
      button.textContent = c.label + (state.sort.key === c.key ? (state.sort.dir > 0 ? " ▲" : " ▼") : "");
      button.addEventListener("click", () => {
        state.sort = { key: c.key, dir: state.sort.key === c.key ? -state.sort.dir : 1 };
        drawTable(state);
      });
      th.setAttribute("aria-sort", state.sort.key === c.key ? (state.sort.dir > 0 ? "ascending" : "descending") : "none");
      th.appendChild(button);
      return th;
    }));
    const wanted = state.stateFilter.value;
    const needle = state.textFilter.value.trim().toLowerCase();
    const sortCol = cols.find((c) => c.key === state.sort.key) || cols[0];
    const trials = data.trials
      .filter((t) => !wanted || t.state === wanted)
      .filter((t) => !needle || JSON.stringify(t.params).toLowerCase().includes(needle) || text(t.message).toLowerCase().includes(needle))
      .sort((a, b) => {
        const x = sortCol.value(a), y = sortCol.value(b);
        if (x === y) return a.number - b.number;
        if (x === null || x === undefined) return 1;
        if (y === null || y === undefined) return -1;
        return (x < y ? -1 : 1) * state.sort.dir;
      });
    const bestNumber = data.best ? data.best.number : null;
    Portal.rows(state.rows, trials, (t) => {
      const tr = document.createElement("tr");
      tr.dataset.trial = t.number;
      tr.dataset.state = t.state;
      if (t.number === bestNumber) { tr.className = "best"; tr.title = "the best trial so far"; }
      for (const c of cols) {
        const td = document.createElement("td");
        if (c.key === "number") {
          td.textContent = t.number;
          for (const job of t.jobs || []) {
            const a = document.createElement("a");
            a.href = job.url; a.className = "fold-link";
            a.textContent = data.folds > 1 ? `f${job.fold + 1}` : "job";
            a.title = `job ${job.id} (${job.state})`;
            td.append(" ", a);
          }
        } else if (c.key === "state") {
          const badge = document.createElement("span");
          badge.className = `badge state-${t.state}`; badge.textContent = t.state_label;
          td.appendChild(badge);
        } else if (c.key === "value") {
          td.textContent = t.value === null ? "—" : fmt(t.value) + (t.value_std !== null ? " ± " + fmt(t.value_std) : "");
          if (t.fold_values && t.fold_values.length > 1) td.title = "folds: " + t.fold_values.map(fmt).join(", ");
        } else if (c.key === "last") {
          td.textContent = t.last_value === null ? "—" : `${fmt(t.last_value)} (${t.last_step})`;
        } else if (c.key === "message") {
          td.textContent = t.message; td.className = "note";
        } else {
          td.textContent = fmt(c.value(t));
        }
        tr.appendChild(td);
      }
      return tr;
    });
  }

  function drawParallel(el, data) {
    const done = data.trials.filter((t) => t.state === "completed" && t.value !== null);
    if (!done.length) { el.textContent = "Drawn when a trial has completed."; el.dataset.points = "0"; return; }
    const dims = Object.entries(data.parameters).map(([name, d]) => {
      if (d.type === "choice") {
        const labels = d.values.map(text);
        return { label: name, values: done.map((t) => labels.indexOf(text(t.params[name]))), tickvals: labels.map((_, i) => i), ticktext: labels, range: [0, Math.max(labels.length - 1, 1)] };
      }
      if (d.log) return { label: `log10(${name})`, values: done.map((t) => Math.log10(t.params[name])), range: [Math.log10(d.low), Math.log10(d.high)] };
      return { label: name, values: done.map((t) => t.params[name]), range: [d.low, d.high] };
    });
    dims.push({ label: data.metric, values: done.map((t) => t.value) });
    if (el.textContent && !el.classList.contains("js-plotly-plot")) el.textContent = "";
    Plotly.react(el, [{ type: "parcoords", dimensions: dims, line: { color: done.map((t) => t.value), colorscale: "Viridis", reversescale: data.goal === "minimize", showscale: true } }], layout({ margin: { t: 40, r: 60, b: 20, l: 60 } }), config);
    el.dataset.points = String(done.length);
  }

  function drawHistory(el, data) {
    const done = data.trials.filter((t) => t.state === "completed" && t.value !== null).sort((a, b) => a.number - b.number);
    let best = null;
    const bestSoFar = done.map((t) => (best = best === null ? t.value : (data.goal === "maximize" ? Math.max(best, t.value) : Math.min(best, t.value))));
    const other = data.trials.filter((t) => t.state !== "completed" && t.last_value !== null);
    Plotly.react(el, [
      { x: done.map((t) => t.number), y: done.map((t) => t.value), error_y: { type: "data", array: done.map((t) => t.value_std || 0), visible: data.folds > 1 }, mode: "markers", name: "trial", marker: { size: 8 } },
      { x: done.map((t) => t.number), y: bestSoFar, mode: "lines", line: { shape: "hv" }, name: "best so far" },
      { x: other.map((t) => t.number), y: other.map((t) => t.last_value), mode: "markers", marker: { symbol: "x", color: "#999" }, name: "latest value (running or stopped)" },
    ], layout({ xaxis: { title: { text: "trial" } }, yaxis: { title: { text: data.metric } }, showlegend: true, legend: { orientation: "h", y: -0.25 } }), config);
    el.dataset.points = String(done.length);
  }

  // Up to SEPARATE_CURVES trials each curve is its own trace (its own colour, its name in
  // the hover); past it the curves are joined into one trace per style, a gap between
  // trials, with each point's trial in its hover: 2,000 trials are three traces, not 2,000.
  const SEPARATE_CURVES = 100;

  function drawCurves(el, data) {
    const bestNumber = data.best ? data.best.number : null;
    const states = Object.fromEntries(data.trials.map((t) => [String(t.number), t.state]));
    const faded = (number) => states[number] === "stopped" || states[number] === "failed";
    const entries = Object.entries(data.curves);
    let traces;
    if (entries.length <= SEPARATE_CURVES) {
      traces = entries.map(([number, points]) => ({
        x: points.map((p) => p[0]), y: points.map((p) => p[1]), mode: "lines", name: `trial ${number}`,
        line: { width: Number(number) === bestNumber ? 3.5 : 1.2, dash: states[number] === "stopped" ? "dot" : "solid" },
        opacity: faded(number) ? 0.45 : 0.9,
      }));
    } else {
      const joined = (name, style, pick) => {
        const x = [], y = [], text = [];
        for (const [number, points] of entries) {
          if (!pick(number)) continue;
          for (const p of points) { x.push(p[0]); y.push(p[1]); text.push(`trial ${number}`); }
          x.push(null); y.push(null); text.push("");
        }
        return { x, y, text, name, mode: "lines", hovertemplate: "%{text}<br>step %{x}: %{y}<extra></extra>", ...style };
      };
      const best = String(bestNumber);
      traces = [
        joined("stopped or failed", { line: { width: 1, color: "#9aa4ae", dash: "dot" }, opacity: 0.45 }, (n) => n !== best && faded(n)),
        joined("trials", { line: { width: 1, color: "#1f77b4" }, opacity: 0.35 }, (n) => n !== best && !faded(n)),
        joined(`best: trial ${best}`, { line: { width: 3.5, color: "#d62728" } }, (n) => n === best),
      ].filter((t) => t.x.length);
    }
    Plotly.react(el, traces, layout({ xaxis: { title: { text: "step" } }, yaxis: { title: { text: data.metric } }, showlegend: entries.length > SEPARATE_CURVES }), config);
    el.dataset.traces = String(entries.length);
  }

  function drawImportance(el, data) {
    const entries = Object.entries(data.importances || {}).sort((a, b) => a[1] - b[1]);
    if (!entries.length) { el.textContent = "Shown once four trials have completed."; return; }
    if (!el.classList.contains("js-plotly-plot")) el.textContent = "";
    Plotly.react(el, [{ type: "bar", orientation: "h", x: entries.map((e) => e[1]), y: entries.map((e) => e[0]) }], layout({ height: 60 + 40 * entries.length, xaxis: { title: { text: "importance (PED-ANOVA)" }, range: [0, 1] }, margin: { t: 10, r: 20, b: 45, l: 90 } }), config);
    el.dataset.bars = String(entries.length);
  }

  window.PortalExperiment = { start };
})();
