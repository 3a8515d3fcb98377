// The file manager's uploader: files and folders sent with the tus protocol
// (tus-js-client, vendored in static/vendor/tus-js-client/) to files/uploads.py, in chunks
// of the portal's PORTAL_UPLOAD_CHUNK_BYTES; a cut connection is retried and resumes at
// the offset the cluster reports. One row per file: a progress bar, pause and resume,
// and the sha256 the cluster computed at the end.
"use strict";

window.PortalUpload = (function () {
  function csrf() {
    const found = document.cookie.split("; ").find((c) => c.startsWith("csrftoken="));
    return found ? decodeURIComponent(found.split("=")[1]) : "";
  }

  function row(list, label) {
    const item = document.createElement("li");
    item.className = "upload";
    const name = document.createElement("span");
    name.className = "upload-name";
    name.textContent = label; // text only: a name is never markup
    const bar = document.createElement("progress");
    bar.max = 100;
    bar.value = 0;
    const state = document.createElement("span");
    state.className = "upload-state";
    state.setAttribute("data-upload-state", "");
    const toggle = document.createElement("button");
    toggle.type = "button";
    toggle.className = "link";
    toggle.textContent = "Pause";
    item.append(name, " ", bar, " ", state, " ", toggle);
    list.append(item);
    return { item, bar, state, toggle };
  }

  function start(panel) {
    const endpoint = panel.dataset.endpoint;
    const folder = decodeURIComponent(panel.dataset.folder || "");
    const chunk = Number(panel.dataset.chunk);
    const existing = new Set(JSON.parse(document.getElementById("upload-existing").textContent));
    const list = panel.querySelector("[data-uploads]");
    // At most AT_ONCE uploads run; the others wait in order (a folder of thousands of
    // files is thousands of uploads: never all at once against the browser's and the
    // portal's connections).
    const AT_ONCE = 3;
    // An upload that hears nothing for a minute (no bytes sent, no answer: a connection
    // lost without a reset) is started again from what the portal has; it would otherwise
    // hold its place for good and the queue behind it would never move. (The panel's
    // data-stall-ms, read at each look, changes the minute: the tests' few seconds.)
    const stallMs = () => Number(panel.dataset.stallMs) || 60000;
    const waiting = [];
    const active = new Set();
    let running = 0;
    let queued = 0;
    window.setInterval(() => {
      const now = Date.now();
      for (const each of active) {
        if (now - each.heard > stallMs()) {
          each.heard = now;
          each.upload.abort().then(() => each.upload.start());
        }
      }
    }, 1000);

    function next() {
      while (running < AT_ONCE && waiting.length) {
        const begin = waiting.shift();
        running += 1;
        begin();
      }
    }

    function over() {
      running -= 1;
      queued -= 1;
      next();
    }

    function send(file) {
      const relative = file.webkitRelativePath || "";
      const sub = relative.includes("/") ? relative.slice(0, relative.lastIndexOf("/")) : "";
      const path = [folder, sub].filter(Boolean).join("/");
      const top = relative ? relative.split("/")[0] : file.name;
      let overwrite = false;
      if (!sub && existing.has(file.name)) {
        overwrite = window.confirm(`${file.name} already exists here. Replace it?`);
        if (!overwrite) return;
      }
      const ui = row(list, relative || file.name);
      const watched = { heard: Date.now(), upload: null };
      const upload = new window.tus.Upload(file, {
        endpoint,
        chunkSize: chunk,
        retryDelays: [0, 1000, 2000, 4000, 8000, 15000],
        removeFingerprintOnSuccess: true,
        headers: { "X-CSRFToken": csrf() },
        metadata: {
          filename: file.name,
          path,
          overwrite: overwrite ? "yes" : "no",
          folders: sub ? "make" : "no",
        },
        onProgress(sent, total) {
          watched.heard = Date.now();
          ui.bar.value = total ? (100 * sent) / total : 100;
          ui.state.textContent = `${Math.floor(ui.bar.value)} %`;
        },
        onAfterResponse(request, response) {
          watched.heard = Date.now();
          const digest = response.getHeader("Upload-Sha256");
          if (digest) ui.item.dataset.sha256 = digest;
        },
        onError(error) {
          const answer = error.originalResponse;
          let text = answer ? answer.getBody() : String(error);
          try { text = JSON.parse(text).error || text; } catch (e) { /* not JSON */ }
          ui.state.textContent = `Failed: ${text}`;
          ui.item.dataset.done = "failed";
          ui.toggle.hidden = true;
          active.delete(watched);
          over();
        },
        onSuccess() {
          ui.bar.value = 100;
          ui.toggle.hidden = true;
          active.delete(watched);
          const done = (error) => {
            if (error) {
              ui.state.textContent = `Failed: ${error}`;
              ui.item.dataset.done = "failed";
            } else {
              ui.state.textContent = ui.item.dataset.sha256
                ? `Done. sha256 on the cluster: ${ui.item.dataset.sha256}`
                : "Done.";
              ui.item.dataset.done = "ok";
              existing.add(top);
            }
            over();
          };
          if (ui.item.dataset.sha256) return done("");
          // Every byte arrived; a large file's sha256 and its move into place are a task
          // on the portal's side: ask until it says how that ended.
          ui.state.textContent = "Checking on the cluster (sha256)…";
          const ask = () => fetch(upload.url, {
            method: "HEAD",
            headers: { "Tus-Resumable": "1.0.0", "X-CSRFToken": csrf() },
            credentials: "same-origin",
          }).then((answer) => {
            const digest = answer.headers.get("Upload-Sha256");
            const error = answer.headers.get("Upload-Error");
            if (digest) ui.item.dataset.sha256 = digest;
            const waiting = answer.status === 423 || answer.headers.get("Upload-Finishing") === "yes";
            if (digest || error || !waiting) {
              return done(error || "");
            }
            return new Promise((wait) => setTimeout(wait, 1000)).then(ask);
          }).catch(() => new Promise((wait) => setTimeout(wait, 2000)).then(ask));
          ask();
        },
      });
      watched.upload = upload;
      ui.toggle.addEventListener("click", () => {
        if (ui.toggle.textContent === "Pause") {
          active.delete(watched);  // paused: not stalled
          upload.abort();
          ui.toggle.textContent = "Resume";
          ui.state.textContent += " (paused)";
        } else {
          watched.heard = Date.now();
          active.add(watched);
          upload.start();
          ui.toggle.textContent = "Pause";
        }
      });
      ui.state.textContent = "waiting";
      queued += 1;
      waiting.push(() => {
        ui.state.textContent = "0 %";
        watched.heard = Date.now();
        active.add(watched);
        upload.start();
      });
      next();
    }

    for (const input of panel.querySelectorAll("input[type=file]")) {
      input.addEventListener("change", () => {
        for (const file of input.files) send(file);
        input.value = "";
      });
    }
    window.addEventListener("beforeunload", (event) => {
      if (queued > 0) event.preventDefault();
    });
  }

  return { start };
})();
