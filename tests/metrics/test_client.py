"""The in-job metrics module: files, sequence numbers, attempts and the upload thread,
against a real HTTP server on loopback."""

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from schedulers.on_node import portal_metrics as pm
from tests import polling


def read(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


class Collector:
    """A tiny metrics endpoint: records what it receives; answers with ``status``."""

    def __init__(self, status=200, hang=False):
        self.batches, self.auth, self.status, self.hang = [], [], status, hang
        self.release = threading.Event()
        self.arrived = threading.Event()  # a request reached the server
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                collector.arrived.set()
                if collector.hang:
                    collector.release.wait(30)
                collector.auth.append(self.headers.get("Authorization"))
                code = collector.status() if callable(collector.status) else collector.status
                if code == 200:
                    collector.batches.append(json.loads(body))
                self.send_response(code)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/ingest/"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def records(self):
        return [r for batch in self.batches for r in batch]

    def close(self):
        self.release.set()
        self.server.shutdown()


@pytest.fixture
def token_file(tmp_path):
    path = tmp_path / ".portal_metrics_token"
    path.write_text("pm_secret-token\n")
    return str(path)


def test_log_appends_json_lines_per_rank_with_seq_and_attempt(tmp_path, monkeypatch):
    monkeypatch.setenv("SLURM_PROCID", "3")
    monkeypatch.setenv("SLURM_RESTART_COUNT", "1")
    run = pm.Run(str(tmp_path), url="", system_interval=0)
    for step in range(5):
        run.log(step=step, loss=1.0 / (step + 1), acc=step * 0.1)
    run.log(step=5, loss=float("nan"), bad="x")  # nothing finite: no record
    run.close()
    records = read(tmp_path / "rank-3.jsonl")
    assert [r["seq"] for r in records] == [0, 1, 2, 3, 4]
    assert {r["attempt"] for r in records} == {1} and {r["rank"] for r in records} == {3}
    assert records[2]["metrics"] == {"loss": pytest.approx(1 / 3), "acc": pytest.approx(0.2)}


def test_sequence_continues_when_the_script_runs_again_in_the_same_job(tmp_path):
    first = pm.Run(str(tmp_path), rank=0, attempt=0, url="", system_interval=0)
    first.log(step=0, loss=1.0)
    first.log(step=1, loss=0.5)
    first.close()
    second = pm.Run(str(tmp_path), rank=0, attempt=0, url="", system_interval=0)
    second.log(step=0, loss=0.9)
    second.close()
    assert [r["seq"] for r in read(tmp_path / "rank-0.jsonl")] == [0, 1, 2]


def test_uploads_batches_with_the_job_token(tmp_path, token_file):
    collector = Collector()
    try:
        run = pm.Run(
            str(tmp_path),
            url=collector.url,
            token_file=token_file,
            batch_size=10,
            system_interval=0,
        )
        for step in range(35):
            run.log(step=step, loss=step)
        run.close()
        assert sorted(r["seq"] for r in collector.records) == list(range(35))
        assert set(collector.auth) == {"Bearer pm_secret-token"}
        assert len(read(tmp_path / "rank-0.jsonl")) == 35
    finally:
        collector.close()


def test_failed_uploads_are_retried_with_backoff(tmp_path, token_file):
    answers = iter([503, 503])
    collector = Collector(status=lambda: next(answers, 200))
    try:
        run = pm.Run(
            str(tmp_path), url=collector.url, token_file=token_file, batch_size=5, system_interval=0
        )
        for step in range(5):
            run.log(step=step, loss=step)
        polling.until(
            lambda: len(collector.records) >= 5,
            15,
            lambda: f"5 records uploaded (got {len(collector.records)})",
            interval=0.1,
        )
        run.close()
        assert sorted(r["seq"] for r in collector.records) == [0, 1, 2, 3, 4]
    finally:
        collector.close()


def test_batches_queued_behind_a_slow_upload_go_out_as_one_call(tmp_path, token_file):
    """A busy portal: the first upload hangs while ten more batches are logged; once it
    answers, those ten go in one call (at most one in flight per job), not ten."""
    collector = Collector(hang=True)
    try:
        run = pm.Run(
            str(tmp_path), url=collector.url, token_file=token_file, batch_size=5, system_interval=0
        )
        for step in range(5):
            run.log(step=step, loss=step)
        assert collector.arrived.wait(10)  # the first upload waits on the portal
        for step in range(5, 55):
            run.log(step=step, loss=step)
        collector.release.set()
        run.close()
        assert sorted(r["seq"] for r in collector.records) == list(range(55))
        assert [len(b) for b in collector.batches] == [5, 50]
    finally:
        collector.close()


def test_a_refused_token_stops_uploads_but_the_file_keeps_everything(tmp_path, token_file):
    collector = Collector(status=410)
    try:
        run = pm.Run(
            str(tmp_path), url=collector.url, token_file=token_file, batch_size=5, system_interval=0
        )
        for step in range(20):
            run.log(step=step, loss=step)
            time.sleep(0.01)
        run.close()
        assert collector.records == []
        assert len(collector.auth) <= 2  # gave up after the refusal instead of retrying
        assert len(read(tmp_path / "rank-0.jsonl")) == 20
    finally:
        collector.close()


def test_a_hanging_portal_never_holds_up_log(tmp_path, token_file):
    """The queue is bounded: with the upload stuck, batches are dropped from the
    upload (the file has them) and log() keeps returning."""
    collector = Collector(hang=True)
    try:
        run = pm.Run(
            str(tmp_path),
            url=collector.url,
            token_file=token_file,
            batch_size=10,
            queue_batches=3,
            system_interval=0,
        )
        for step in range(500):
            run.log(step=step, loss=step)
        assert run.dropped_batches >= 40
        run.close(timeout=0.5)
        assert len(read(tmp_path / "rank-0.jsonl")) == 500
    finally:
        collector.close()


def test_without_url_or_token_nothing_is_uploaded(tmp_path):
    run = pm.Run(
        str(tmp_path),
        url="http://127.0.0.1:9/never",
        token_file=str(tmp_path / "none"),
        system_interval=0,
    )
    run.log(step=0, loss=1.0)
    run.close()
    assert run.uploaded_records == 0 and run.dropped_batches == 0


def test_the_rank_comes_from_the_distributed_contract_and_every_record_names_its_node(
    tmp_path, monkeypatch
):
    """Under mpirun every rank of a node has the node's SLURM_PROCID: RANK wins."""
    monkeypatch.setenv("SLURM_PROCID", "1")
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("PORTAL_NODE", "node2")
    run = pm.Run(str(tmp_path), url="", system_interval=0)
    run.log(step=0, loss=1.0)
    run.close()
    (record,) = read(tmp_path / "rank-3.jsonl")
    assert (record["rank"], record["node"]) == (3, "node2")


@pytest.mark.parametrize(("local_rank", "samples"), [("0", True), ("1", False)])
def test_system_metrics_are_sampled_once_per_node(tmp_path, monkeypatch, local_rank, samples):
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("LOCAL_RANK", local_rank)
    run = pm.Run(str(tmp_path), url="", system_interval=0.05)
    assert (run._system is not None) == samples
    run.close()


def test_system_metrics_are_sampled_in_the_background(tmp_path):
    run = pm.Run(str(tmp_path), url="", system_interval=0.1)

    def sampled() -> bool:
        run.flush()
        if len((tmp_path / "rank-0.jsonl").read_text().splitlines()) >= 2:
            return True
        sum(i * i for i in range(100000))  # some CPU to measure
        return False

    polling.until(sampled, 5, "two samples of system metrics", interval=0.05)
    run.close()
    records = [json.loads(line) for line in (tmp_path / "rank-0.jsonl").read_text().splitlines()]
    assert records and all(r["system"] for r in records)
    assert "sys/memory_gb" in records[-1]["metrics"] and records[-1]["node"]


def test_nvidia_smi_output_is_limited_to_the_jobs_gpus():
    out = "0, GPU-aaa, 87, 1200\n1, GPU-bbb, 5, 300\n2, GPU-ccc, 99, 16000\n"
    values = pm.parse_nvidia_smi(out, ["0", "GPU-ccc"], "node7")
    assert values == {
        "sys/gpu0_util_percent@node7": 87.0,
        "sys/gpu0_memory_mib@node7": 1200.0,
        "sys/gpu2_util_percent@node7": 99.0,
        "sys/gpu2_memory_mib@node7": 16000.0,
    }


def test_torch_logger_logs_every_nth_step(tmp_path):
    run = pm.Run(str(tmp_path), url="", system_interval=0)
    logger = pm.TorchLogger(every=10, run=run)
    for _ in range(35):
        logger.step(loss=0.5)
    run.close()
    assert [r["step"] for r in read(tmp_path / "rank-0.jsonl")] == [0, 10, 20, 30]


def test_module_uses_only_the_standard_library():
    import ast
    import sys

    tree = ast.parse(open(pm.__file__).read())
    imported = {
        (node.module if isinstance(node, ast.ImportFrom) else alias.name).split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, (ast.Import, ast.ImportFrom))
        for alias in node.names
    }
    optional = {"tensorflow", "keras", "__future__"}  # imported only inside KerasCallback()
    assert imported - optional <= set(sys.stdlib_module_names)


def test_keras_callback_logs_batches_and_epochs(tmp_path, monkeypatch):
    """Against a stand-in for keras.callbacks.Callback (TensorFlow is not installed here):
    the callback only relies on Keras calling these two hooks with a logs dict."""
    import sys
    import types

    class Callback:
        def __init__(self):
            pass

    keras = types.SimpleNamespace(callbacks=types.SimpleNamespace(Callback=Callback))
    monkeypatch.setitem(sys.modules, "tensorflow", types.SimpleNamespace(keras=keras))
    run = pm.Run(str(tmp_path), url="", system_interval=0)
    callback = pm.KerasCallback(every=2, run=run)
    for batch in range(5):
        callback.on_train_batch_end(batch, {"loss": 1.0 / (batch + 1), "accuracy": 0.5})
    callback.on_epoch_end(0, {"loss": 0.3, "val_accuracy": 0.9})
    run.close()
    records = read(tmp_path / "rank-0.jsonl")
    assert [r["step"] for r in records] == [0, 2, 4, 5]
    assert records[-1]["metrics"] == {"epoch_loss": 0.3, "epoch_val_accuracy": 0.9, "epoch": 0}


def test_a_trials_parameters_fold_and_tags(tmp_path, monkeypatch):
    """An experiment's trial: pm.params() reads params.json in the work directory (or
    PORTAL_PARAMS_JSON, a relaunched trial), pm.fold() the fold, and every record names
    the trial and fold."""
    monkeypatch.setenv("PORTAL_WORK_DIR", str(tmp_path))
    for name in ("PORTAL_PARAMS_JSON", "PORTAL_TRIAL", "FOLD", "NUM_FOLDS"):
        monkeypatch.delenv(name, raising=False)
    assert pm.params() == {} and pm.fold() == (0, 1)
    monkeypatch.setenv("PORTAL_PARAMS_JSON", '{"lr": 0.5}')
    assert pm.params() == {"lr": 0.5}
    (tmp_path / "params.json").write_text('{"lr": 0.01, "act": "relu"}')
    assert pm.params() == {"lr": 0.01, "act": "relu"}
    (tmp_path / "params.json").write_text("[1, 2]")  # not an object: no parameters
    assert pm.params() == {}
    monkeypatch.setenv("PORTAL_TRIAL", "7")
    monkeypatch.setenv("FOLD", "3")
    monkeypatch.setenv("NUM_FOLDS", "5")
    assert pm.fold() == (3, 5)
    run = pm.Run(str(tmp_path / "m"), rank=0, url="", token_file="")
    run.log(step=1, val_accuracy=0.5)
    run.close()
    (record,) = read(tmp_path / "m" / "rank-0.jsonl")
    assert (record["trial"], record["fold"]) == (7, 3)
