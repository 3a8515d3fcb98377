"""A launch request as the API, the CLI and an experiment's spec send it: its fields (API
names), the defaults it leaves to the catalog, and its checks, which are the launch
form's (jobs.launch.form.LaunchForm), so every way in accepts exactly the same.

``validate_request(user, data)`` is the one entry: the API's serializer
(jobs.api.serializers.JobCreateSerializer) is ``LaunchRequest``, and experiments call
the function with their spec's ``launch`` mapping."""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from rest_framework import serializers

from catalog.models import ContainerImage
from clusters.models import Cluster, Partition
from common.choices import LAUNCHED_KIND_CHOICES
from common.text import quoted
from jobs.launch import staging
from jobs.launch.form import TRIAL_FIELDS, LaunchForm, image_layout, launch_initial
from jobs.models import Job
from jobs.models.annotations import MAX_PARAMS, MAX_TAGS_PER_JOB

# API name -> launch form (model) field; the other fields have the same name in both.
API_FIELDS = {
    "container": "image",
    "time_limit": "time_limit_minutes",
    "workdir": "work_dir_kind",
}
API_NAMES = {v: k for k, v in API_FIELDS.items()}


@dataclass
class Checked:
    """A request checked: its valid launch form, or its errors by API field name
    ("non_field_errors" for the whole request)."""

    form: LaunchForm | None = None
    errors: dict[str, list[str]] = field(default_factory=dict)

    @property
    def job(self) -> Job:
        """The job the request asks for (unsaved)."""
        assert self.form is not None, self.errors
        return self.form.instance


def as_request(job: Job) -> dict:
    """What an experiment's launch fixes of ``job`` (TRIAL_FIELDS), as a request (API
    names; relations by slug and name). The GPU constraint it resolved to is no request
    field: its GPU type stands for it."""
    request = {
        "container": job.image.slug,
        "cluster": job.cluster.name,
        "partition": job.partition.name,
    }
    for name in TRIAL_FIELDS:
        if not name.endswith("_id") and name not in ("gpu_constraint", "staging"):
            request[API_NAMES.get(name, name)] = getattr(job, name)
    return request | staging.as_request(job)


def validate_request(user: Any, data: dict) -> Checked:
    """Check a launch request (API names, as sent) for ``user``."""
    incoming = LaunchRequest(data=data, context={"user": user})
    if incoming.is_valid():
        return Checked(form=incoming.validated_data["form"])
    return Checked(errors={k: [str(m) for m in v] for k, v in incoming.errors.items()})


class LaunchRequest(serializers.Serializer):
    """The request for a new job; defaults are the catalog's, as on the launch page."""

    container = serializers.CharField(required=False, help_text="Catalog slug.")
    cluster = serializers.CharField(
        required=False,
        help_text="Cluster name. Omitted: the default cluster an administrator marked; with "
        "none marked, the cluster of your most recent job, else the first by name (each "
        "among the enabled clusters you have an account on), as on the launch page.",
    )
    partition = serializers.CharField(required=False)
    kind = serializers.ChoiceField(choices=LAUNCHED_KIND_CHOICES, default=Job.Kind.BATCH)
    command = serializers.CharField(
        required=False, allow_blank=True, help_text="Batch: omitted, the image's own command."
    )
    gpus = serializers.IntegerField(
        required=False, min_value=0, max_value=64, help_text="GPUs on each node."
    )
    gpu_type = serializers.CharField(required=False, allow_blank=True)
    min_gpu_capability = serializers.DecimalField(
        required=False,
        allow_null=True,
        max_digits=4,
        decimal_places=1,
        min_value=Decimal("1.0"),
        help_text="Any GPU with at least this compute capability (e.g. 8.0).",
    )
    min_gpu_memory_gb = serializers.IntegerField(
        required=False,
        allow_null=True,
        min_value=1,
        max_value=10_000,
        help_text="Any GPU with at least this much memory (GB per GPU).",
    )
    nodes = serializers.IntegerField(required=False, min_value=1, max_value=10_000)
    tasks_per_node = serializers.IntegerField(
        required=False,
        min_value=1,
        max_value=1_000,
        help_text="Processes (ranks) per node: one per GPU for data-parallel training.",
    )
    launcher = serializers.ChoiceField(
        choices=Job.Launcher.choices,
        required=False,
        help_text="none: the command once, on the first node; torchrun: one torchrun per "
        "node; mpi: mpirun, one rank per task. Omitted: the image's own.",
    )
    cpus = serializers.IntegerField(
        required=False, min_value=1, max_value=100_000, help_text="CPUs per task."
    )
    memory_gb = serializers.IntegerField(required=False, min_value=1, max_value=1_000_000)
    time_limit = serializers.IntegerField(
        required=False, min_value=1, max_value=525_600, help_text="Minutes."
    )
    resumable = serializers.BooleanField(
        required=False,
        help_text="Batch: warned before the time limit, the job checkpoints and requeues "
        "itself (the script checks portal_metrics.should_checkpoint(), saves to "
        "$PORTAL_CHECKPOINT_DIR and exits; the next attempt resumes from resume_step()). "
        "Slurm clusters only.",
    )
    max_attempts = serializers.IntegerField(
        required=False,
        min_value=1,
        max_value=50,
        help_text="Resumable: runs of at most time_limit each, one after another.",
    )
    checkpoint_warning_seconds = serializers.IntegerField(
        required=False,
        min_value=30,
        max_value=3600,
        help_text="Resumable: how long before the time limit the job is asked to checkpoint.",
    )
    account = serializers.CharField(
        required=False,
        allow_blank=True,
        help_text="Charged for the job: the Slurm account, or the HTCondor accounting group. "
        "Omitted: the cluster's default.",
    )
    workdir = serializers.ChoiceField(choices=Job.WorkDir.choices, required=False)
    notebook_dir = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=255,
        help_text="Notebook: the folder it opens in, inside the home or scratch directory "
        "(made if missing); omitted, the folder of the user's last notebook. TensorBoard: "
        "the folder whose runs it shows (a job's own work directory, "
        "`.portal/jobs/<id>-<uid>`, is allowed too).",
    )
    app = serializers.SlugField(
        required=False,
        max_length=40,
        help_text="kind app: the slug of the app to start (GET /api/v1/apps/ lists them).",
    )
    app_values = serializers.DictField(
        required=False,
        help_text="kind app: a value for each of the app's fields (by name); each is checked "
        "against its field and reaches the app as one literal argument and as "
        "PORTAL_APP_<NAME>.",
    )
    name = serializers.CharField(required=False, allow_blank=True, max_length=100)
    tags = serializers.ListField(
        child=serializers.CharField(max_length=64),
        required=False,
        max_length=MAX_TAGS_PER_JOB,
        help_text="Words to find and group runs by: letters, digits and ._:=+- (at most 64 "
        f"characters each, {MAX_TAGS_PER_JOB} tags).",
    )
    params = serializers.DictField(
        required=False,
        help_text=f"The run's parameters (name: number, text or boolean; at most {MAX_PARAMS}): "
        "the job reads them as PORTAL_PARAM_<NAME> and in params.json.",
    )
    keep_diff = serializers.BooleanField(
        required=False,
        help_text="Keep the `git diff` of the job's folder's checkout beside the job (its "
        "commit and whether it was modified are recorded either way).",
    )
    stage_in = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=staging.MAX_FOLDER_CHARS,
        help_text=staging.STAGE_IN_HELP,
    )
    stage_out = serializers.ListField(
        child=serializers.CharField(max_length=staging.MAX_OUTPUT_CHARS),
        required=False,
        max_length=staging.MAX_OUTPUTS,
        help_text=staging.STAGE_OUT_HELP,
    )
    stage_out_to = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=staging.MAX_FOLDER_CHARS,
        help_text=staging.STAGE_OUT_TO_HELP,
    )

    FORM_FIELDS = API_FIELDS  # as before: API name -> launch form field
    FORM_TO_API = API_NAMES

    def validate(self, attrs):
        user = self.context["user"] if "user" in self.context else self.context["request"].user
        checked = check(user, attrs)
        if checked.errors:
            raise serializers.ValidationError(checked.errors)
        attrs["form"] = checked.form
        return attrs


def _partition_error(cluster: Any, wanted: Any) -> dict[str, list[str]]:
    return {"partition": [f"Cluster {quoted(cluster, 40)} has no partition {quoted(wanted, 40)}."]}


def check(user: Any, attrs: dict) -> Checked:
    """The launch form for ``attrs`` (a request's fields, API names, of the right types)
    with what it leaves out filled in as the launch page does; or its errors."""
    data = {k: v for k, v in launch_initial(user).items() if v is not None}
    pid = data.get("partition")
    partition = Partition.objects.filter(pk=pid).first() if pid is not None else None
    for key, value in attrs.items():
        data[API_FIELDS.get(key, key)] = value
    image = ContainerImage.objects.offered().filter(slug=data.get("image")).first()
    if "partition" in attrs or "cluster" in attrs:
        cluster = Cluster.objects.filter(name=data.get("cluster"), enabled=True).first()
        if "partition" in attrs:
            wanted = attrs["partition"]
            partition = cluster.partitions.filter(name=wanted).first() if cluster else None
            if partition is None:
                return Checked(errors=_partition_error(data.get("cluster"), wanted))
        else:
            partition = cluster.default_partition() if cluster else None
        data["partition"] = partition.pk if partition else None
    if partition is not None:
        # Resources the request leaves out: the partition's defaults for this image,
        # exactly as the launch page fills them in.
        defaults = partition.job_defaults(image)
        if data.get("kind") == Job.Kind.TENSORBOARD:
            defaults["gpus"], defaults["gpu_type"] = 0, ""  # it needs none
        asks_gpu = (
            attrs.get("gpu_type")
            or attrs.get("min_gpu_capability")
            or attrs.get("min_gpu_memory_gb")
        )
        if asks_gpu and "gpus" not in attrs:
            defaults["gpus"] = defaults["gpus"] or 1  # a GPU type or need asks for a GPU
        for key, value in defaults.items():
            if API_NAMES.get(key, key) not in attrs:
                data[key] = value
    # A batch job starts from the image's launcher and layout, as on the launch page,
    # unless the request says any of it (then the rest is one process on one node).
    given = any(key in attrs for key in LaunchForm.LAYOUT_DEFAULTS)
    batch = data.get("kind") == Job.Kind.BATCH and not given
    layout = image_layout(image if batch else None, partition)
    data.update({key: value for key, value in layout.items() if key not in attrs})
    if data.get("kind") == Job.Kind.BATCH and "command" not in attrs:
        # As on the launch page, which starts from the image's own command.
        if image is not None and image.default_command:
            data["command"] = image.default_command
    form = LaunchForm(data=data, user=user)
    if not form.is_valid():
        errors: dict[str, list[str]] = {}
        for name, messages in form.errors.items():
            key = "non_field_errors" if name == "__all__" else API_NAMES.get(name, name)
            errors[key] = [str(m) for m in messages]
        return Checked(errors=errors)
    return Checked(form=form)
