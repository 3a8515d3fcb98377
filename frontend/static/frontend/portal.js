/* HPC portal: live job pages. No framework, no build step, no CDN. */
"use strict";

const Portal = (() => {
  const csrf = () => document.body.dataset.csrf;
  const WARN_SECONDS = 15 * 60;

  // --- websocket with reconnect --------------------------------------------------
  // onMessage(data) for each message; onReopen() after a reconnect (catch up on what
  // was missed); onDrop() when the connection is lost. 4401/4404 (not allowed) end it.
  function socket(path, { onMessage, onReopen, onDrop }) {
    let delay = 1000;
    let everConnected = false;
    function connect() {
      const scheme = location.protocol === "https:" ? "wss" : "ws";
      const ws = new WebSocket(`${scheme}://${location.host}${path}`);
      ws.onopen = () => {
        if (everConnected && onReopen) onReopen();
        everConnected = true;
        delay = 1000;
      };
      ws.onmessage = (event) => onMessage(JSON.parse(event.data));
      ws.onclose = (event) => {
        if (event.code === 4401 || event.code === 4404) return; // not allowed: do not retry
        if (onDrop) onDrop();
        setTimeout(connect, delay);
        delay = Math.min(delay * 2, 30000);
      };
    }
    connect();
  }

  function live(path, onJob, onReconnect) {
    socket(path, {
      onMessage: (data) => { if (data.type === "job") onJob(data.job); },
      onReopen: onReconnect,
    });
  }

  // --- rendering helpers -----------------------------------------------------------
  function duration(seconds) {
    seconds = Math.max(0, Math.floor(seconds));
    const h = Math.floor(seconds / 3600), m = Math.floor((seconds % 3600) / 60), s = seconds % 60;
    return h ? `${h}h ${String(m).padStart(2, "0")}m` : `${m}m ${String(s).padStart(2, "0")}s`;
  }

  function applyJob(el, job) {
    el.dataset.state = job.state;
    if (job.is_active !== undefined) el.dataset.active = job.is_active;
    if (job.started_at) el.dataset.startedAt = job.started_at;
    const badge = el.querySelector("[data-badge]");
    if (badge) {
      badge.textContent = job.state_label;
      badge.className = badge.className.replace(/state-\S+/, `state-${job.state}`);
    }
    const reason = el.querySelector("[data-reason]");
    if (reason) {
      reason.textContent = job.state === "pending" ? job.pending_text
        : (job.cancel_requested && el.dataset.active === "true" ? "cancelling…" : "");
    }
    const active = el.dataset.active === "true";
    el.querySelectorAll(".cancel-form").forEach((f) => { f.hidden = !active; });
    if (job.ended_at && job.started_at) {
      el.dataset.endedAt = job.ended_at;
      const elapsedEl = el.querySelector("[data-elapsed]");
      if (elapsedEl) elapsedEl.textContent = `ran ${duration((Date.parse(job.ended_at) - Date.parse(job.started_at)) / 1000)}`;
    }
    const set = (sel, value) => { const n = document.querySelector(sel); if (n && value !== undefined) n.textContent = value; };
    // Session link: offered only while the notebook is ready.
    el.querySelectorAll("[data-open-session]").forEach((a) => {
      if (job.session_open_url) a.href = job.session_open_url;
      if (!el.closest("#session")) a.hidden = !job.session_open_url;
    });
    const card = document.getElementById("session");
    if (el.id === "job" && card && job.session_state) {
      card.dataset.sessionState = job.session_state;
      card.querySelectorAll("[data-open-session]").forEach((a) => { if (job.session_open_url) a.href = job.session_open_url; });
      for (const part of ["starting", "ready", "closed"]) {
        const node = card.querySelector(`[data-session-${part}]`);
        if (node) node.hidden = job.session_state !== part;
      }
      const revoke = card.querySelector("[data-session-revoke]");
      if (revoke) revoke.hidden = job.session_state !== "ready";
    }
    if (el.id === "job") {
      set("[data-node]", (job.node_list || []).join(", ") || job.node || "—");
      set("[data-scheduler-id]", job.scheduler_job_id || "not submitted yet");
      set("[data-exit-code]", job.exit_code === null ? "—" : job.exit_code);
      set("[data-work-dir]", job.work_dir || "—");
      document.querySelectorAll("[data-files-link], [data-tensorboard-link]").forEach((a) => { a.hidden = !job.work_dir; });
      set("[data-message]", job.message || "");
      set("[data-error-tail]", job.stderr_tail || "");
      document.querySelectorAll("[data-error-tail-box]").forEach((box) => { box.hidden = !job.stderr_tail; });
    }
  }

  // Elapsed and remaining walltime, and the 15-minutes-left warning.
  const warned = new Set(JSON.parse(sessionStorage.getItem("portal-warned") || "[]"));
  function tick() {
    const warnings = [];
    document.querySelectorAll("[data-job-id][data-state]").forEach((el) => {
      const started = el.dataset.startedAt ? Date.parse(el.dataset.startedAt) : NaN;
      const elapsedEl = el.querySelector("[data-elapsed]");
      const remainingEl = el.querySelector("[data-remaining]") || document.querySelector("#job ~ * [data-remaining]");
      if (isNaN(started) || el.dataset.state !== "running") {
        if (remainingEl && el.dataset.state !== "running") remainingEl.textContent = "";
        return;
      }
      const elapsed = (Date.now() - started) / 1000;
      const left = Number(el.dataset.limitMinutes) * 60 - elapsed;
      if (elapsedEl) elapsedEl.textContent = `ran ${duration(elapsed)}`;
      if (remainingEl) remainingEl.textContent = `· ${duration(left)} left`;
      if (left <= WARN_SECONDS && el.dataset.session === "true") { // sessions only
        warnings.push(el.dataset.jobId);
        notifyOnce(el.dataset.jobId, left);
      }
    });
    const banner = document.getElementById("walltime-warning");
    if (banner) {
      banner.hidden = warnings.length === 0;
      banner.textContent = warnings.length
        ? `Job ${warnings.map((id) => "#" + id).join(", ")} will reach its walltime in less than 15 minutes: save your work.`
        : "";
    }
  }
  function notifyOnce(jobId, left) {
    if (warned.has(jobId)) return;
    warned.add(jobId);
    sessionStorage.setItem("portal-warned", JSON.stringify([...warned]));
    if ("Notification" in window && Notification.permission === "granted") {
      new Notification(`Job #${jobId}: ${duration(left)} of walltime left`, { body: "Save your work before the session ends." });
    }
  }

  // Cancel buttons: confirm in a dialog, then POST with progress feedback.
  function wireCancel(root) {
    const dialog = document.getElementById("cancel-dialog");
    root.addEventListener("submit", (event) => {
      const form = event.target.closest(".cancel-form");
      if (!form) return;
      event.preventDefault();
      const row = form.closest("[data-job-id]");
      dialog.querySelector("[data-job-label]").textContent = "#" + row.dataset.jobId;
      dialog.returnValue = "";
      dialog.showModal();
      dialog.addEventListener("close", async function onClose() {
        dialog.removeEventListener("close", onClose);
        if (dialog.returnValue !== "yes") return;
        const button = form.querySelector("[data-cancel]");
        button.disabled = true;
        button.textContent = "Cancelling…";
        try {
          const response = await fetch(form.action, {
            method: "POST", headers: { "X-CSRFToken": csrf(), Accept: "application/json" },
            body: new FormData(form),
          });
          const data = await response.json();
          const reason = row.querySelector("[data-reason]");
          if (reason) reason.textContent = data.message;
        } catch (err) {
          button.disabled = false;
          button.textContent = "Cancel";
          alert("Could not reach the portal to cancel the job: " + err);
        }
      });
    });
  }

  // --- pages -----------------------------------------------------------------------
  function dashboard() {
    const table = document.getElementById("job-table");
    const filter = table.dataset.filter;
    const trials = table.dataset.trials;
    const project = table.dataset.project || "";
    const mine = table.dataset.mine || "";  // a person's own list: their jobs only
    const matches = (job) =>
      (trials || !job.trial_id) && (!project || String(job.project_id) === project) &&
      (!mine || String(job.owner_id) === mine) &&
      (!filter || filter === job.state || (filter === "active" && job.is_active));
    async function refreshTable() {
      const response = await fetch(`?state=${encodeURIComponent(filter)}&trials=${trials}&project=${encodeURIComponent(project)}&fragment=table`);
      if (response.ok) table.innerHTML = await response.text();
    }
    // A new job's row is fetched once: updates that arrive meanwhile wait for it (the
    // newest is applied once it is in), never fetching and inserting it a second time.
    const fetching = new Map();
    live("/ws/jobs/", async (job) => {
      const row = table.querySelector(`tr[data-job-id="${job.id}"]`);
      if (row) {
        applyJob(row, job);
        tick();
      } else if (fetching.has(job.id)) {
        fetching.set(job.id, job);
      } else if (matches(job)) {
        fetching.set(job.id, job);
        try {
          const response = await fetch(`/jobs/${job.id}/row/`);
          const tbody = table.querySelector("tbody");
          if (!response.ok) return;
          if (!tbody) return refreshTable(); // first job: replace the empty state
          const html = await response.text();
          if (!table.querySelector(`tr[data-job-id="${job.id}"]`)) tbody.insertAdjacentHTML("afterbegin", html);
          const inserted = table.querySelector(`tr[data-job-id="${job.id}"]`);
          const latest = fetching.get(job.id);  // an update that came while it was fetched
          if (inserted && latest !== job) applyJob(inserted, latest);
          tick();
        } finally {
          fetching.delete(job.id);
        }
      }
    }, refreshTable);
    wireCancel(table);
    const notifyButton = document.getElementById("enable-notifications");
    if ("Notification" in window && Notification.permission === "default") {
      notifyButton.hidden = false;
      notifyButton.addEventListener("click", () => Notification.requestPermission().then(() => { notifyButton.hidden = true; }));
    }
    tick();
    setInterval(tick, 1000);
  }

  function jobPage(jobId) {
    const el = document.getElementById("job");
    let stream = "stdout";
    let timer = null;
    const log = document.querySelector("[data-log]");
    const status = document.querySelector("[data-log-status]");
    async function loadLog() {
      if (!document.querySelector("[data-scheduler-id]").textContent.match(/^\d/)) return;
      status.textContent = "loading…";
      try {
        const response = await fetch(`/jobs/${jobId}/logs/${stream}/`, { headers: { Accept: "application/json" } });
        const data = await response.json();
        if (data.error) { status.textContent = data.error; return; }
        const atBottom = log.scrollTop + log.clientHeight >= log.scrollHeight - 4;
        log.textContent = (data.truncated ? "… (earlier output not shown)\n" : "") + (data.text || "(empty)");
        if (atBottom) log.scrollTop = log.scrollHeight;
        status.textContent = `${data.size} bytes`;
      } catch (err) {
        status.textContent = "could not load the log: " + err;
      }
    }
    function schedule() {
      clearInterval(timer);
      if (el.dataset.active === "true") timer = setInterval(loadLog, 5000);
    }
    document.querySelectorAll("[data-stream]").forEach((tab) => tab.addEventListener("click", () => {
      stream = tab.dataset.stream;
      document.querySelectorAll("[data-stream]").forEach((t) => t.setAttribute("aria-selected", String(t === tab)));
      loadLog();
    }));
    document.querySelector("[data-refresh-logs]").addEventListener("click", loadLog);
    document.querySelectorAll("[data-show-stderr]").forEach((link) => link.addEventListener("click", () => {
      document.querySelector('[data-stream="stderr"]').click();
    }));
    // The parts that change with the job but are not in its update (timeline, script).
    async function refreshParts() {
      const response = await fetch(`/jobs/${jobId}/?fragment=live`);
      if (!response.ok) return;
      const fresh = new DOMParser().parseFromString(await response.text(), "text/html");
      fresh.querySelectorAll("[data-live-part]").forEach((part) => {
        const here = document.querySelector(`#main [data-live-part="${part.dataset.livePart}"]`);
        if (here) here.innerHTML = part.innerHTML;
      });
    }
    let runs = null, attempt = null;
    live(`/ws/jobs/${jobId}/`, (job) => {
      const before = el.dataset.state;
      applyJob(el, job);
      const now = document.querySelector("[data-attempt-now]");
      if (now && job.attempts_text) now.textContent = job.attempts_text;
      // A new run or attempt (a requeue, accounting's figures): the runs table and timeline.
      if ((runs !== null && runs !== job.runs_recorded) || (attempt !== null && attempt !== job.attempt)) refreshParts();
      runs = job.runs_recorded; attempt = job.attempt;
      if (before !== job.state) {
        // The launch's "queued" message is old news once the job moves on.
        document.querySelectorAll(".messages").forEach((m) => m.remove());
        refreshParts(); loadLog(); schedule(); tick();
      }
    }, refreshParts);
    wireCancel(document.getElementById("main"));
    loadLog();
    schedule();
    tick();
    setInterval(tick, 1000);
  }

  function accountPage() {
    document.querySelectorAll(".test-connection").forEach((form) => form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const button = form.querySelector("button"), out = form.querySelector("output");
      button.disabled = true;
      out.textContent = "Connecting…";
      out.className = "";
      try {
        const response = await fetch(form.action, { method: "POST", headers: { "X-CSRFToken": csrf() }, body: new FormData(form) });
        const data = await response.json();
        out.textContent = data.message;
        out.className = data.ok ? "ok" : "error";
      } catch (err) {
        out.textContent = "Could not reach the portal: " + err;
        out.className = "error";
      } finally {
        button.disabled = false;
      }
    }));
  }

  // --- notifications: the header's unread count and the list, live --------------------
  function notifications() {
    const link = document.querySelector("[data-notifications-link]");
    if (!link) return;
    socket("/ws/notifications/", {
      onMessage: (data) => {
        let badge = link.querySelector("[data-unread-count]");
        if (!badge) {
          badge = document.createElement("span");
          badge.className = "badge";
          badge.dataset.unreadCount = "";
          link.append(" ", badge);
        }
        badge.textContent = String(data.unread);
        badge.setAttribute("aria-label", `${data.unread} unread`);
        const list = document.querySelector("[data-notifications]");
        if (!list) return;
        list.querySelector(".empty")?.remove();
        const item = document.createElement("li");
        item.className = "card unread";
        item.dataset.notificationId = data.id;
        item.dataset.event = data.event;
        const p = document.createElement("p"), a = document.createElement("a");
        a.href = data.url;
        a.textContent = data.text; // text, never markup
        p.append(a);
        const fresh = document.createElement("p"), strong = document.createElement("strong");
        strong.textContent = "new";
        fresh.append(strong);
        item.append(fresh, p);
        list.prepend(item);
      },
    });
  }

  // --- long tables: only the rows in view are in the document ----------------------
  // rows(tbody, items, render): render(item, index) makes one <tr>. Up to VIRTUAL_FROM
  // items every row is drawn; past it the table scrolls in its own box (".table-box",
  // its height capped in CSS, the head sticky) and holds the rows in view plus a margin,
  // between two spacer rows of the missing rows' height (rows are one line high, so one
  // measured row gives every height). Calling it again with new items keeps the scroll
  // position; aria-rowcount and aria-rowindex give screen readers the whole table.
  const VIRTUAL_FROM = 200;
  const MARGIN_ROWS = 30;

  function rows(tbody, items, render) {
    const table = tbody.closest("table");
    const box = table.closest(".table-box") || table.parentElement;
    const state = tbody.portalRows || (tbody.portalRows = { height: 0, from: -1, to: -1 });
    state.items = items; state.render = render;
    if (items.length <= VIRTUAL_FROM) {
      table.removeAttribute("aria-rowcount");
      box.classList.remove("virtual");
      tbody.replaceChildren(...items.map(render));
      return;
    }
    table.setAttribute("aria-rowcount", String(items.length + 1));
    box.classList.add("virtual");
    if (!state.listening) {
      state.listening = true;
      let queued = false;
      box.addEventListener("scroll", () => {
        if (queued) return;
        queued = true;
        requestAnimationFrame(() => { queued = false; drawWindow(tbody, box, false); });
      }, { passive: true });
    }
    drawWindow(tbody, box, true);
  }

  function drawWindow(tbody, box, changed) {
    const state = tbody.portalRows;
    const n = state.items.length;
    if (n <= VIRTUAL_FROM) return;
    const height = state.height || 28;
    const first = Math.max(0, Math.floor(box.scrollTop / height) - MARGIN_ROWS);
    const last = Math.min(n, first + Math.ceil((box.clientHeight || 600) / height) + 2 * MARGIN_ROWS);
    if (!changed && first === state.from && last === state.to) return;
    state.from = first; state.to = last;
    const columns = tbody.closest("table").tHead?.rows[0]?.cells.length || 1;
    const spacer = (count) => {
      const tr = document.createElement("tr");
      tr.className = "spacer"; tr.setAttribute("aria-hidden", "true");
      const td = document.createElement("td");
      td.colSpan = columns; td.style.height = `${count * height}px`;
      tr.append(td);
      return tr;
    };
    const drawn = [];
    for (let i = first; i < last; i++) {
      const tr = state.render(state.items[i], i);
      tr.setAttribute("aria-rowindex", String(i + 2));
      drawn.push(tr);
    }
    tbody.replaceChildren(spacer(first), ...drawn, spacer(n - last));
    if (!state.height && drawn.length) {  // measured once, then the spacers are redrawn
      state.height = drawn[0].getBoundingClientRect().height || 28;
      drawWindow(tbody, box, true);
    }
  }

  return { dashboard, jobPage, accountPage, socket, notifications, rows };
})();
