/* "Compare runs" on a job page: other runs of the same owner drawn on its charts
(metrics.js), each in a colour of its own that the list shows beside its name. */
"use strict";

const PortalMetricsCompare = (() => {
  const { COLORS, fetchJson, store } = PortalSeries;

  // charts: what PortalMetrics.start returns (the runs it draws, their series, render()).
  function start(root, charts) {
    const { runs, compared } = charts;
    const picks = [...root.querySelectorAll("[data-compare] input[type=checkbox]")];

    // Other runs of the same owner, one colour each (the first one no shown run has).
    async function compare(pick) {
      const run = Number(pick.value);
      if (!pick.checked) { compared.delete(run); runs.delete(run); charts.render(); return; }
      const taken = new Set([...runs.values()].map((r) => r.color));
      runs.set(run, { name: pick.dataset.runName, color: COLORS.find((c) => !taken.has(c)) || COLORS[run % COLORS.length] });
      try {
        const data = await fetchJson(`/jobs/${run}/metrics/?width=${charts.width()}`);
        if (!pick.checked) return; // unticked while loading
        compared.set(run, data.series.map((s) => store(s, s, run)));
        charts.render();
      } catch (err) {
        pick.checked = false;
        runs.delete(run);
        charts.status.textContent = "could not load run: " + err.message;
      }
    }

    // After each drawing: every ticked run's colour in the list, and how many there are.
    function showPicks() {
      picks.forEach((pick) => {
        const run = pick.checked && runs.get(Number(pick.value));
        pick.parentElement.querySelector("[data-swatch]").style.background = run ? run.color : "";
      });
      const count = root.querySelector("[data-compare-count]");
      if (count) count.textContent = compared.size ? `(${compared.size})` : "";
    }

    picks.forEach((pick) => pick.addEventListener("change", () => compare(pick)));
    const clear = root.querySelector("[data-compare-clear]");
    if (clear) {
      clear.addEventListener("click", () => {
        picks.forEach((pick) => { pick.checked = false; runs.delete(Number(pick.value)); });
        compared.clear();
        charts.render();
      });
    }
    charts.afterRender(showPicks);
  }

  return { start };
})();
