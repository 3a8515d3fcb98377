"""Log training metrics to the HPC portal. Standard library only.

Every job the portal starts has this module on PYTHONPATH::

    import portal_metrics as pm

    for step, batch in enumerate(loader):
        loss = train_step(batch)
        pm.log(step=step, loss=loss)          # cheap: buffered, never waits on the network
    pm.log(step=step, val_accuracy=acc)

Records are appended as JSON lines to ``$PORTAL_METRICS_DIR/rank-<RANK>.jsonl`` (one
file per rank, so parallel writers never interleave; the rank is the distributed
contract's ``RANK``, set by the portal's launchers and by torchrun, else Slurm's
``SLURM_PROCID``). Every record names the node it was written on. When the job was given a
metrics URL and a token file, a background thread also posts them to the portal in
batches, with a bounded queue and back-off; when it cannot, the file still holds
everything and the portal reads it over SSH instead.

Each record carries a sequence number (continued across restarts of the script
within the job) and the Slurm restart count, so a requeued job that repeats steps
becomes a new attempt instead of overwriting or being dropped.
"""

from __future__ import annotations

import atexit
import json
import math
import os
import queue
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

__all__ = [
    "Run",
    "log",
    "flush",
    "close",
    "get_run",
    "params",
    "tag",
    "fold",
    "should_checkpoint",
    "checkpoint_dir",
    "checkpoint_saved",
    "resume_step",
    "attempt",
    "KerasCallback",
    "TorchLogger",
]

FORMAT_VERSION = 1
# Queued batches merged into one upload up to about this many records (the portal takes
# 10,000 a request).
MERGE_RECORDS = 2000
# As the portal checks them (jobs/models/annotations.py).
_TAG = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:=+-]{0,63}\Z")
_PARAM = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,47}\Z")


def _env_int(name: str, default: int) -> int:
    try:
        return int(os.environ.get(name, default))
    except ValueError:
        return default


def _last_seq(path: str) -> int:
    """The sequence number of the file's last complete record (-1 if none)."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - 65536))
            tail = fh.read()
    except OSError:
        return -1
    for line in reversed(tail.split(b"\n")):
        try:
            return int(json.loads(line)["seq"])
        except (ValueError, KeyError, TypeError):
            continue
    return -1


def _clean(metrics: dict) -> dict:
    """Finite numbers only (JSON has no NaN); bools and numpy/torch scalars become floats."""
    out = {}
    for key, value in metrics.items():
        if hasattr(value, "item"):  # numpy or torch scalar
            try:
                value = value.item()
            except (TypeError, ValueError):
                continue
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            try:
                value = float(value)
            except (TypeError, ValueError):
                continue
        if math.isfinite(value):
            out[str(key)] = value
    return out


class Run:
    """One writer per process. Use the module functions unless you need two runs."""

    def __init__(
        self,
        directory: str | None = None,
        *,
        rank: int | None = None,
        attempt: int | None = None,
        url: str | None = None,
        token_file: str | None = None,
        batch_size: int = 200,
        flush_interval: float = 1.0,
        queue_batches: int = 100,
        system_interval: float | None = None,
        filename: str | None = None,
    ):
        env = os.environ
        self.directory = (
            directory
            or env.get("PORTAL_METRICS_DIR")
            or os.path.join(env.get("PORTAL_WORK_DIR", "."), "metrics")
        )
        self.rank = _env_rank() if rank is None else rank
        self.node = _node_name()
        self.attempt = _env_int("SLURM_RESTART_COUNT", 0) if attempt is None else attempt
        # An experiment's trial and cross-validation fold, on every record.
        self.tags = (
            {"trial": _env_int("PORTAL_TRIAL", 0), "fold": _env_int("FOLD", 0)}
            if "PORTAL_TRIAL" in env
            else {}
        )
        self.path = os.path.join(self.directory, filename or f"rank-{self.rank}.jsonl")
        self.batch_size = batch_size
        self.flush_interval = flush_interval
        os.makedirs(self.directory, mode=0o700, exist_ok=True)
        self._seq = _last_seq(self.path) + 1
        self._file = open(self.path, "a", buffering=1 << 16, encoding="utf-8")  # noqa: SIM115
        self._lock = threading.Lock()
        self._pending: list[str] = []
        self._last_flush = time.monotonic()
        self._closed = False
        self.dropped_batches = 0  # uploads given up on (the file has them)
        self.uploaded_records = 0

        url = env.get("PORTAL_METRICS_URL", "") if url is None else url
        token_file = env.get("PORTAL_METRICS_TOKEN_FILE", "") if token_file is None else token_file
        self._url = url
        self._token = ""
        if url and token_file:
            try:
                with open(token_file, encoding="utf-8") as fh:
                    self._token = fh.read().strip()
            except OSError:
                self._token = ""
        self._uploads: queue.Queue[list[str] | None] = queue.Queue(maxsize=queue_batches)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._background, name="portal-metrics", daemon=True)
        self._thread.start()

        if system_interval is None:
            system_interval = float(env.get("PORTAL_SYSTEM_METRICS_INTERVAL", "0") or 0)
        self._system = None
        # One sampler per node: the node's first local rank (rank 0 of a single process).
        local_rank = _env_int("LOCAL_RANK", _env_int("SLURM_LOCALID", self.rank))
        if system_interval > 0 and local_rank == 0:
            self._system = threading.Thread(
                target=self._sample_system,
                args=(system_interval,),
                name="portal-sysmetrics",
                daemon=True,
            )
            self._system.start()
        atexit.register(self.close)

    # -- the training loop's side: no I/O beyond a buffered append ------------------------
    def log(self, step: int | None = None, **metrics) -> None:
        """Record ``metrics`` (name=number) at ``step``. Non-finite values are skipped."""
        values = _clean(metrics)
        if not values or self._closed:
            return
        self._record({"step": None if step is None else int(step), "metrics": values})

    def annotate(self, tags=(), params=None) -> None:
        """Tag this run and/or report its parameters (name: number, text or bool): written
        and sent like a metric record, flushed at once. The portal checks the bounds."""
        # What the portal would refuse is left out here (with a word on stderr), so that one
        # bad tag never costs a batch of metrics its upload.
        body: dict = {}
        good = [str(t) for t in tags if _TAG.match(str(t))]
        if good:
            body["tags"] = good
        values = {
            str(k): v if isinstance(v, (bool, int, float, str)) else str(v)
            for k, v in (params or {}).items()
            if _PARAM.match(str(k))
        }
        if values:
            body["params"] = values
        if len(good) != len(tags) or len(values) != len(params or {}):
            print(
                "portal_metrics: left out tags or parameter names the portal refuses",
                file=sys.stderr,
            )
        if not body or self._closed:
            return
        self._record({"step": None, "annotate": body})
        self.flush()

    def _record(self, fields: dict) -> None:
        with self._lock:
            record = {
                "v": FORMAT_VERSION,
                "seq": self._seq,
                "attempt": self.attempt,
                "rank": self.rank,
                "node": self.node,
                "time": round(time.time(), 3),
                **self.tags,
                **fields,
            }
            self._seq += 1
            self._pending.append(json.dumps(record, separators=(",", ":")))
            if (
                len(self._pending) >= self.batch_size
                or time.monotonic() - self._last_flush >= self.flush_interval
            ):
                self._flush_locked()

    def _flush_locked(self) -> None:
        self._last_flush = time.monotonic()
        if not self._pending:
            return
        lines, self._pending = self._pending, []
        self._file.write("\n".join(lines) + "\n")
        self._file.flush()
        if self._token:
            try:
                self._uploads.put_nowait(lines)
            except queue.Full:
                self.dropped_batches += 1  # the portal reads them from the file instead

    def flush(self) -> None:
        with self._lock:
            if not self._closed:
                self._flush_locked()

    def close(self, timeout: float = 5.0) -> None:
        """Write what is buffered and give the uploader ``timeout`` seconds to send it."""
        with self._lock:
            if self._closed:
                return
            self._flush_locked()
            self._closed = True
            self._file.close()
        self._stop.set()
        try:
            self._uploads.put(None, timeout=0.1)
        except queue.Full:
            pass
        self._thread.join(timeout)

    # -- background: periodic flush and uploads ------------------------------------------
    def _background(self) -> None:
        backoff = 0.0
        while True:
            try:
                lines = self._uploads.get(timeout=self.flush_interval)
            except queue.Empty:
                if self._stop.is_set():
                    return
                self.flush()  # a slow logger's records still go out about once a second
                continue
            if lines is None:
                # Closing: send what is left without waiting between tries.
                while True:
                    try:
                        rest = self._uploads.get_nowait()
                    except queue.Empty:
                        return
                    if rest and not self._post(rest):
                        return
            # Batches that queued while the last upload was on its way go with this one: at
            # most one call in flight, so a busy portal gets fewer, larger calls from each
            # job instead of a growing backlog of one-second ones.
            batch = list(lines)
            while len(batch) < MERGE_RECORDS:
                try:
                    more = self._uploads.get_nowait()
                except queue.Empty:
                    break
                if more is None:  # closing: this batch first, then what is left
                    self._uploads.put(None)
                    break
                batch.extend(more)
            while not self._post(batch):
                backoff = min(60.0, max(1.0, backoff * 2))
                if self._stop.wait(backoff):
                    self.dropped_batches += 1
                    return
            backoff = 0.0

    def _post(self, lines: list[str]) -> bool:
        body = ("[" + ",".join(lines) + "]").encode()
        request = urllib.request.Request(
            self._url,
            data=body,
            method="POST",
            headers={"Content-Type": "application/json", "Authorization": "Bearer " + self._token},
        )
        try:
            urllib.request.urlopen(request, timeout=10).close()
        except urllib.error.HTTPError as exc:
            if exc.code in (400, 401, 403, 404, 410, 413):
                # Refused for good (job ended, token revoked, bad batch): stop uploading;
                # the file has everything.
                self._token = ""
                self.dropped_batches += 1
                return True
            return False
        except (OSError, ValueError):
            return False
        self.uploaded_records += len(lines)
        return True

    # -- optional system metrics ---------------------------------------------------------
    def _sample_system(self, interval: float) -> None:
        node = self.node
        visible = os.environ.get("PORTAL_NODE_GPUS") or os.environ.get("CUDA_VISIBLE_DEVICES", "")
        gpus = [g for g in visible.split(",") if g.strip()]
        prev = None
        while not self._stop.wait(interval):
            values = {}
            prev, cpu = _cpu_sample(prev)
            if cpu is not None:
                values["sys/cpu_percent"] = cpu
            rss = _job_rss_gb()
            if rss is not None:
                values["sys/memory_gb"] = rss
            values.update(_gpu_sample(gpus, node))
            if values:
                self._record({"step": None, "system": True, "node": node, "metrics": values})


def _env_rank() -> int:
    """This process's rank: the portal's contract (RANK, also torchrun's), else Slurm's."""
    for name in ("RANK", "SLURM_PROCID"):
        value = os.environ.get(name, "")
        if value.isdigit():
            return int(value)
    return 0


def _node_name() -> str:
    """Slurm's name for this node (several nodes may share a host), else the host name."""
    return (
        os.environ.get("PORTAL_NODE")
        or os.environ.get("SLURMD_NODENAME")
        or socket.gethostname().split(".")[0]
    )[:253]


def _cpu_sample(prev):
    """CPU use of this process and its children, as % of one core since the last sample."""
    t = os.times()
    now = (time.monotonic(), t.user + t.system + t.children_user + t.children_system)
    if prev is None or now[0] <= prev[0]:
        return now, None
    return now, round(100.0 * (now[1] - prev[1]) / (now[0] - prev[0]), 1)


def _job_rss_gb():
    """Resident memory of this process (Linux), in GB."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return round(int(line.split()[1]) / 1024 / 1024, 3)
    except OSError:
        pass
    return None


def _gpu_sample(visible: list[str], node: str) -> dict:
    """Utilisation and memory of the job's GPUs only, from nvidia-smi if it is there."""
    if not visible:
        return {}
    try:
        out = subprocess.run(
            [
                "nvidia-smi",
                "--query-gpu=index,uuid,utilization.gpu,memory.used",
                "--format=csv,noheader,nounits",
            ],
            capture_output=True,
            text=True,
            timeout=5,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    return parse_nvidia_smi(out, visible, node)


def parse_nvidia_smi(out: str, visible: list[str], node: str) -> dict:
    values = {}
    for line in out.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 4:
            continue
        index, uuid, util, mem = parts
        if index not in visible and uuid not in visible:
            continue
        for name, raw in (("util_percent", util), ("memory_mib", mem)):
            try:
                values[f"sys/gpu{index}_{name}@{node}"] = float(raw)
            except ValueError:
                pass
    return values


# -- module-level convenience: one Run per process, made on first use ------------------------
_run: Run | None = None
_run_lock = threading.Lock()


def tag(*names: str) -> None:
    """Tag this run on the portal (``pm.tag("best")``): letters, digits and ._:=+-."""
    get_run().annotate(tags=names)


def params(values: dict | None = None) -> dict:
    """The run's parameters: given at launch (``portal submit --param``) or this trial's in
    an experiment: ``params.json`` in the work directory, or PORTAL_PARAMS_JSON (a relaunched
    trial); {} otherwise. ``pm.params({"lr": 0.01})`` also reports ``values`` as parameters
    of this run to the portal (comparisons show and group by them)."""
    if values:
        get_run().annotate(params=values)
    path = os.path.join(os.environ.get("PORTAL_WORK_DIR", "."), "params.json")
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read(1 << 20)
    except OSError:
        text = os.environ.get("PORTAL_PARAMS_JSON", "")
    try:
        value = json.loads(text) if text else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def fold() -> tuple[int, int]:
    """(FOLD, NUM_FOLDS) of a K-fold trial; (0, 1) when the job is not one."""
    return _env_int("FOLD", 0), max(1, _env_int("NUM_FOLDS", 1))


# -- checkpoint and requeue (docs/use/long-runs.md) ---------------------------------------
# A resumable job is warned before its time limit: the job's shell then creates the file
# PORTAL_CHECKPOINT_REQUEST. Polling it from the training loop is safe where a signal
# handler is not (a handler may interrupt a collective or a half-written file).
_CHECKPOINT_MARK = ".portal-checkpoint.json"
_SAVED_ON_REQUEST = ".portal-saved-on-request"


class _Request:
    checked = 0.0  # monotonic time of the last look
    asked = False


def should_checkpoint() -> bool:
    """True once the portal asks this job to save a checkpoint and exit (its time limit is
    near). Call it every step: it looks at the request file at most once a second."""
    path = os.environ.get("PORTAL_CHECKPOINT_REQUEST", "")
    if not path:
        return False
    now = time.monotonic()
    if not _Request.asked and now - _Request.checked >= 1.0:
        _Request.checked = now
        _Request.asked = os.path.exists(path)
    return _Request.asked


def _checkpoint_folder() -> str:
    return os.environ.get("PORTAL_CHECKPOINT_DIR") or os.path.join(os.getcwd(), "checkpoints")


def checkpoint_dir() -> str:
    """Where checkpoints go: PORTAL_CHECKPOINT_DIR (kept across attempts), made if missing;
    ``./checkpoints`` outside a resumable job."""
    path = _checkpoint_folder()
    os.makedirs(path, exist_ok=True)
    return path


def checkpoint_saved(step: int) -> None:
    """Say that a checkpoint of ``step`` is complete (call it after the file is written and
    closed): resume_step() returns it in the next attempt, and after a request the job's
    shell requeues the job instead of counting its exit as the end. The points logged so
    far are written first: a checkpoint never covers a step whose points were only in
    memory (a requeue right after it would lose them, and the next attempt resumes after)."""
    flush()
    folder = checkpoint_dir()
    mark = os.path.join(folder, _CHECKPOINT_MARK)
    record = {"step": int(step), "attempt": attempt(), "time": time.time()}
    tmp = f"{mark}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(record, fh)
    os.replace(tmp, mark)  # whole or not at all, even if the job is killed meanwhile
    if should_checkpoint():
        with open(os.path.join(folder, _SAVED_ON_REQUEST), "w", encoding="utf-8") as fh:
            fh.write(str(int(step)))


def resume_step() -> int | None:
    """The step of the last checkpoint_saved() (in this or an earlier attempt), or None."""
    path = os.path.join(_checkpoint_folder(), _CHECKPOINT_MARK)
    try:
        with open(path, encoding="utf-8") as fh:
            step = json.loads(fh.read(4096)).get("step")
    except (OSError, ValueError, AttributeError):
        return None
    return step if isinstance(step, int) and not isinstance(step, bool) else None


def attempt() -> int:
    """This run's attempt (1 = first; a requeued job runs again as 2, 3, ...)."""
    return _env_int("PORTAL_ATTEMPT", _env_int("SLURM_RESTART_COUNT", 0) + 1)


def get_run() -> Run:
    global _run
    with _run_lock:
        if _run is None or _run._closed:
            _run = Run()
        return _run


def log(step: int | None = None, **metrics) -> None:
    get_run().log(step=step, **metrics)


def flush() -> None:
    if _run is not None:
        _run.flush()


def close() -> None:
    if _run is not None:
        _run.close()


class TorchLogger:
    """For a PyTorch loop: ``tl = TorchLogger(every=10)``; ``tl.step(loss=loss, lr=lr)``.

    Tensors are converted with ``.item()`` only every ``every`` steps, so logging does
    not force a GPU synchronisation on each step.
    """

    def __init__(self, every: int = 1, run: Run | None = None):
        self.every = max(1, every)
        self.run = run
        self.global_step = 0

    def step(self, **metrics) -> None:
        if self.global_step % self.every == 0:
            (self.run or get_run()).log(step=self.global_step, **metrics)
        self.global_step += 1


def KerasCallback(every: int = 1, run: Run | None = None):  # noqa: N802 - reads like a class
    """``model.fit(..., callbacks=[portal_metrics.KerasCallback()])``: batch and epoch logs."""
    try:
        from tensorflow import keras  # noqa: PLC0415
    except ImportError:  # Keras 3 without TensorFlow
        import keras  # noqa: PLC0415

    class _Callback(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.seen = 0

        def on_train_batch_end(self, batch, logs=None):
            if logs and self.seen % max(1, every) == 0:
                (run or get_run()).log(step=self.seen, **logs)
            self.seen += 1

        def on_epoch_end(self, epoch, logs=None):
            if logs:
                (run or get_run()).log(
                    step=self.seen, **{f"epoch_{k}": v for k, v in logs.items()}, epoch=epoch
                )

    return _Callback()


def _sample_until_stopped() -> None:
    """``python portal_metrics.py --system``: only the node's CPU, memory and GPU samples,
    in ``system.jsonl``, until TERM. A session job runs this beside its app (JupyterLab,
    TensorBoard), so the portal sees when a session holds GPUs idle."""
    import signal

    interval = float(os.environ.get("PORTAL_SYSTEM_METRICS_INTERVAL", "0") or 0)
    if interval <= 0:
        return
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    run = Run(system_interval=interval, filename="system.jsonl", rank=0)
    stop.wait()
    run.close()


if __name__ == "__main__" and sys.argv[1:] == ["--system"]:
    _sample_until_stopped()
