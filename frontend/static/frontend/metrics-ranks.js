/* The rank panel of a distributed job's page: where each rank runs and how fast it goes
(GET /jobs/<id>/metrics/ranks/), refreshed every few seconds while the job is active, and
which rank holds the others back. Shown for a job with several ranks. */
"use strict";

const PortalRanks = (() => {
  const POLL_MS = 3000;

  function start(panel, jobId) {
    if (!panel || Number(panel.dataset.worldSize) < 2) return; // one process: no panel
    let busy = false;
    const body = panel.querySelector("tbody");
    const summary = panel.querySelector("[data-straggler]");
    const active = () => document.getElementById("job").dataset.active === "true";
    const fmt = (v, digits) => (v === null || v === undefined ? "—" : Number(v).toFixed(digits));
    async function refresh() {
      if (busy) return; // the last answer is still on its way: no overlapping requests
      busy = true;
      let data;
      try {
        const response = await fetch(`/jobs/${jobId}/metrics/ranks/`, { headers: { Accept: "application/json" } });
        if (!response.ok) return;
        data = await response.json();
      } catch (err) { return; } finally { busy = false; }
      panel.hidden = data.ranks.length < 2;
      if (panel.hidden) return;
      const rates = data.ranks.map((r) => r.steps_per_second).filter((v) => v !== null);
      const fastest = rates.length ? Math.max(...rates) : null;
      body.innerHTML = "";
      data.ranks.forEach((r) => {
        const row = body.insertRow();
        row.dataset.rank = r.rank;
        if (r.rank === data.slowest) row.className = "straggler";
        [r.rank, r.node || "—", r.last_step ?? "—", fmt(r.steps_per_second, 2), r.lag_steps ? `${r.lag_steps} steps` : "—"]
          .forEach((text) => { row.insertCell().textContent = String(text); });
      });
      panel.querySelector("[data-ranks-key]").textContent = data.key;
      panel.querySelector("[data-ranks-nodes]").textContent = `${data.ranks.length} ranks on ${data.nodes.length} node${data.nodes.length === 1 ? "" : "s"} (${data.nodes.join(", ")})`;
      const slow = data.ranks.find((r) => r.rank === data.slowest);
      summary.textContent = slow
        ? `Rank ${slow.rank} on ${slow.node || "?"} is the slowest: ${fmt(slow.steps_per_second, 2)} steps/s against ${fmt(fastest, 2)} for the fastest, ${slow.lag_steps} steps behind.`
        : "No rank stands out: they keep pace with each other.";
      summary.classList.toggle("warning", Boolean(slow));
    }
    refresh();
    const timer = setInterval(() => { if (active()) refresh(); else { refresh(); clearInterval(timer); } }, POLL_MS);
  }

  return { start };
})();
