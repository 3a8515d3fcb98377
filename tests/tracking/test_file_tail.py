"""Reading MLflow's file store over SSH (tracking/file_tail.py), its parser on what
MLflow's own client writes; the real path (a job on a cluster whose nodes cannot reach
the portal) is tests/devcluster/test_mlflow_jobs.py."""

from __future__ import annotations

import math
import os

from tracking.file_tail import parse_lines


def test_the_parser_reads_what_mlflows_file_store_writes(tmp_path, monkeypatch):
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    from mlflow.tracking import MlflowClient  # noqa: PLC0415

    client = MlflowClient(tracking_uri=(tmp_path / "mlruns").as_uri())
    run = client.create_run(client.create_experiment("e")).info.run_id
    for step in range(5):
        client.log_metric(
            run, "loss", 1 / (step + 1), timestamp=1_700_000_000_000 + step, step=step
        )
    client.log_metric(run, "loss", math.nan, timestamp=1_700_000_000_009, step=9)
    (path,) = (tmp_path / "mlruns").rglob("metrics/loss")
    data = path.read_bytes()
    points, used = parse_lines(data)
    assert used == len(data)
    assert points == [(1_700_000_000_000 + s, 1 / (s + 1), s) for s in range(5)]  # NaN left out


def test_a_line_still_being_written_waits_and_garbage_is_skipped():
    data = (
        b"1700 0.5 1\nnot numbers here\n1701 inf 2\n1702 0.25\n99999999999999999999 1 1\n1703 0.1"
    )
    points, used = parse_lines(data)
    assert points == [(1700, 0.5, 1), (1702, 0.25, 0)]
    assert used == data.rfind(b"\n") + 1  # "1703 0.1" waits for its newline
    assert parse_lines(os.urandom(0)) == ([], 0)
