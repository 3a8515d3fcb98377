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
    const matches = (job) =>
      (trials || !job.trial_id) && (!filter || filter === job.state || (filter === "active" && job.is_active));
    async function refreshTable() {
      const response = await fetch(`?state=${encodeURIComponent(filter)}&trials=${trials}&fragment=table`);
      if (response.ok) table.innerHTML = await response.text();
    }
    live("/ws/jobs/", async (job) => {
      const row = table.querySelector(`tr[data-job-id="${job.id}"]`);
      if (row) {
        applyJob(row, job);
        tick();
      } else if (matches(job)) {
        const response = await fetch(`/jobs/${job.id}/row/`);
        const tbody = table.querySelector("tbody");
        if (!response.ok) return;
        if (!tbody) return refreshTable(); // first job: replace the empty state
        tbody.insertAdjacentHTML("afterbegin", await response.text());
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

  function launch() {
    const limits = JSON.parse(document.getElementById("partition-limits").textContent);
    const gpuImages = JSON.parse(document.getElementById("gpu-images").textContent);
    const imageKinds = JSON.parse(document.getElementById("image-kinds").textContent);
    const form = document.getElementById("launch-form");
    const $ = (id) => document.getElementById(id);
    const cluster = $("id_cluster"), partition = $("id_partition"), gpuType = $("id_gpu_type");
    const gpus = $("id_gpus"), cpus = $("id_cpus"), memory = $("id_memory_gb"), minutes = $("id_time_limit_minutes");
    const nodes = $("id_nodes"), tasks = $("id_tasks_per_node");
    const allPartitions = [...partition.options].map((o) => ({ value: o.value, text: o.text }));

    function currentPartition() {
      const c = limits[cluster.value];
      return c && c.partitions.find((p) => String(p.id) === partition.value);
    }
    function selectedImage() {
      const checked = form.querySelector("input[name=image]:checked");
      return checked && checked.value;
    }
    function setLimit(input, key, max, min, unit) {
      input.min = min;
      input.max = max;
      const hint = form.querySelector(`[data-limit-for="${key}"]`);
      if (hint) hint.textContent = max === min ? `${max}${unit}` : `${min}–${max}${unit}`;
      // A value the server refused stays as typed, next to its message ("at most 4" beside
      // a 9), until the user changes it or the partition.
      if (input.closest(".invalid") && !touched.has(input) && !input.dataset.moved) return;
      if (Number(input.value) > max) input.value = max;
      if (input.value === "" || Number(input.value) < min) input.value = min;
    }
    // Fields the user set by hand keep their value; the others follow the image and
    // partition (the partition's defaults, as the API and CLI use them).
    const touched = new Set();
    [gpus, gpuType, cpus, memory, minutes, nodes, tasks].forEach((input) => input.addEventListener("input", () => touched.add(input)));
    form.querySelectorAll("input[name=launcher]").forEach((r) => r.addEventListener("change", () => { touched.add(nodes); onLayout(); }));
    const launcher = () => (form.querySelector("input[name=launcher]:checked") || { value: "none" }).value;
    // "2 nodes × 2 tasks = 4 processes, 4 GPUs in all", and what the launcher does with them.
    function onLayout() {
      const n = Number(nodes.value) || 1, t = Number(tasks.value) || 1, g = Number(gpus.value) || 0;
      const procs = n * t;
      const what = { none: "your command runs once, on the first node", torchrun: `one torchrun per node starts ${t} process${t > 1 ? "es" : ""}`, mpi: `mpirun starts ${procs} rank${procs > 1 ? "s" : ""}` }[launcher()];
      $("distributed-fields").querySelector("[data-layout-summary]").textContent =
        `${n} node${n > 1 ? "s" : ""} × ${t} task${t > 1 ? "s" : ""} = ${procs} process${procs > 1 ? "es" : ""}` +
        (g ? `, ${n * g} GPU${n * g > 1 ? "s" : ""} in all` : "") + `; ${what}.`;
    }
    [nodes, tasks, gpus].forEach((input) => input.addEventListener("input", onLayout));
    function onCluster(reset = true) {
      const c = limits[cluster.value];
      const ids = c ? c.partitions.map((p) => String(p.id)) : [];
      const keep = partition.value;
      partition.innerHTML = "";
      allPartitions.filter((o) => ids.includes(o.value)).forEach((o) => partition.add(new Option(o.text.split("/").pop(), o.value)));
      if (ids.includes(keep)) partition.value = keep;
      else if (c) partition.value = String((c.partitions.find((p) => p.is_default) || c.partitions[0]).id);
      form.querySelectorAll("input[name=work_dir_kind][value=scratch]").forEach((r) => {
        r.disabled = !(c && c.scratch);
        if (r.disabled && r.checked) form.querySelector("input[name=work_dir_kind][value=home]").checked = true;
      });
      onPartition(reset);
      onKind();
    }
    function onPartition(reset = true) {
      const p = currentPartition();
      if (!p) return;
      if (reset) [gpus, cpus, memory, minutes].forEach((input) => { input.dataset.moved = "1"; });
      const gpuCapable = gpuImages.includes(selectedImage());
      const maxGpus = gpuCapable ? p.max_gpus : 0;
      const why = maxGpus ? "" : p.max_gpus ? " (this image runs on CPUs only)" : " (no GPUs on this partition)";
      const fill = (input, value) => { if (reset && !touched.has(input)) input.value = value; };
      fill(gpus, Math.min(p.default_gpus, maxGpus));
      fill(cpus, Math.min(p.default_cpus, p.max_cpus));
      fill(memory, Math.min(p.default_memory_gb, p.max_memory_gb));
      fill(minutes, Math.min(p.default_minutes, p.max_minutes));
      setLimit(gpus, "gpus", gpuCapable ? p.max_gpus_per_node : 0, 0, why + (p.max_nodes > 1 && maxGpus ? " per node" : ""));
      setLimit(nodes, "nodes", p.max_nodes, 1, p.max_nodes > 1 ? "" : " (single-node partition)");
      gpus.disabled = maxGpus === 0;
      const wanted = gpuType.value || gpuType.dataset.initial;
      gpuType.innerHTML = "";
      gpuType.add(new Option("any", ""));
      p.gpu_types.forEach((t) => {
        const d = p.gpus.find((g) => g.name === t);
        gpuType.add(new Option(d ? `${t} (${d.compute_capability.toFixed(1)}, ${d.memory_gb} GB)` : t, t));
      });
      gpuType.value = p.gpu_types.includes(wanted) ? wanted : ""; // any type unless one is chosen
      setLimit(cpus, "cpus", p.max_cpus, 1, "");
      setLimit(memory, "memory", p.max_memory_gb, 1, " GB");
      setLimit(minutes, "minutes", p.max_minutes, 1, " min");
      onGpus();
      onLayout();
      onResumable();
    }
    function onGpus() {
      if (Number(gpus.value) === 0) gpuType.value = "";
      gpuType.disabled = gpus.disabled || Number(gpus.value) === 0;
      [needCc, needMem].forEach((input) => { input.disabled = gpuType.disabled; });
      onGpuNeeds();
    }
    // Which described GPU types meet the capability and memory asked for: on this
    // partition, or else the closest here and the partitions that have one (the server
    // checks it again and turns it into --gres/--constraint).
    const needCc = $("id_min_gpu_capability"), needMem = $("id_min_gpu_memory_gb");
    const describe = (g) => `${g.name} (compute capability ${g.compute_capability.toFixed(1)}, ${g.memory_gb} GB)`;
    function onGpuNeeds() {
      const line = form.querySelector("[data-gpu-match]");
      const p = currentPartition();
      const cc = needCc.value === "" ? null : Number(needCc.value);
      const mem = needMem.value === "" ? null : Number(needMem.value);
      if (!p || needCc.disabled || (cc === null && mem === null)) { line.hidden = true; return; }
      const ok = (g) => (cc === null || g.compute_capability >= cc) && (mem === null || g.memory_gb >= mem);
      const chosen = gpuType.value ? p.gpus.filter((g) => g.name === gpuType.value) : p.gpus;
      const matching = chosen.filter(ok);
      let text;
      if (matching.length) {
        text = `Matches on ${p.name}: ${matching.map(describe).join("; ")}.`;
      } else {
        const closest = [...chosen].sort((a, b) => b.compute_capability - a.compute_capability || b.memory_gb - a.memory_gb).slice(0, 3);
        const others = (limits[cluster.value].partitions || []).filter((o) => o.id !== p.id && o.gpus.some(ok)).map((o) => o.name);
        text = `No GPU ${gpuType.value ? `of type ${gpuType.value} ` : ""}on ${p.name} meets this` +
          (closest.length ? `; closest: ${closest.map(describe).join("; ")}` : "") +
          (others.length ? `. Partition ${others.join(", ")} has one.` : ".");
      }
      line.textContent = text;
      line.classList.toggle("warning", !matching.length);
      line.hidden = false;
    }
    function onKind() {
      const kind = form.querySelector("input[name=kind]:checked");
      const batch = kind && kind.value === "batch";
      // What the cluster's scheduler can do, as its adapter says (HTCondor runs one process
      // on one machine per job, and requeues nothing itself).
      const can = (limits[cluster.value] || {}).capabilities || {};
      const oneNode = can.supports_multi_node === false || can.supports_launchers === false;
      const noResume = can.supports_resumable === false;
      const note = form.querySelector("[data-scheduler-note]");
      if (note) note.hidden = !(oneNode || noResume);
      $("command-field").hidden = !batch;
      // Sessions are one process on one node.
      $("distributed-fields").hidden = !batch || oneNode;
      if (!batch || oneNode) {
        nodes.value = 1; tasks.value = 1;
        form.querySelector("input[name=launcher][value=none]").checked = true;
        onLayout();
      }
      $("notebook-field").hidden = batch;
      $("id_command").required = batch;
      // Only batch jobs checkpoint and requeue themselves (on Slurm).
      $("resumable-fields").hidden = !batch || noResume;
      if (!batch || noResume) $("id_resumable").checked = false;
      onResumable();
      if (kind && kind.value === "tensorboard" && Number(gpus.value) > 0) { // it needs none
        gpus.value = 0;
        onGpus();
      }
    }
    // A chained run: attempts of at most the walltime each, one after another.
    function onResumable() {
      const on = $("id_resumable").checked;
      const attempts = $("id_max_attempts"), warning = $("id_checkpoint_warning_seconds");
      attempts.disabled = warning.disabled = !on;
      if (!on) attempts.value = 1;
      // Disabled fields are not sent, so a page the server sent back has them empty.
      if (on && !warning.value) warning.value = 120;
      if (on && !attempts.value) attempts.value = 1;
      const n = Number(attempts.value) || 1, m = Number(minutes.value) || 0;
      const text = on
        ? `Up to ${n} attempt${n === 1 ? "" : "s"} of ${m} min (${Math.round(n * m / 6) / 10} h in all); each is warned ${Number(warning.value) || 0} s before its end.`
        : "";
      const summary = form.querySelector("[data-resumable-summary]");
      summary.textContent = text;
      summary.hidden = !text;
      // A partition of long jobs: checkpoint and requeue is the way to survive there.
      const p = currentPartition();
      const suggestion = form.querySelector("[data-resumable-suggestion]");
      suggestion.textContent = p && p.time_class === "long" && !on
        ? `Partition ${p.name} holds long jobs: consider checkpoint and requeue, so a preempted or failed node costs minutes, not the whole run.`
        : "";
      suggestion.hidden = !suggestion.textContent;
    }
    let lastDefaultCommand = null;
    function onImage(reset = true) {
      const slug = selectedImage();
      const kinds = imageKinds[slug] || [];
      // The image's suggested command, unless the user typed their own.
      const checked = form.querySelector("input[name=image]:checked");
      const suggested = checked ? checked.dataset.defaultCommand : "";
      const command = $("id_command");
      if (suggested && (!command.value.trim() || command.value === lastDefaultCommand)) command.value = suggested;
      else if (!suggested && command.value === lastDefaultCommand) command.value = "";
      lastDefaultCommand = suggested || null;
      // The image's launcher and layout, unless the user chose their own.
      if (checked && reset && !touched.has(nodes) && !touched.has(tasks)) {
        const radio = form.querySelector(`input[name=launcher][value="${checked.dataset.defaultLauncher || "none"}"]`);
        if (radio) radio.checked = true;
        nodes.value = checked.dataset.defaultNodes || 1;
        tasks.value = checked.dataset.defaultTasks || 1;
      }
      form.querySelectorAll("input[name=kind]").forEach((r) => {
        r.disabled = !kinds.includes(r.value);
        if (r.disabled && r.checked) {
          const other = form.querySelector(`input[name=kind][value="${kinds[0]}"]`);
          if (other) other.checked = true;
        }
      });
      form.querySelectorAll(".image-card").forEach((c) => c.classList.toggle("selected", c.querySelector("input").checked));
      // A deprecated image still runs; say so where it is chosen.
      const warning = form.querySelector("[data-deprecation-warning]");
      warning.textContent = (checked && checked.dataset.deprecation) || "";
      warning.hidden = !warning.textContent;
      if (checked) form.querySelectorAll("[data-image-required], [data-image-notice]").forEach((n) => { n.hidden = true; });
      onKind();
      onPartition(reset);
    }
    // Search and tag filter on the catalog cards.
    const search = $("image-search");
    const activeTags = new Set();
    function filterCards() {
      const q = search.value.trim().toLowerCase();
      let shown = 0;
      form.querySelectorAll(".image-card").forEach((card) => {
        const tags = card.dataset.tags.split(" ");
        const ok = (!q || card.dataset.search.includes(q)) && [...activeTags].every((t) => tags.includes(t));
        card.hidden = !ok;
        shown += ok;
      });
      $("no-image-match").hidden = shown > 0;
    }
    search.addEventListener("input", filterCards);
    form.querySelectorAll("[data-tag]").forEach((b) => b.addEventListener("click", () => {
      const on = b.getAttribute("aria-pressed") !== "true";
      b.setAttribute("aria-pressed", String(on));
      if (on) activeTags.add(b.dataset.tag); else activeTags.delete(b.dataset.tag);
      filterCards();
    }));
    cluster.addEventListener("change", () => onCluster());
    partition.addEventListener("change", () => onPartition());
    gpus.addEventListener("input", onGpus);
    [needCc, needMem].forEach((input) => input.addEventListener("input", onGpuNeeds));
    gpuType.addEventListener("change", onGpuNeeds);
    ["id_resumable", "id_max_attempts", "id_checkpoint_warning_seconds", "id_time_limit_minutes"]
      .forEach((id) => $(id).addEventListener("input", onResumable));
    $("id_resumable").addEventListener("change", onResumable);
    form.querySelectorAll("input[name=kind]").forEach((r) => r.addEventListener("change", onKind));
    form.querySelectorAll("input[name=image]").forEach((r) => r.addEventListener("change", () => onImage()));
    // The server's message for a field goes once the user changes that field.
    form.addEventListener("input", (event) => {
      const field = event.target.closest && event.target.closest(".field.invalid");
      if (!field) return;
      field.classList.remove("invalid");
      field.querySelectorAll("p.error:not(.client-error)").forEach((p) => p.remove());
    });
    form.addEventListener("submit", (event) => {
      // The browser checks the limits first; the server checks them again.
      form.querySelectorAll(".client-error").forEach((n) => n.remove());
      let ok = true;
      form.querySelectorAll("input[type=number]:not([disabled]), textarea[required]").forEach((input) => {
        if (!input.checkValidity()) {
          ok = false;
          const p = document.createElement("p");
          p.className = "error client-error";
          p.setAttribute("role", "alert");
          p.textContent = input.validity.rangeOverflow ? `At most ${input.max} here.`
            : input.validity.rangeUnderflow ? `At least ${input.min}.` : input.validationMessage;
          input.closest(".field").appendChild(p);
        }
      });
      if (!selectedImage()) {
        ok = false;
        const required = form.querySelector("[data-image-required]");
        required.hidden = false;
        required.closest("fieldset").scrollIntoView({ block: "start" });
      }
      if (!ok) { event.preventDefault(); return; }
      if (gpus.disabled) { gpus.disabled = false; gpus.value = 0; } // disabled inputs are not sent
      if (Number(gpus.value) === 0) gpuType.value = ""; // a GPU type means nothing without GPUs
      gpuType.disabled = false;
      const button = $("launch-button");
      button.disabled = true;
      button.textContent = "Launching…";
    });
    // On load the server's values stand (the defaults, or a job launched again).
    onCluster(false);
    onImage(false);
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

  return { dashboard, jobPage, launch, accountPage, socket };
})();
