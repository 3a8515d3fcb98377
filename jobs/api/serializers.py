"""What the API shows of the catalog, clusters and jobs. A new job's request, its
defaults and checks are jobs.launch's (jobs/launch/request.py), shared with the launch
page and experiments, so all accept exactly the same."""

from __future__ import annotations

from django.urls import reverse
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from catalog.models import ContainerImage, SessionApp, Tag
from clusters.models import Cluster, GpuType, Partition
from jobs import display
from jobs.broadcast import session_payload
from jobs.launch.request import LaunchRequest
from jobs.models import Job, JobEvent
from jobs.models.annotations import MAX_NOTE_CHARS, MAX_TAGS_PER_JOB


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


class SessionAppSerializer(serializers.ModelSerializer):
    container = serializers.CharField(source="image.slug", read_only=True)
    form_fields = serializers.SerializerMethodField(
        method_name="field_list",
        help_text="Its form fields: name, label, type (text, integer, number, choice, "
        "boolean), and default, help, min, max, choices, max_length where set; a job "
        "sends their values as app_values.",
    )

    class Meta:
        model = SessionApp
        fields = ["slug", "name", "description", "container", "form_fields", "shareable_read_only"]

    def field_list(self, app: SessionApp) -> list[dict]:
        return [spec.as_dict() for spec in app.field_specs()]


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
        read_only=True,
        help_text="Opens through a session link (a notebook, TensorBoard, VS Code, an app).",
    )
    app = serializers.CharField(
        source="app.slug",
        read_only=True,
        allow_null=True,
        help_text="kind app: the app it starts (GET /api/v1/apps/).",
    )
    app_values = serializers.DictField(
        read_only=True, allow_null=True, help_text="kind app: its fields' values, as checked."
    )
    session_url = serializers.SerializerMethodField()
    url = serializers.SerializerMethodField()
    node_list = serializers.ListField(
        child=serializers.CharField(),
        read_only=True,
        help_text="The nodes the job runs (or ran) on, one name each; `node` is the "
        "scheduler's compressed list.",
    )
    shape = serializers.SerializerMethodField(help_text="'2 nodes × 2 tasks'.")
    experiment = serializers.IntegerField(
        source="trial.experiment_id",
        read_only=True,
        allow_null=True,
        help_text="The experiment whose trial this job runs (one job per fold), or null.",
    )
    trial = serializers.IntegerField(
        source="trial.number", read_only=True, allow_null=True, help_text="Its trial's number."
    )
    tags = serializers.ListField(source="tag_names", child=serializers.CharField(), read_only=True)
    project = serializers.CharField(
        source="project.name",
        read_only=True,
        allow_null=True,
        help_text="The project (the scheduler's account) it is charged to, when known: its "
        "members see it as their role allows unless it is private.",
    )
    private = serializers.BooleanField(
        read_only=True, help_text="Only its owner and staff see it, whatever the project says."
    )
    params = serializers.DictField(read_only=True, help_text="The run's parameters.")
    stage_in = serializers.CharField(
        read_only=True, help_text="The folder copied to the node before the command, or ''."
    )
    stage_out = serializers.ListField(
        child=serializers.CharField(),
        read_only=True,
        help_text="What is copied back after the command (paths or globs).",
    )
    stage_out_to = serializers.CharField(
        read_only=True, help_text="Where the outputs go; '': the job's work directory."
    )
    reproduce = serializers.DictField(
        read_only=True,
        help_text="What reproduces the run, read on the cluster at submit: `image` (runtime, "
        "location and `sha256` of an Apptainer file, `digest` of a Podman reference, or "
        "`identity: host`), `git` (folder, commit, branch, modified, changed and untracked "
        "files, diff_bytes) when the folder is a checkout.",
    )

    class Meta:
        model = Job
        fields = [
            "id",
            "url",
            "name",
            "tags",
            "notes",
            "params",
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
            "project",
            "private",
            "workdir",
            "notebook_dir",
            "app",
            "app_values",
            "stage_in",
            "stage_out",
            "stage_out_to",
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
            "keep_diff",
            "reproduce",
        ]
        read_only_fields = fields

    def get_session_url(self, job) -> str | None:
        """Where to open the running notebook (through the portal, which checks the user):
        the same link, under the same conditions, as the job page's Open button."""
        path = session_payload(job)["session_open_url"]
        request = self.context.get("request")
        return request.build_absolute_uri(path) if request and path else path

    def get_shape(self, job) -> str:
        return display.shape(job)

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


class JobAnnotationsSerializer(serializers.Serializer):
    """What a job's owner changes of it afterwards: its note, and its tags (all of them, or
    some added and removed)."""

    notes = serializers.CharField(
        required=False, allow_blank=True, trim_whitespace=False, max_length=MAX_NOTE_CHARS
    )
    tags = serializers.ListField(
        child=serializers.CharField(max_length=64), required=False, max_length=MAX_TAGS_PER_JOB
    )
    add_tags = serializers.ListField(
        child=serializers.CharField(max_length=64), required=False, max_length=MAX_TAGS_PER_JOB
    )
    remove_tags = serializers.ListField(
        child=serializers.CharField(max_length=64), required=False, max_length=MAX_TAGS_PER_JOB
    )

    def validate(self, attrs):
        if not attrs:
            raise serializers.ValidationError("Send notes, tags, add_tags or remove_tags.")
        if "tags" in attrs and ("add_tags" in attrs or "remove_tags" in attrs):
            raise serializers.ValidationError("Send tags, or add_tags/remove_tags, not both.")
        return attrs


class JobCreateSerializer(LaunchRequest):
    """The request for a new job; defaults are the catalog's, as on the launch page."""
