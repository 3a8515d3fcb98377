"""What the API shows of the catalog, clusters and jobs. Validation of new jobs is the
launch form's (jobs.launch.LaunchForm), so browser and API accept exactly the same."""

from __future__ import annotations

from decimal import Decimal

from django.urls import reverse
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from jobs.broadcast import session_payload
from jobs.launch import LaunchForm, image_layout, launch_initial
from jobs.models import Cluster, ContainerImage, GpuType, Job, JobEvent, Partition, Tag
from jobs.text import quoted


class ContainerSerializer(serializers.ModelSerializer):
    tags: serializers.SlugRelatedField[Tag] = serializers.SlugRelatedField(
        many=True, read_only=True, slug_field="name"
    )
    kinds = serializers.ListField(child=serializers.CharField(), read_only=True)

    class Meta:
        model = ContainerImage
        fields = [
            "slug",
            "name",
            "version",
            "description",
            "tags",
            "runtime",
            "supports_gpu",
            "kinds",
            "default_command",
            "default_launcher",
            "default_nodes",
            "default_tasks_per_node",
            "deprecated",
            "deprecation_note",
        ]


class GpuTypeSerializer(serializers.ModelSerializer):
    class Meta:
        model = GpuType
        fields = ["name", "model", "compute_capability", "memory_gb"]


class PartitionSerializer(serializers.ModelSerializer):
    gpu_types = serializers.ListField(source="gpu_type_list", child=serializers.CharField())
    gpus = serializers.SerializerMethodField(
        help_text="The described GPU types offered here: capability and memory per GPU."
    )

    class Meta:
        model = Partition
        fields = [
            "name",
            "is_default",
            "gpu_types",
            "gpus",
            *Partition.LIMIT_FIELDS,
            *Partition.NODE_FIELDS,
            "default_time_minutes",
            "time_class",
            "mem_per_gpu",
        ]

    @extend_schema_field(GpuTypeSerializer(many=True))
    def get_gpus(self, partition) -> list:
        offered = [
            t for t in partition.cluster.gpu_types.all() if t.name in partition.gpu_type_list
        ]
        return list(GpuTypeSerializer(offered, many=True).data)


class ClusterSerializer(serializers.ModelSerializer):
    partitions = PartitionSerializer(many=True, read_only=True)
    scratch = serializers.SerializerMethodField()

    class Meta:
        model = Cluster
        fields = ["name", "description", "scheduler", "partitions", "scratch"]

    def get_scratch(self, cluster) -> bool:
        return bool(cluster.scratch_root)


class JobSerializer(serializers.ModelSerializer):
    container = serializers.CharField(source="image.slug")
    cluster = serializers.CharField(source="cluster.name")
    partition = serializers.CharField(source="partition.name")
    time_limit = serializers.IntegerField(source="time_limit_minutes")
    workdir = serializers.CharField(source="work_dir_kind")
    owner = serializers.CharField(source="owner.get_username")
    state_label = serializers.CharField(source="get_state_display")
    # The state vocabulary stays on the server: clients ask these, not a list of states.
    is_active = serializers.BooleanField(read_only=True)
    is_final = serializers.BooleanField(read_only=True)
    has_session = serializers.BooleanField(
        read_only=True, help_text="Opens through a session link (a notebook, TensorBoard)."
    )
    session_url = serializers.SerializerMethodField()
    url = serializers.SerializerMethodField()
    node_list = serializers.ListField(
        child=serializers.CharField(),
        read_only=True,
        help_text="The nodes the job runs (or ran) on, one name each; `node` is the "
        "scheduler's compressed list.",
    )
    shape = serializers.CharField(read_only=True, help_text="'2 nodes × 2 tasks'.")
    experiment = serializers.IntegerField(
        source="trial.experiment_id",
        read_only=True,
        allow_null=True,
        help_text="The experiment whose trial this job runs (one job per fold), or null.",
    )
    trial = serializers.IntegerField(
        source="trial.number", read_only=True, allow_null=True, help_text="Its trial's number."
    )

    class Meta:
        model = Job
        fields = [
            "id",
            "url",
            "name",
            "experiment",
            "trial",
            "fold",
            "owner",
            "kind",
            "container",
            "cluster",
            "partition",
            "command",
            "gpus",
            "gpu_type",
            "min_gpu_capability",
            "min_gpu_memory_gb",
            "gpu_constraint",
            "nodes",
            "tasks_per_node",
            "launcher",
            "shape",
            "cpus",
            "memory_gb",
            "time_limit",
            "resumable",
            "max_attempts",
            "checkpoint_warning_seconds",
            "attempt",
            "account",
            "workdir",
            "notebook_dir",
            "state",
            "state_label",
            "is_active",
            "is_final",
            "has_session",
            "pending_reason",
            "queue_position",
            "estimated_start",
            "scheduler_job_id",
            "node",
            "node_list",
            "exit_code",
            "message",
            "created_at",
            "submitted_at",
            "started_at",
            "ended_at",
            "session_url",
        ]
        read_only_fields = fields

    def get_session_url(self, job) -> str | None:
        """Where to open the running notebook (through the portal, which checks the user):
        the same link, under the same conditions, as the job page's Open button."""
        path = session_payload(job)["session_open_url"]
        request = self.context.get("request")
        return request.build_absolute_uri(path) if request and path else path

    def get_url(self, job) -> str:
        request = self.context.get("request")
        path = reverse("job-detail", args=[job.pk])
        return request.build_absolute_uri(path) if request else path


class JobEventSerializer(serializers.ModelSerializer):
    label = serializers.CharField(source="get_to_state_display")  # type: ignore[assignment]

    class Meta:
        model = JobEvent
        fields = ["id", "at", "from_state", "to_state", "label", "message"]
        read_only_fields = fields


class JobDetailSerializer(JobSerializer):
    """One job with its state changes, oldest first (a follower misses none of them,
    however short a state was)."""

    events = JobEventSerializer(many=True, read_only=True)

    class Meta(JobSerializer.Meta):
        fields = [*JobSerializer.Meta.fields, "stderr_tail", "events"]
        read_only_fields = fields


class JobCreateSerializer(serializers.Serializer):
    """The request for a new job; defaults are the catalog's, as on the launch page."""

    container = serializers.CharField(required=False, help_text="Catalog slug.")
    cluster = serializers.CharField(required=False)
    partition = serializers.CharField(required=False)
    kind = serializers.ChoiceField(choices=Job.Kind.choices, default=Job.Kind.BATCH)
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
        "itself (README, 'Long runs').",
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
    account = serializers.CharField(required=False, allow_blank=True)
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
    name = serializers.CharField(required=False, allow_blank=True, max_length=100)

    # API name -> launch form field
    FORM_FIELDS = {
        "container": "image",
        "time_limit": "time_limit_minutes",
        "workdir": "work_dir_kind",
    }
    FORM_TO_API = {v: k for k, v in FORM_FIELDS.items()}

    def validate(self, attrs):
        user = self.context["request"].user
        data = {k: v for k, v in launch_initial(user).items() if v is not None}
        pid = data.get("partition")
        partition = Partition.objects.filter(pk=pid).first() if pid is not None else None
        for key, value in attrs.items():
            data[self.FORM_FIELDS.get(key, key)] = value
        image = ContainerImage.objects.offered().filter(slug=data.get("image")).first()
        if "partition" in attrs or "cluster" in attrs:
            cluster = Cluster.objects.filter(name=data.get("cluster"), enabled=True).first()
            if "partition" in attrs:
                wanted = attrs["partition"]
                partition = cluster.partitions.filter(name=wanted).first() if cluster else None
                if partition is None:
                    raise serializers.ValidationError(
                        {
                            "partition": [
                                f"Cluster {quoted(data.get('cluster'), 40)} has no partition "
                                f"{quoted(wanted, 40)}."
                            ]
                        }
                    )
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
                if self.FORM_TO_API.get(key, key) not in attrs:
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
            for field, messages in form.errors.items():
                key = (
                    "non_field_errors" if field == "__all__" else self.FORM_TO_API.get(field, field)
                )
                errors[key] = [str(m) for m in messages]
            raise serializers.ValidationError(errors)
        attrs["form"] = form
        return attrs
