/* HPC portal: the launch page (frontend/templates/frontend/launch.html). Fields follow
the chosen image, cluster and partition; the browser checks the limits before the server
does. No framework, no build step. */
"use strict";

const PortalLaunch = (() => {
  const $ = (id) => document.getElementById(id);
  // Set once by start(): the page's data and fields.
  let limits, gpuImages, imageKinds, maintenance, form;
  let cluster, partition, gpuType, gpus, cpus, memory, minutes, nodes, tasks, needCc, needMem;
  let allPartitions, search;
  // Fields the user set by hand keep their value; the others follow the image and
  // partition (the partition's defaults, as the API and CLI use them).
  const touched = new Set();
  const activeTags = new Set();

  function start() {
    findFields();
    wireLayout();
    wireCatalog();
    wireChoices();
    wireForm();
    // On load the server's values stand (the defaults, or a job launched again).
    onCluster(false);
    onImage(false);
    readCalendar();
  }

  function findFields() {
    limits = JSON.parse(document.getElementById("partition-limits").textContent);
    gpuImages = JSON.parse(document.getElementById("gpu-images").textContent);
    imageKinds = JSON.parse(document.getElementById("image-kinds").textContent);
    maintenance = {};
    form = document.getElementById("launch-form");
    cluster = $("id_cluster"); partition = $("id_partition"); gpuType = $("id_gpu_type");
    gpus = $("id_gpus"); cpus = $("id_cpus"); memory = $("id_memory_gb"); minutes = $("id_time_limit_minutes");
    nodes = $("id_nodes"); tasks = $("id_tasks_per_node");
    needCc = $("id_min_gpu_capability"); needMem = $("id_min_gpu_memory_gb");
    allPartitions = [...partition.options].map((o) => ({ value: o.value, text: o.text }));
    search = $("image-search");
  }

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

  function wireLayout() {
    [gpus, gpuType, cpus, memory, minutes, nodes, tasks].forEach((input) => input.addEventListener("input", () => touched.add(input)));
    form.querySelectorAll("input[name=launcher]").forEach((r) => r.addEventListener("change", () => { touched.add(nodes); onLayout(); }));
    [nodes, tasks, gpus].forEach((input) => input.addEventListener("input", onLayout));
  }

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
    // The scheduler's own words: its note, and what it calls the account a job is charged to.
    const note = form.querySelector("[data-scheduler-note]");
    if (note) { note.textContent = can.launch_note || ""; note.hidden = !note.textContent; }
    const account = $("account-field");
    if (account && can.account_label) {
      account.querySelector("label").textContent = can.account_label;
      let help = account.querySelector("small");
      if (!help) help = account.querySelector(".field").appendChild(document.createElement("small"));
      help.textContent = can.account_help || "";
    }
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
    onApp();
    // Only batch jobs checkpoint and requeue themselves (on Slurm).
    $("resumable-fields").hidden = !batch || noResume;
    if (!batch || noResume) $("id_resumable").checked = false;
    onResumable();
    // Stage-in and stage-out: batch jobs only (disabled fields are not sent).
    const staging = $("staging-fields");
    staging.hidden = !batch;
    staging.querySelectorAll("input, textarea").forEach((field) => { field.disabled = !batch; });
    const stagingNote = staging.querySelector("[data-staging-note]");
    stagingNote.textContent = can.stages_in_containers === false
      ? "On this cluster the scheduler starts an image's container around the whole job: " +
        "stage-in works only with an image that runs without a container."
      : "";
    stagingNote.hidden = !stagingNote.textContent;
    if (kind && kind.value === "tensorboard" && Number(gpus.value) > 0) { // it needs none
      gpus.value = 0;
      onGpus();
    }
  }
  // An app session: its app's fields only (disabled fields are not sent).
  function onApp() {
    const box = $("app-field");
    if (!box) return;
    const kind = form.querySelector("input[name=kind]:checked");
    const on = Boolean(kind && kind.value === "app");
    box.hidden = !on;
    const chosen = $("id_app").value;
    box.querySelectorAll("[data-app-fields]").forEach((fields) => {
      const shown = on && fields.dataset.appFields === chosen;
      fields.hidden = !shown;
      fields.querySelectorAll("input, select, textarea").forEach((f) => { f.disabled = !shown; });
    });
    $("id_app").disabled = !on;
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

  function wireCatalog() {
    search.addEventListener("input", filterCards);
    form.querySelectorAll("[data-tag]").forEach((b) => b.addEventListener("click", () => {
      const on = b.getAttribute("aria-pressed") !== "true";
      b.setAttribute("aria-pressed", String(on));
      if (on) activeTags.add(b.dataset.tag); else activeTags.delete(b.dataset.tag);
      filterCards();
    }));
  }

  function wireChoices() {
    cluster.addEventListener("change", () => onCluster());
    partition.addEventListener("change", () => onPartition());
    gpus.addEventListener("input", onGpus);
    [needCc, needMem].forEach((input) => input.addEventListener("input", onGpuNeeds));
    gpuType.addEventListener("change", onGpuNeeds);
    ["id_resumable", "id_max_attempts", "id_checkpoint_warning_seconds", "id_time_limit_minutes"]
      .forEach((id) => $(id).addEventListener("input", onResumable));
    $("id_resumable").addEventListener("change", onResumable);
    cluster.addEventListener("change", readCalendar);
    partition.addEventListener("change", onCalendar);
    minutes.addEventListener("input", onCalendar);
    form.querySelector("[data-shorten]").addEventListener("click", (event) => {
      minutes.value = event.target.dataset.minutes;
      touched.add(minutes);
      minutes.dispatchEvent(new Event("input", { bubbles: true }));
    });
    form.querySelectorAll("input[name=kind]").forEach((r) => r.addEventListener("change", onKind));
    if ($("id_app")) $("id_app").addEventListener("change", onApp);
    form.querySelectorAll("input[name=image]").forEach((r) => r.addEventListener("change", () => onImage()));
  }

  // A maintenance reservation on the chosen partition's nodes that the time limit runs
  // into (jobs/launch/calendar.py says the same after launch, and to the API).
  const MARGIN_MINUTES = 10;
  function span(m) {
    const h = Math.floor(m / 60), r = m % 60;
    return !h ? `${r} min` : r ? `${h} h ${r} min` : `${h} h`;
  }
  async function readCalendar() {
    const name = cluster.value;
    if (name && !(name in maintenance)) {
      maintenance[name] = [];
      const url = form.querySelector("[data-maintenance]").dataset.calendarUrl;
      try {
        const response = await fetch(`${url}?cluster=${encodeURIComponent(name)}`);
        if (response.ok) maintenance[name] = (await response.json()).maintenance;
      } catch (error) { /* no calendar: nothing to say */ }
    }
    onCalendar();
  }
  function onCalendar() {
    const note = form.querySelector("[data-maintenance]");
    const shorten = form.querySelector("[data-shorten]");
    const p = currentPartition();
    const asked = Number(minutes.value) || 0;
    const now = Date.now();
    const found = (maintenance[cluster.value] || [])
      .filter((r) => p && r.partitions.includes(p.name) && Date.parse(r.end) > now)
      .sort((a, b) => Date.parse(a.start) - Date.parse(b.start))
      .find((r) => Date.parse(r.start) <= now || now + asked * 60000 > Date.parse(r.start));
    note.hidden = !found;
    shorten.hidden = true;
    if (!found) return;
    const window = `${found.start_text} until ${found.end_text}`;
    const fits = Math.floor((Date.parse(found.start) - MARGIN_MINUTES * 60000 - now) / 60000);
    const text = note.querySelector("[data-maintenance-text]");
    if (Date.parse(found.start) <= now || fits <= 0) {
      text.textContent = `The maintenance ${found.name} (${window}) has begun on this partition's nodes: the job waits until it ends.`;
      return;
    }
    text.textContent = `A ${span(asked)} run would run into the maintenance ${found.name} (${window}) and wait until it ends; ${span(fits)} or less starts before it.`;
    shorten.textContent = `Shorten to ${span(fits)}`;
    shorten.dataset.minutes = fits;
    shorten.hidden = false;
  }

  function wireForm() {
    // The server's message for a field goes once the user changes that field.
    form.addEventListener("input", (event) => {
      const field = event.target.closest && event.target.closest(".field.invalid");
      if (!field) return;
      field.classList.remove("invalid");
      field.querySelectorAll("p.error:not(.client-error)").forEach((p) => p.remove());
    });
    form.addEventListener("submit", onSubmit);
  }

  function onSubmit(event) {
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
    const appKind = form.querySelector("input[name=kind][value=app]:checked");
    if (!selectedImage() && !appKind) {
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
  }

  return { start };
})();
