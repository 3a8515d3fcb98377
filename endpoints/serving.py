"""An endpoint's serving job: the hidden session app that serves its kind (the centre's
command, a setting, with the model's folder and a loopback port behind the session
guard), launched as the endpoint's owner on the version's cluster, charged to the
model's project."""

from __future__ import annotations

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from catalog.models import SessionApp
from catalog.models.apps import SERVING
from clusters.models import Partition
from common.choices import Kind
from endpoints.models import Endpoint
from jobs import lifecycle
from jobs.models import Job

SERVE_COMMANDS: dict[str, str] = {
    Endpoint.Kind.MLFLOW: "PORTAL_SERVE_MLFLOW_COMMAND",
    Endpoint.Kind.OPENAI: "PORTAL_SERVE_OPENAI_COMMAND",
}
READY_PATHS: dict[str, str] = {Endpoint.Kind.MLFLOW: "/ping", Endpoint.Kind.OPENAI: "/v1/models"}


def serve_command(kind: str) -> str:
    """The app's command: the centre's serving command (a setting) with the model's folder.
    A language model's server is started by the endpoint meter (on_node/endpoint_meter.py)
    on a port of its choosing, the meter listening on the app's: it times each streamed
    answer's first token and its tokens a second, which the proxy cannot see."""
    command = f"{getattr(settings, SERVE_COMMANDS[kind])} {{model}}"
    if kind == Endpoint.Kind.OPENAI:
        command = "python3 -m endpoint_meter --port {port} -- " + command.replace(
            "{port}", "@PORT@"
        )
    return command


def serving_app(kind: str) -> SessionApp:
    """The hidden session app that serves ``kind`` (never offered on the launch form):
    the centre's serving command (a setting) with the model's folder and a loopback port."""
    command = serve_command(kind)
    fields = [{"name": "model", "label": "Model", "type": "text", "max_length": 1000}]
    app, _ = SessionApp.objects.update_or_create(
        slug=f"endpoint-{kind}",
        defaults={
            "name": f"Model endpoint ({kind})",
            "description": "Serves a registered model version (endpoints/).",
            "command": command,
            "ready_path": READY_PATHS[kind],
            "ready_status": "200-299",
            "fields": fields,
            "builtin": SERVING,
            "enabled": False,
            "sort_order": 1000,
        },
    )
    return app


def start(endpoint: Endpoint) -> Job:
    """Its serving job, launched as the owner (charged to the model's project)."""
    version = endpoint.version
    source = version.job
    assert source is not None
    partition = Partition.objects.get(cluster_id=version.cluster_id, name=endpoint.partition)
    job = Job(
        owner=endpoint.owner,
        cluster_id=version.cluster_id,
        partition=partition,
        image=source.image,
        kind=Kind.APP,
        app=serving_app(endpoint.kind),
        app_values={"model": version.path},
        name=f"endpoint {endpoint.name}",
        cpus=endpoint.cpus,
        memory_gb=endpoint.memory_gb,
        gpus=endpoint.gpus,
        time_limit_minutes=min(endpoint.time_limit_minutes, partition.max_time_minutes or 10**6),
        project=endpoint.project,
    )
    job.full_clean()
    with transaction.atomic():
        lifecycle.launch_job(job)
        Endpoint.objects.filter(pk=endpoint.pk).update(
            job=job, state=Endpoint.State.STARTING, message="", updated_at=timezone.now()
        )
    endpoint.job, endpoint.state = job, Endpoint.State.STARTING
    return job
