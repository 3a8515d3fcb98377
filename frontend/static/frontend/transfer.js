// A transfer's page (files/templates/files/transfer.html): its progress, read every
// second from the portal's status/ (which the beat refreshes from rclone's JSON log on the
// cluster) until it is over; then the page reloads once for its final form.
"use strict";

window.PortalTransfer = (function () {
  function size(n) {
    const units = ["bytes", "KB", "MB", "GB", "TB"];
    let i = 0;
    while (n >= 1000 && i < units.length - 1) { n /= 1000; i += 1; }
    return i === 0 ? `${n} bytes` : `${n.toFixed(1)} ${units[i]}`;
  }

  function show(panel, s) {
    panel.dataset.state = s.state;
    panel.dataset.bytes = String(s.bytes);
    panel.querySelector("[data-transfer-state]").textContent = s.state_label;
    panel.querySelector("[data-transfer-bar]").value = s.percent;
    panel.querySelector("[data-transfer-percent]").textContent = `${s.percent}%`;
    let counts = `${size(s.bytes)} of ${size(s.total_bytes)}; ${s.files} of ${s.total_files} files`;
    if (!s.final && s.speed > 0) counts += `; ${size(s.speed)}/s`;
    if (!s.final && s.eta !== null) counts += `; about ${Math.round(s.eta)} s left`;
    panel.querySelector("[data-transfer-counts]").textContent = counts;
    panel.querySelector("[data-transfer-message]").textContent = s.message; // text, never markup
    const list = document.querySelector("[data-transfer-events]");
    if (list && list.children.length !== s.events.length) {
      list.replaceChildren(...s.events.map((e) => {
        const item = document.createElement("li");
        const time = document.createElement("time");
        time.dateTime = e.at;
        time.textContent = new Date(e.at).toLocaleTimeString();
        item.append(time, " ", e.text);
        return item;
      }));
    }
  }

  function watch(panel) {
    if (!panel) return;
    const url = panel.dataset.statusUrl;
    let wasFinal = ["done", "failed", "cancelled"].includes(panel.dataset.state);
    async function tick() {
      try {
        const response = await fetch(url, { headers: { Accept: "application/json" } });
        if (response.ok) {
          const s = await response.json();
          show(panel, s);
          if (s.final) {
            if (!wasFinal) window.location.reload();
            return;
          }
        }
      } catch (e) { /* the next tick tries again */ }
      window.setTimeout(tick, 1000);
    }
    if (!wasFinal) tick();
  }

  return { watch };
})();
