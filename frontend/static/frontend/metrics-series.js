/* What the job page's metric scripts share (metrics.js draws, metrics-compare.js adds
other runs): a series as the page keeps it, read from /jobs/<id>/metrics/ or the stream,
and what follows from a series alone: its metric family and unit, its smoothing, and a
requeued run's attempts joined into one curve. */
"use strict";

const PortalSeries = (() => {
  const COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"];
  const SPLIT = /^(train|training|val|valid|validation|test|eval|epoch|batch)[_/.-]/;

  // The portal's sampler logs system metrics as "sys/…" (system=true); any "sys/" key counts.
  const isSystem = (meta) => meta.system || meta.key.startsWith("sys/");

  // "loss", "val_loss" and "train/loss" are one family and share a y-axis when overlaid.
  function family(key) {
    let name = key;
    while (SPLIT.test(name)) name = name.replace(SPLIT, "");
    return name === "acc" ? "accuracy" : name;
  }

  function unitOf(key) {
    const m = /_(percent|gb|mib)(@|$)/.exec(key);
    return m ? { percent: "%", gb: "GB", mib: "MiB" }[m[1]] : "";
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

  // A requeued run logs each attempt as its own series. Drawn as one curve: an attempt's
  // points count up to the first step of any later attempt (which resumed from a
  // checkpoint and wins from there on); the rest, the overlapped tail, is drawn faded.
  const curveOf = (e) => `${e.run}|${e.meta.key}|${e.meta.rank}|${isSystem(e.meta) ? e.meta.node : ""}`;
  function assignClips(entries) {
    const byCurve = new Map();
    entries.forEach((e) => {
      e.clip = Infinity;
      if (isSystem(e.meta)) return;
      if (!byCurve.has(curveOf(e))) byCurve.set(curveOf(e), []);
      byCurve.get(curveOf(e)).push(e);
    });
    byCurve.forEach((list) => {
      list.forEach((e) => {
        list.forEach((later) => {
          if (later.meta.attempt > e.meta.attempt && later.step.length) {
            e.clip = Math.min(e.clip, Math.min(...later.step));
          }
        });
      });
    });
  }
  // {kept, overlap}: the points before and from ``clip`` (each {step, value, time}).
  function splitAt(data, clip) {
    const kept = { step: [], value: [], time: [] }, overlap = { step: [], value: [], time: [] };
    data.step.forEach((step, i) => {
      const part = step < clip ? kept : overlap;
      part.step.push(step); part.value.push(data.value[i]); part.time.push(data.time[i]);
    });
    return { kept, overlap };
  }

  function chartWidth(el) {
    return Math.max(300, Math.min(1500, Math.round(el.clientWidth || 1000)));
  }

  function push(entry, step, value, time, seq) {
    entry.step.push(step); entry.value.push(value); entry.time.push(time);
    if (seq !== null) entry.seq.add(seq);
    entry.t0 = Math.min(entry.t0, time);
    entry.t1 = Math.max(entry.t1, time);
  }

  function store(meta, data, run) {
    const entry = {
      meta, run, step: [], value: [], time: [], seq: new Set(), t0: Infinity, t1: -Infinity,
      downsampled: data.downsampled, maxSeq: data.max_seq === undefined ? null : data.max_seq,
    };
    data.step.forEach((step, i) => push(entry, step, data.value[i], data.time[i], data.seq[i]));
    return entry;
  }

  async function fetchJson(url) {
    const response = await fetch(url, { headers: { Accept: "application/json" } });
    const data = await response.json();
    if (!response.ok) throw new Error(data.error || response.statusText);
    return data;
  }

  return { COLORS, isSystem, family, unitOf, smooth, curveOf, assignClips, splitAt, chartWidth, push, store, fetchJson };
})();
