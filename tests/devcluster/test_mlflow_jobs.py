"""#46 on the real path: unchanged training scripts that log with MLflow (its own API,
PyTorch Lightning's MLFlowLogger, Hugging Face's Trainer with report_to="mlflow") run as
portal jobs on the dev cluster, in the cluster's PyTorch environment (`make devcluster`:
torch, lightning, transformers, mlflow-skinny pinned in deploy/devcluster/torch.lock). Their curves land on the job while it runs, through the
portal's MLflow-compatible API with the job's own token."""

from __future__ import annotations

from pathlib import Path

import pytest

from jobs import tasks
from jobs.models import Job
from metrics.models import MetricPoint, MetricSeries
from tests import factories
from tests.devcluster.helpers import need_part, remote, run_until
from tests.polling import until
from tracking.models import TrackedRun
from tracking.tail import tail_job

# mlflow's own API, unchanged: half the curve, then it waits (two minutes at most) for a
# file "go" in its work directory, which the test writes once it has seen those points.
PLAIN = """torch-python - <<'EOF'
import os, time
import mlflow

mlflow.set_experiment("unchanged")
with mlflow.start_run(run_name="plain"):
    mlflow.log_param("lr", 0.01)
    for step in range(30):
        mlflow.log_metric("loss", 1.0 / (step + 1), step=step)
        if step == 14:
            deadline = time.monotonic() + 120
            while not os.path.exists("go") and time.monotonic() < deadline:
                time.sleep(0.5)
print("logged")
EOF"""

# PyTorch Lightning with its MLFlowLogger, unchanged (the tracking URI comes from the
# environment, as MLFlowLogger's default reads it): 3 epochs of 8 steps.
LIGHTNING = """torch-python - <<'EOF'
import torch
import lightning as L
from lightning.pytorch.loggers import MLFlowLogger
from torch.utils.data import DataLoader, TensorDataset


class Model(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.save_hyperparameters({"lr": 0.05, "hidden": 4})
        self.layer = torch.nn.Linear(4, 1)

    def training_step(self, batch, index):
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.layer(x), y)
        self.log("train_loss", loss)
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.hparams.lr)


torch.manual_seed(0)
x = torch.randn(256, 4)
data = DataLoader(TensorDataset(x, x.sum(1, keepdim=True)), batch_size=32)
trainer = L.Trainer(
    max_epochs=3, logger=MLFlowLogger(experiment_name="lightning"), log_every_n_steps=1,
    enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
)
trainer.fit(Model(), data)
print("fitted")
EOF"""


# Hugging Face's Trainer with report_to="mlflow", unchanged: a tiny BERT made from its
# configuration (nothing is downloaded), 2 epochs of 8 steps, a log every 2 steps.
HUGGING_FACE = """torch-python - <<'EOF'
import torch
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments

torch.manual_seed(0)
config = BertConfig(
    vocab_size=64, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
    intermediate_size=32, num_labels=2,
)


class Data(torch.utils.data.Dataset):
    def __len__(self):
        return 64

    def __getitem__(self, i):
        ids = torch.randint(1, 64, (8,), generator=torch.Generator().manual_seed(i))
        return {"input_ids": ids, "labels": torch.tensor(i % 2)}


args = TrainingArguments(
    output_dir="hf-out", report_to="mlflow", run_name="tiny-bert", num_train_epochs=2,
    per_device_train_batch_size=8, logging_steps=2, save_strategy="no", use_cpu=True,
    disable_tqdm=True,
)
Trainer(model=BertForSequenceClassification(config), args=args, train_dataset=Data()).train()
print("trained")
EOF"""


def need_training_libraries() -> None:
    need_part(
        Path("/usr/local/bin/torch-python").exists(),
        "the dev cluster has no PyTorch environment (/usr/local/bin/torch-python): `make "
        "devcluster` installs it only from a CPU wheel on this machine (e.g. /opt/wheels)",
    )


@pytest.fixture
def reachable(live_server, settings):
    """The job's node reaches the portal (this test's live server) and has the libraries."""
    need_training_libraries()
    settings.PORTAL_URL = live_server.url


def completed(owner, cluster, command: str) -> Job:
    job = run_until(submitted(owner, cluster, command), {"completed", "failed"}, timeout=240)
    assert job.state == "completed", job.message
    return job


def submitted(owner, cluster, command: str) -> Job:
    job = factories.job(owner, cluster, command, partition="cpu", gpus=0, gpu_type="")
    job.full_clean()
    tasks.submit_job.apply(args=[job.pk])
    job.refresh_from_db()
    assert job.state == Job.State.PENDING, job.message
    return job


def curve(job, key: str) -> list[tuple[int, float]]:
    return list(
        MetricPoint.objects.filter(series__job=job, series__key=key)
        .order_by("step")
        .values_list("step", "value")
    )


@pytest.mark.django_db
def test_an_unchanged_mlflow_script_logs_live_into_its_job(devcluster, owner, reachable):
    job = submitted(owner, devcluster, PLAIN)
    assert "MLFLOW_TRACKING_URI" in job.script
    # Live: half the curve is on the job while the script still runs.
    until(lambda: len(curve(job, "loss")) == 15, 120, lambda: f"15 points: {curve(job, 'loss')}")
    remote(job.cluster_account, ["touch", f"{job.work_dir}/go"])
    job = run_until(job, {"completed", "failed"}, timeout=120)
    assert job.state == "completed", job.message
    assert curve(job, "loss") == [(s, 1.0 / (s + 1)) for s in range(30)]
    run = TrackedRun.objects.get(job=job)
    assert (run.name, run.status, run.params) == ("plain", "FINISHED", {"lr": "0.01"})
    assert run.experiment.name == "unchanged" and run.experiment.owner == owner


@pytest.mark.django_db
def test_an_unchanged_lightning_script_with_mlflowlogger_logs_into_its_job(
    devcluster, owner, reachable
):
    job = completed(owner, devcluster, LIGHTNING)
    losses = curve(job, "train_loss")
    assert [step for step, _ in losses] == list(range(24))  # 3 epochs x 8 steps, every step
    assert losses[-1][1] < losses[0][1]  # it trained
    assert MetricSeries.objects.filter(job=job, key="epoch").exists()
    run = TrackedRun.objects.get(job=job)
    assert run.status == "FINISHED" and run.experiment.name == "lightning"
    assert run.params == {"lr": "0.05", "hidden": "4"}


@pytest.mark.django_db
def test_an_unchanged_hugging_face_trainer_reporting_to_mlflow_logs_into_its_job(
    devcluster, owner, reachable
):
    job = completed(owner, devcluster, HUGGING_FACE)
    assert [step for step, _ in curve(job, "loss")] == [2, 4, 6, 8, 10, 12, 14, 16]
    assert len(curve(job, "learning_rate")) == 8 and curve(job, "train_loss")
    run = TrackedRun.objects.get(job=job)
    assert (run.name, run.status) == ("tiny-bert", "FINISHED")
    # The Trainer's arguments and the model's configuration, as MLflow's parameters.
    assert run.params["num_train_epochs"] == "2" and run.params["hidden_size"] == "16"


@pytest.mark.django_db
def test_an_unchanged_mlflow_script_where_nodes_cannot_reach_the_portal(devcluster, owner):
    """metrics_over_ssh: the job gets MLflow's own file store in its work directory, and
    the SSH tail reads it as it reads the portal's metrics files: live, then to the end."""
    need_training_libraries()
    devcluster.metrics_over_ssh = True
    devcluster.save()
    job = submitted(owner, devcluster, PLAIN)
    assert "metrics/ingest/" not in job.script  # no upload URL: its nodes cannot reach us

    job = run_until(job, {"running"}, timeout=120)

    def tailed() -> list:
        tail_job(job)  # what the beat's tail_running does every PORTAL_SYNC_INTERVAL
        return curve(job, "loss")

    until(lambda: len(tailed()) == 15, 120, lambda: f"15 points: {curve(job, 'loss')}")
    run = TrackedRun.objects.get(job=job)
    assert (run.name, run.status, run.experiment.name) == ("plain", "RUNNING", "unchanged")
    remote(job.cluster_account, ["touch", f"{job.work_dir}/go"])
    job = run_until(job, {"completed", "failed"}, timeout=120)
    assert job.state == "completed", job.message
    tail_job(job, max_passes=5)  # the outbox's final read, as at every job's end
    assert curve(job, "loss") == [(s, 1.0 / (s + 1)) for s in range(30)]
    run.refresh_from_db()
    assert (run.status, run.params) == ("FINISHED", {"lr": "0.01"})
    assert run.tags["mlflow.runName"] == "plain"
    assert len(run.run_id) == 32 and run.experiment.owner == owner
