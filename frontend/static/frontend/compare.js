/* The comparison page (/compare/): the table of what differs between runs, sortable, and
one Plotly chart per metric. Everything comes from the page's JSON (metrics/compare/data.py):
at most 64 points per curve, groups as their mean with a band, single runs faded beneath
(one trace per group, runs separated by gaps, so 1,000 runs stay 1,000 segments of one
trace), and the baseline drawn on every chart. Sorting changes the URL's ``sort`` so the
address reopens the same view. */
"use strict";

const PortalCompare = (() => {
  const COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"];
  const $ = (sel, root = document) => root.querySelector(sel);

  function fmt(v) {
    if (v === null || v === undefined) return "";
    if (Array.isArray(v)) return v.join(", ");
    if (typeof v === "number") return Number.isInteger(v) ? String(v) : String(Number(v.toPrecision(4)));
    return String(v);
  }

  function rgba(hex, alpha) {
    const n = parseInt(hex.slice(1), 16);
    return `rgba(${(n >> 16) & 255},${(n >> 8) & 255},${n & 255},${alpha})`;
  }

  function value(run, key) {
    if (key === "id" || key === "state" || key === "group") return run[key];
    const m = /^metric\.(.+)\.(last|best|best_step)$/.exec(key);
    if (m) return (run.metrics[m[1]] || {})[m[2]];
    return run.fields[key];
  }

  function sortRuns(runs, sort) {
    if (!sort) return runs;
    const desc = sort.startsWith("-"), key = sort.replace(/^-/, "");
    const has = runs.filter((r) => value(r, key) !== undefined && value(r, key) !== null);
    const not = runs.filter((r) => !has.includes(r));
    has.sort((a, b) => {
      const x = value(a, key), y = value(b, key);
      const c = typeof x === "number" && typeof y === "number" ? x - y : fmt(x).localeCompare(fmt(y), undefined, { numeric: true });
      return desc ? -c : c;
    });
    return has.concat(not);
  }

  function drawTable(data, sort) {
    const table = $("[data-compare-table]");
    const body = table.tBodies[0];
    Portal.rows(body, sortRuns(data.runs.slice(), sort), (run) => {
      const tr = document.createElement("tr");
      tr.dataset.runId = run.id;
      const cells = [];
      const first = document.createElement("td");
      const a = document.createElement("a");
      a.href = run.url;
      a.textContent = `#${run.id}`;
      first.append(a, ` ${run.name}`);
      cells.push(first);
      if (data.options.group) cells.push(run.group);
      data.columns.forEach((c) => cells.push(run.fields[c]));
      data.metrics.forEach((m) => {
        const v = run.metrics[m.name] || {};
        cells.push(v.last, v.best, v.best_step);
      });
      cells.forEach((c, i) => {
        if (i === 0) { tr.append(c); return; }
        const td = document.createElement("td");
        td.textContent = fmt(c);
        tr.append(td);
      });
      return tr;
    });
    table.querySelectorAll("th[data-sort-key]").forEach((th) => {
      const key = th.dataset.sortKey;
      th.setAttribute("aria-sort", sort === key ? "ascending" : sort === `-${key}` ? "descending" : "none");
    });
  }

  // Runs' curves joined into one trace, a null between runs (a gap, not a line across).
  function joined(chart, members, byTime) {
    const x = [], y = [];
    chart.runs.forEach((run) => {
      if (members && !members.has(run.id)) return;
      (byTime ? run.x : chart.x).forEach((v) => x.push(v));
      run.y.forEach((v) => y.push(v));
      x.push(null);
      y.push(null);
    });
    return { x, y };
  }

  function drawChart(el, chart, data) {
    const byTime = data.options.x === "time";
    const traces = [];
    const grouped = chart.groups.length > 0;
    if (grouped) {
      chart.groups.forEach((g, i) => {
        const color = COLORS[i % COLORS.length];
        const x = byTime ? g.x : chart.x;
        const faded = joined(chart, new Set(g.runs), byTime);
        traces.push({ ...faded, mode: "lines", line: { color: rgba(color, 0.25), width: 1 }, name: `${g.name}: runs`, legendgroup: g.name, showlegend: false, hoverinfo: "skip", meta: "runs" });
        traces.push({ x, y: g.lower, mode: "lines", line: { width: 0 }, legendgroup: g.name, showlegend: false, hoverinfo: "skip", meta: "lower" });
        traces.push({ x, y: g.upper, mode: "lines", line: { width: 0 }, fill: "tonexty", fillcolor: rgba(color, 0.2), legendgroup: g.name, showlegend: false, hoverinfo: "skip", meta: "band" });
        traces.push({ x, y: g.y, mode: "lines", line: { color, width: 2 }, name: `${g.name} (${g.runs.length})`, legendgroup: g.name, meta: "mean" });
      });
    } else {
      chart.runs.forEach((run, i) => {
        traces.push({ x: byTime ? run.x : chart.x, y: run.y, mode: "lines", line: { color: COLORS[i % COLORS.length], width: 1.5 }, name: `#${run.id}`, meta: "run", showlegend: chart.runs.length <= 20 });
      });
    }
    if (chart.baseline) {
      traces.push({ x: byTime ? chart.baseline.x : chart.x, y: chart.baseline.y, mode: "lines", line: { color: "#000", width: 2.5, dash: "dash" }, name: `baseline: ${chart.baseline.name}`, meta: "baseline" });
    }
    const layout = {
      title: { text: `${chart.metric} (${chart.goal === "min" ? "lower" : "higher"} is better)`, font: { size: 14 } },
      margin: { l: 55, r: 10, t: 36, b: 40 },
      height: 320,
      xaxis: { title: byTime ? "seconds since the run's first point" : "step" },
      legend: { orientation: "h" },
    };
    Plotly.newPlot(el, traces, layout, { responsive: true, displaylogo: false });
  }

  function start(data) {
    let sort = data.options.sort || "";
    drawTable(data, sort);
    $("[data-compare-table]").querySelectorAll("th[data-sort-key] button").forEach((button) => {
      button.addEventListener("click", () => {
        const key = button.parentElement.dataset.sortKey;
        sort = sort === key ? `-${key}` : key;
        drawTable(data, sort);
        const url = new URL(window.location.href);
        url.searchParams.set("sort", sort);
        window.history.replaceState(null, "", url);
        let hidden = $("[data-sort]");
        if (!hidden) {
          hidden = Object.assign(document.createElement("input"), { type: "hidden", name: "sort" });
          hidden.dataset.sort = "";
          $("[data-compare-form]").append(hidden);
        }
        hidden.value = sort;
      });
    });
    // One chart a frame: the first is on screen while the others are drawn.
    const box = $("[data-compare-charts]");
    const places = data.charts.map((chart) => {
      const el = document.createElement("div");
      el.className = "chart";
      el.dataset.chart = chart.metric;
      box.append(el);
      return el;
    });
    const drawFrom = (i) => {
      if (i >= data.charts.length) { box.dataset.drawn = String(data.charts.length); return; }
      drawChart(places[i], data.charts[i], data);
      requestAnimationFrame(() => drawFrom(i + 1));
    };
    drawFrom(0);
    ["[data-group]", "[data-baseline]", "#compare-x", "#compare-band"].forEach((sel) => {
      const field = $(sel);
      if (field) field.addEventListener("change", () => field.form.submit());
    });
  }

  return { start };
})();
