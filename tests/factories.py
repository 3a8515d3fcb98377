"""The one way tests and benchmarks build users, clusters, partitions, images, cluster
accounts, GPU types, jobs, API clients, metric records and audit rows: a test says what
differs, not how a job is made. A scheduler adapter's tests need no row: ``spec``,
``ref`` and ``array_spec`` build the seam's plain values (schedulers/seam.py) without a database.

Every default is a keyword argument; a caller that needs other values passes them. Named
things (users, clusters, partitions, images) are made if missing, so a benchmark can run
twice on the same database; tests start from an empty one.
"""

from __future__ import annotations

import dataclasses
import shlex
from datetime import timedelta
from decimal import Decimal
from typing import Any

from django.contrib.auth import get_user_model

from catalog.models import ContainerImage, SessionApp
from clusters.models import Cluster, ClusterAccount, GpuType, Partition
from identity.audit.models import AuditEvent
from identity.tokens import ApiToken
from jobs.models import Job, JobAttempt
from schedulers.seam import ArraySpec, ImageSpec, JobKey, JobRef, JobSpec, PartitionSpec, Resources

#: A well-formed SSH host key (the cluster's address never answers in-process tests).
HOST_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOqmCr0ke0UTgwV9vPwNDnqf4mr8v07WgMJOuFbxZuBs"


def user(username: str, password: str | None = None, *, superuser: bool = False, email: str = ""):
    """The user ``username`` (``password`` unset: none can sign in with one); a
    superuser is staff too. ``email`` is set (on an existing user too) when given."""
    model = get_user_model()
    existing = model.objects.filter(username=username).first()
    if existing is not None:
        if email and existing.email != email:
            existing.email = email
            existing.save(update_fields=["email"])
        return existing
    make = model.objects.create_superuser if superuser else model.objects.create_user
    return make(username, email=email, password=password)


def staff_user(username: str, password: str, *permissions: str):
    """A staff account (not a superuser) holding only ``permissions``
    ("jobs.view_cluster", ...): what an admin site shows and lets it do."""
    from django.contrib.auth.models import Permission

    made = user(username, password)
    made.is_staff = True
    made.save(update_fields=["is_staff"])
    for name in permissions:
        app, codename = name.split(".")
        made.user_permissions.add(
            Permission.objects.get(content_type__app_label=app, codename=codename)
        )
    return made


def cluster(
    name: str = "testcluster",
    *,
    ssh_host: str = "login.example.org",
    host_key: str = HOST_KEY,
    save: bool = True,
    **fields,
) -> Cluster:
    """The cluster ``name`` (no partitions); ``save=False`` returns it unsaved (for
    full_clean)."""
    values = dict(ssh_host=ssh_host, host_key=host_key, **fields)
    if not save:
        return Cluster(name=name, **values)
    return Cluster.objects.get_or_create(name=name, defaults=values)[0]


def partition(cluster: Cluster, name: str, **fields) -> Partition:
    """Partition ``name`` of ``cluster``, with the model's limits unless ``fields`` say."""
    return Partition.objects.get_or_create(cluster=cluster, name=name, defaults=fields)[0]


def gpu_type(
    cluster: Cluster, name: str, capability: str, memory_gb: int, feature: str = ""
) -> GpuType:
    """How the admin describes GPU type ``name`` of ``cluster``."""
    return GpuType.objects.update_or_create(
        cluster=cluster,
        name=name,
        defaults={
            "compute_capability": Decimal(capability),
            "memory_gb": memory_gb,
            "feature": feature,
        },
    )[0]


def image(slug: str = "host", name: str = "Host", *, runtime: str = "none", **fields):
    """The catalog entry ``slug``: by default one that runs on the node itself."""
    values = dict(name=name, runtime=runtime, **fields)
    return ContainerImage.objects.get_or_create(slug=slug, defaults=values)[0]


_image = image  # job()'s parameter ``image`` hides the function

# An app a centre might add: a few lines of Python that answer every request with its
# arguments and the PORTAL_APP_* environment it was given, as JSON; on {port} (the
# loopback) or, with ``socket=True``, on {socket}.
ECHO_APP_CODE = (
    "import http.server, json, os, socket, socketserver, sys\n"
    "class H(http.server.BaseHTTPRequestHandler):\n"
    "    def do_GET(self):\n"
    "        env = {k: v for k, v in os.environ.items() if k.startswith('PORTAL_')}\n"
    "        body = json.dumps({'argv': sys.argv[1:], 'env': env, 'path': self.path}).encode()\n"
    "        self.send_response(200)\n"
    "        self.send_header('Content-Type', 'application/json')\n"
    "        self.send_header('Content-Length', str(len(body)))\n"
    "        self.end_headers()\n"
    "        self.wfile.write(body)\n"
    "class U(socketserver.UnixStreamServer):\n"
    "    def get_request(self):\n"
    "        conn, _ = super().get_request()\n"
    "        return conn, ('local', 0)\n"
    "where = sys.argv[1]\n"
    "if where.isdigit():\n"
    "    http.server.HTTPServer(('127.0.0.1', int(where)), H).serve_forever()\n"
    "else:\n"
    "    U(where, H).serve_forever()\n"
)


def session_app(
    slug: str = "echo",
    name: str = "Echo",
    *,
    image=None,
    fields: list | None = None,
    socket: bool = False,
    command: str | None = None,
    **values,
) -> SessionApp:
    """An app added in the admin (checked as the admin checks it): by default the echo
    app above with one text field, ``message``."""
    if command is None:
        where = "{socket}" if socket else "{port}"
        code = ECHO_APP_CODE.replace("{", "{{").replace("}", "}}")  # braces, not placeholders
        command = f"python3 -c {shlex.quote(code)} {where} {{message}} --folder={{folder}}"
    app = SessionApp(
        slug=slug,
        name=name,
        image=image or _image(),
        command=command,
        fields=fields
        if fields is not None
        else [{"name": "message", "label": "Message", "type": "text", "default": "hello"}],
        **values,
    )
    app.full_clean()
    app.save()
    return app


def account(
    cluster: Cluster,
    user,
    username: str,
    mapped_by: str = ClusterAccount.MappedBy.ADMIN,
    *,
    save: bool = True,
) -> ClusterAccount:
    """``user``'s login ``username`` on ``cluster`` (``user=None``: the service account),
    as an administrator made it unless ``mapped_by`` says otherwise ("": typed)."""
    row = ClusterAccount(cluster=cluster, user=user)
    row.map_to(username, mapped_by)
    if save:
        row.save()
    return row


def project(cluster: Cluster, name: str, members=(), *, role: str = "viewer", coordinators=()):
    """Project ``name`` of ``cluster`` as the sync would make it: ``members`` (users) in it,
    ``coordinators`` (users) its managers; its members' role ``role``."""
    from projects.models import Membership, Project

    row = Project.objects.create(cluster=cluster, name=name, default_role=role)
    for person in (*members, *coordinators):
        Membership.objects.get_or_create(
            project=row,
            user=person,
            defaults={"cluster_user": person.username, "coordinator": person in coordinators},
        )
    return row


def job(
    owner,
    cluster: Cluster,
    command: str = "echo hello",
    *,
    partition: str | Partition | None = "cpu",
    image: ContainerImage | None = None,
    kind: str = Job.Kind.BATCH,
    cpus: int = 1,
    memory_gb: int = 1,
    time_limit_minutes: int = 5,
    save: bool = True,
    **fields,
) -> Job:
    """A job of ``owner``'s: by default a small batch job (1 CPU, 1 GB, 5 minutes, what
    the dev cluster runs at once) on partition ``cpu`` with the image ``image()``.

    ``partition`` is a name, a Partition, or None for the cluster's default partition;
    ``fields`` set the rest (state, name, node, ...); ``save=False`` returns it unsaved.
    """
    if partition is None:
        partition = cluster.default_partition()
    elif isinstance(partition, str):
        partition = Partition.objects.get(cluster=cluster, name=partition)
    made = Job(
        owner=owner,
        cluster=cluster,
        partition=partition,
        image=image or _image(),
        kind=kind,
        command=command,
        cpus=cpus,
        memory_gb=memory_gb,
        time_limit_minutes=time_limit_minutes,
        **fields,
    )
    if save:
        made.save()
    return made


def training_job(owner, cluster: Cluster, state: str = "running", *, image=None) -> Job:
    """What the metrics, API and CLI tests read: ``python train.py`` in ``state`` on the
    cluster's default partition, the model's default resources (4 GB, 60 minutes) and the
    image ``host-batch`` unless ``image`` says."""
    return job(
        owner,
        cluster,
        "python train.py",
        partition=None,
        image=image or _image("host-batch"),
        memory_gb=4,
        time_limit_minutes=60,
        state=state,
    )


def submitted_job(owner, cluster: Cluster, command: str = "echo hello", **fields) -> Job:
    """job(), submitted to the cluster by the submit task's own code (no worker)."""
    from jobs import tasks

    made = job(owner, cluster, command, **fields)
    tasks.submit_job.apply(args=[made.pk])
    made.refresh_from_db()
    assert made.scheduler_job_id, made.message
    return made


def audit_event(
    username: str = "owner",
    action: str = "cancel",
    *,
    days_ago: float = 0,
    outcome: str = "ok",
    **fields,
) -> AuditEvent:
    """An audit row written ``days_ago`` days ago (the log's own writer is identity.audit)."""
    from django.utils import timezone

    return AuditEvent.objects.create(
        at=timezone.now() - timedelta(days=days_ago),
        username=username,
        action=action,
        outcome=outcome,
        **fields,
    )


def api_client(user, token_name: str = "t", scopes: str = "read,submit"):
    """A REST client that sends a new API token of ``user``'s (with ``scopes``)."""
    _, token = ApiToken.issue(user, token_name, scopes=scopes)
    return bearer_client(token)


def bearer_client(token: str):
    """A REST client that sends ``token`` (a personal one, or a provider's JWT)."""
    from rest_framework.test import APIClient

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


def identity(
    user,
    issuer: str,
    subject: str,
    *,
    confirmed_ago: float | None = 0.0,
    refresh_token: str = "",
    provider_username: str = "",
):
    """``user`` is ``subject`` at the OIDC provider ``issuer`` (signed in there before, as
    ``provider_username``), confirmed by it ``confirmed_ago`` seconds ago (None: never),
    with ``refresh_token``."""
    import datetime as dt

    from django.utils import timezone

    from common import crypto
    from identity.models import Identity

    row = Identity.objects.get_or_create(issuer=issuer, subject=subject, defaults={"user": user})[0]
    row.confirmed_at = (
        None if confirmed_ago is None else timezone.now() - dt.timedelta(seconds=confirmed_ago)
    )
    row.refresh_token_encrypted = crypto.encrypt(refresh_token) if refresh_token else ""
    row.provider_username = provider_username
    row.save(update_fields=["confirmed_at", "refresh_token_encrypted", "provider_username"])
    return row


def metric_records(n: int, start: int = 0, attempt: int = 0, rank: int = 0, **extra):
    """``n`` upload records from step ``start`` on, as portal_metrics sends them: a loss
    that falls and an accuracy that rises; ``extra`` adds to each."""
    return [
        {
            "seq": s,
            "attempt": attempt,
            "rank": rank,
            "step": s,
            "time": 1.7e9 + s,
            "metrics": {"loss": 1.0 / (s + 1), "acc": s / (n + start)},
            **extra,
        }
        for s in range(start, start + n)
    ]


def job_attempt(
    job: Job,
    number: int = 0,
    *,
    started_at,
    elapsed_seconds: int,
    gpus: int = 0,
    cpus: int = 1,
    state: str = "COMPLETED",
) -> JobAttempt:
    """One run of ``job`` as accounting would report it."""
    return JobAttempt.objects.create(
        job=job,
        number=number,
        scheduler_state=state,
        started_at=started_at,
        ended_at=started_at + timedelta(seconds=elapsed_seconds),
        elapsed_seconds=elapsed_seconds,
        gpus=gpus,
        cpus=cpus,
    )


def gpu_samples(job: Job, values: list[float], *, end: float, every: float = 60.0, gpu: int = 0):
    """GPU ``gpu``'s utilisation samples of ``job`` (as the metrics client's sampler logs
    them), the last at unix time ``end``, one every ``every`` seconds."""
    from metrics.models import MetricPoint, MetricSeries

    series, _ = MetricSeries.objects.get_or_create(
        job=job,
        key=f"sys/gpu{gpu}_util_percent@node1",
        rank=0,
        attempt=0,
        defaults={"system": True},
    )
    start = end - every * (len(values) - 1)
    MetricPoint.objects.bulk_create(
        MetricPoint(series=series, seq=i, step=i, value=v, time=start + i * every)
        for i, v in enumerate(values)
    )
    return series


def experiment_spec(image_slug: str, command: str, **overrides) -> dict:
    """A small experiment's spec on partition cpu: ``overrides`` replace top-level keys."""
    spec = {
        "name": "sweep",
        "launch": {
            "container": image_slug,
            "partition": "cpu",
            "command": command,
            "cpus": 1,
            "memory_gb": 1,
            "time_limit": 10,
        },
        "parameters": {
            "lr": {"type": "float", "low": 0.001, "high": 0.5, "log": True},
            "hidden": {"type": "int", "low": 8, "high": 64, "step": 8},
        },
        "method": "random",
        "objective": {"metric": "val_accuracy", "goal": "maximize"},
        "budget": {"max_trials": 4, "max_concurrent": 2},
        "seed": 1,
    }
    spec.update(overrides)
    return spec


def experiment(owner, image_slug: str = "host", command: str = "true", **overrides):
    """An experiment of ``owner``'s made through the service (its spec checked), on the
    cluster its launch names (the only one, in tests)."""
    from experiments import service

    return service.create(owner, experiment_spec(image_slug, command, **overrides))


def experiment_record(
    owner, cluster: Cluster, image: ContainerImage | None = None, account: str = "", **fields
):
    """An Experiment row as the service would store it (no spec checked, nothing started):
    two parameters, val_accuracy maximised, on partition cpu (charged to ``account``)."""
    from experiments.models import Experiment

    base = job(owner, cluster, "train", image=image, save=False, account=account)
    from experiments.controller import launch_fields

    values = dict(
        owner=owner,
        cluster=cluster,
        launch=launch_fields(base),
        parameters={
            "lr": {"type": "float", "low": 0.001, "high": 1.0, "log": True},
            "act": {"type": "choice", "values": ["relu", "tanh"]},
        },
        metric="val_accuracy",
        **fields,
    )
    return Experiment.objects.create(**values)


def compared_run(
    owner,
    cluster: Cluster,
    *,
    tags: tuple[str, ...] = (),
    params: dict | None = None,
    curves: dict[str, list[float]] | None = None,
    command: str = "python train.py",
    **fields,
) -> Job:
    """A finished training run for comparisons: ``tags``, ``params`` and, per metric of
    ``curves``, one value per step from 0 (ingested, so its summary is kept)."""
    from jobs.models import JobTag
    from metrics import ingest

    made = job(
        owner,
        cluster,
        command,
        partition=None,
        image=fields.pop("image", None) or _image("host-batch"),
        memory_gb=4,
        time_limit_minutes=60,
        state=fields.pop("state", Job.State.COMPLETED),
        params=params or {},
        **fields,
    )
    JobTag.objects.bulk_create(JobTag(job=made, name=t) for t in tags)
    steps = max((len(v) for v in (curves or {}).values()), default=0)
    records = [
        ingest.Record(
            s, 0, 0, s, 1.7e9 + s, {k: v[s] for k, v in (curves or {}).items() if s < len(v)}
        )
        for s in range(steps)
    ]
    ingest.ingest(made, records)
    return made


def notification(recipient, event: str = "job_failed", text: str = "Something happened.", **fields):
    """A notification of ``recipient``'s (in the portal, not emailed, unless ``fields`` say)."""
    from notifications.models import Notification

    values = {"url": "/", **fields}
    return Notification.objects.create(recipient=recipient, event=event, text=text, **values)


# -- the seam's plain values, no database ---------------------------------------------------

_RESOURCE_FIELDS = {f.name for f in dataclasses.fields(Resources)}
_PARTITION_FIELDS = {f.name for f in dataclasses.fields(PartitionSpec)} - {"name"}
_IMAGE_FIELDS = {"runtime", "location", "modules"}


def _parts(overrides: dict[str, Any]) -> dict[str, Any]:
    """``overrides`` with the fields of a job's parts (Resources, PartitionSpec, ImageSpec)
    gathered into those parts: ``gpus=2`` goes into its resources, ``mem_per_gpu=True`` into
    its partition, ``runtime="podman"`` into its image; ``partition="gpu"`` names it."""
    resources = {k: overrides.pop(k) for k in list(overrides) if k in _RESOURCE_FIELDS}
    partition = {k: overrides.pop(k) for k in list(overrides) if k in _PARTITION_FIELDS}
    image = {k: overrides.pop(k) for k in list(overrides) if k in _IMAGE_FIELDS}
    if "modules" in image:
        image["modules"] = tuple(image["modules"])
    base = Resources(nodes=1, tasks_per_node=1, cpus=1, memory_gb=1)
    overrides["resources"] = dataclasses.replace(overrides.get("resources", base), **resources)
    named = overrides.get("partition", "cpu")
    named = PartitionSpec(named) if isinstance(named, str) else named
    overrides["partition"] = dataclasses.replace(named, **partition)
    overrides["image"] = dataclasses.replace(overrides.get("image", ImageSpec("none")), **image)
    return overrides


def spec(**overrides: Any) -> JobSpec:
    """A job as an adapter renders it (schedulers.seam.JobSpec), no database: by default what
    job() makes, a small batch job (1 CPU, 1 GB, 5 minutes) on partition ``cpu`` on the
    node's own environment. ``overrides`` set any field of the job or of its parts (see
    _parts: ``gpus=2, gpu_type="a100", runtime="apptainer", location="/img/x.sif"``)."""
    values = _parts(overrides)
    job_id = values.setdefault("id", 1)
    values.setdefault("name", f"portal-{job_id}-abc")
    values.setdefault("comment", f"portal-job-{job_id}-abc")
    values.setdefault("kind", Job.Kind.BATCH)
    values.setdefault("command", "echo hello")
    values.setdefault("account", "")
    values.setdefault("time_limit_minutes", 5)
    return JobSpec(**values)


def ref(scheduler_id: str = "7", name: str = "portal-1-abc", **overrides: Any) -> JobRef:
    """A submitted job as a status or accounting read takes it (schedulers.seam.JobRef), no
    database: job ``name`` under ``scheduler_id``, pending, asking what spec() asks;
    ``overrides`` as for spec()."""
    values = _parts(overrides)
    values.pop("image")
    values.setdefault("key", JobKey(scheduler_id, name))
    values.setdefault("comment", "")
    values.setdefault("state", Job.State.PENDING)
    return JobRef(**values)


def array_spec(array_id: int = 3, throttle: int = 0) -> ArraySpec:
    """A job array as its script is rendered from (schedulers.seam.ArraySpec), no database."""
    return ArraySpec(
        id=array_id,
        name=f"portal-a{array_id}-abc",
        comment=f"portal-array-{array_id}-abc",
        throttle=throttle,
    )
