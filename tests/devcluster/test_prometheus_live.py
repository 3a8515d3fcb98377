"""A real Prometheus (Debian's) scrapes a live stack (gunicorn + uvicorn, a Celery worker,
beat, HAProxy) while a batch job and a notebook session run on the dev cluster and a job
uploads metric points: its PromQL answers give the sync's staleness, the sbatch count,
the session's time to ready and the ingest rate, each counted in the process that did it
(the worker, the web) and added up by the web's /metrics (multiprocess mode)."""

from __future__ import annotations

import shutil
import subprocess

import httpx
import pytest

from jobs import tasks
from jobs.models import Job
from metrics import ingest
from tests import factories, polling
from tests.livestack import LiveStack, free_port

pytestmark = [pytest.mark.devcluster, pytest.mark.django_db(transaction=True)]


class Prometheus:
    def __init__(self, tmp, target: str):
        self.tmp, self.port = tmp / "prometheus-server", free_port()
        self.tmp.mkdir()
        (self.tmp / "prometheus.yml").write_text(
            "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
            "scrape_configs:\n"
            "  - job_name: portal\n"
            "    metrics_path: /metrics\n"
            f"    static_configs: [{{targets: ['{target}']}}]\n"
        )
        self.url = f"http://127.0.0.1:{self.port}"

    def start(self) -> Prometheus:
        binary = shutil.which("prometheus")
        assert binary, "prometheus missing: `make monitoring` installs Debian's"
        self.log = open(self.tmp / "log", "w")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [
                binary,
                f"--config.file={self.tmp / 'prometheus.yml'}",
                f"--storage.tsdb.path={self.tmp / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        return self

    def query(self, promql: str) -> list[dict]:
        answer = httpx.get(f"{self.url}/api/v1/query", params={"query": promql}, timeout=5)
        answer.raise_for_status()
        return answer.json()["data"]["result"]

    def until(self, promql: str, what: str, timeout: float = 120) -> list[dict]:
        def found():
            try:
                return self.query(promql) or None
            except httpx.HTTPError:
                return None  # (still starting)

        return polling.until(found, timeout, f"Prometheus: {what} ({promql})", interval=0.5)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)
        self.log.close()


def test_prometheus_scrapes_a_live_stack_running_jobs_and_a_session(devcluster, owner, tmp_path):
    stack = LiveStack(tmp_path).start()
    prometheus = Prometheus(tmp_path, f"127.0.0.1:{stack.port}").start()
    batch = factories.job(owner, devcluster, "sleep 20", image=factories.image("prom-batch"))
    notebook = factories.job(
        owner,
        devcluster,
        "",
        kind=Job.Kind.NOTEBOOK,
        image=factories.image("prom-nb", offers_notebook=True),
    )
    try:
        for job in (batch, notebook):
            tasks.submit_job.apply_async((job.pk,), queue=stack.queue)
        cluster = devcluster.name
        sbatch = prometheus.until(
            f'sum(portal_scheduler_command_duration_seconds_count{{cluster="{cluster}",'
            'command="sbatch"}) >= 2',
            "two sbatch counted by the worker",
        )
        assert float(sbatch[0]["value"][1]) >= 2
        stale = prometheus.until(
            f'time() - max by (cluster) (portal_sync_last_success_timestamp_seconds{{cluster="{cluster}"}})',
            "the sync's staleness",
        )
        assert 0 <= float(stale[0]["value"][1]) < 60, stale

        # The job's own token, as its in-job client would send its points.
        def running() -> bool:
            batch.refresh_from_db()
            return batch.state == "running"

        polling.until(running, 120, "the batch job to run", interval=0.5)
        token = ingest.issue_token(batch)
        for start in range(0, 200, 50):
            answer = httpx.post(
                f"{stack.url}/api/v1/jobs/{batch.pk}/metrics/ingest/",
                json=factories.metric_records(50, start=start),
                headers={"Authorization": f"Bearer {token}"},
                timeout=30,
            )
            assert answer.status_code == 200, answer.text
        ingested = prometheus.until(
            "sum(increase(portal_metric_points_ingested_total[1m])) > 0", "the ingest rate"
        )
        assert float(ingested[0]["value"][1]) > 0
        ready = prometheus.until(
            'sum by (kind) (portal_session_ready_duration_seconds_count{kind="notebook"}) >= 1',
            "the notebook's time to ready",
            timeout=180,
        )
        assert ready[0]["metric"]["kind"] == "notebook"
        quantile = prometheus.query(
            "histogram_quantile(0.5, sum by (le) (portal_session_ready_duration_seconds_bucket))"
        )
        assert 0 < float(quantile[0]["value"][1]) <= 600, quantile
        # Requests by route name, never by path; no person or job among the labels.
        series = httpx.get(
            f"{prometheus.url}/api/v1/series", params={"match[]": '{__name__=~"portal_.+"}'}
        ).json()["data"]
        values = {value for labels in series for value in labels.values()}
        assert owner.username not in values and batch.uid not in values
        assert any(labels.get("view") == "metrics-upload" for labels in series)
    finally:
        for job in (batch, notebook):
            job.refresh_from_db()
            if not job.is_final:
                job.request_cancel()
                tasks.cancel_job.apply(args=[job.pk])
        prometheus.stop()
        stack.stop()
