"""The launch form (validated field by field by Job.clean() against the partition and
image), the fields a launch sets, its defaults, and the limits the page shows before
submitting. A request from the API or an experiment's spec goes through the same form
(jobs.launch.request)."""

from typing import Any

from django import forms

from catalog.models import ContainerImage, SessionApp
from clusters.models import Cluster, ClusterAccount, Partition
from common.choices import FOLDER_SESSION_KINDS
from jobs.launch import staging
from jobs.models import Job
from jobs.models import annotations as tagging
from schedulers import registry as schedulers

# What a launch request sets of a job, in the launch form's order (model field names; the
# API calls three of them otherwise: jobs.launch.request.API_NAMES).
LAUNCH_FIELDS = [
    "image",
    "kind",
    "cluster",
    "partition",
    "gpu_type",
    "min_gpu_capability",
    "min_gpu_memory_gb",
    "gpus",
    "nodes",
    "tasks_per_node",
    "launcher",
    "cpus",
    "memory_gb",
    "time_limit_minutes",
    "resumable",
    "max_attempts",
    "checkpoint_warning_seconds",
    "account",
    "work_dir_kind",
    "notebook_dir",
    "app",
    "app_values",
    "command",
    "name",
    "params",
    "keep_diff",
    # Stage-in and stage-out (jobs/launch/staging.py), stored together as Job.staging.
    *staging.FIELDS,
]

# Job fields an experiment's launch fixes for every trial (relations by id).
TRIAL_FIELDS = (
    "cluster_id",
    "partition_id",
    "image_id",
    "command",
    "gpus",
    "gpu_type",
    # A request by compute capability and memory, resolved once: "v100|a100" (or a type).
    "gpu_constraint",
    "nodes",
    "tasks_per_node",
    "launcher",
    "cpus",
    "memory_gb",
    "time_limit_minutes",
    "account",
    "work_dir_kind",
    "staging",
)


def trial_fields(job: Job) -> dict:
    """What of a validated (unsaved) job every trial's jobs copy."""
    return {name: getattr(job, name) for name in TRIAL_FIELDS}


class ParamsField(forms.Field):
    """A run's parameters: ``name=value`` lines on the page, an object from the API."""

    widget = forms.Textarea(attrs={"rows": 2, "placeholder": "lr=0.01\nseed=3"})

    def prepare_value(self, value):
        return tagging.params_text(value) if isinstance(value, dict) else value

    def to_python(self, value):
        try:
            if isinstance(value, dict):
                return tagging.clean_params(value)
            return tagging.parse_params_text(value or "")
        except tagging.BadAnnotation as exc:
            raise forms.ValidationError(str(exc)) from None


class TagsField(forms.Field):
    """Tags: words separated by spaces on the page, a list from the API."""

    def prepare_value(self, value):
        return " ".join(value) if isinstance(value, (list, tuple)) else value

    def to_python(self, value):
        try:
            return tagging.clean_tags(value or [])
        except tagging.BadAnnotation as exc:
            raise forms.ValidationError(str(exc)) from None


class ClusterChoiceField(forms.ModelChoiceField):
    def label_from_instance(self, obj) -> str:
        """ "condorpool (HTCondor)": which scheduler runs the job is part of the choice."""
        return f"{obj.name} ({obj.get_scheduler_display()})"


class LaunchForm(forms.ModelForm):
    """The launch form. Limits are checked by Job.clean(), field by field."""

    image = forms.ModelChoiceField(
        queryset=ContainerImage.objects.offered(),
        to_field_name="slug",
        widget=forms.RadioSelect,
        empty_label=None,
        error_messages={
            "invalid_choice": "Choose an image from the catalog (a disabled image is no longer "
            "offered)."
        },
    )
    cluster = ClusterChoiceField(
        queryset=Cluster.objects.filter(enabled=True),
        to_field_name="name",
        empty_label=None,
        error_messages={
            "invalid_choice": "Choose a cluster from the list (a disabled cluster takes no "
            "new jobs)."
        },
    )
    partition = forms.ModelChoiceField(
        queryset=Partition.objects.filter(cluster__enabled=True),
        empty_label=None,
        error_messages={"invalid_choice": "Choose a partition of an enabled cluster."},
    )
    app = forms.ModelChoiceField(
        queryset=SessionApp.objects.offered(),
        to_field_name="slug",
        required=False,
        empty_label=None,
        error_messages={"invalid_choice": "Choose an app the catalog offers."},
    )
    params = ParamsField(
        required=False,
        label="Parameters",
        help_text="name=value, one a line: the job reads them as PORTAL_PARAM_<NAME> and in "
        "params.json; comparisons show and group by them.",
    )
    tags = TagsField(
        required=False,
        label="Tags",
        help_text="Words to find and group runs by (e.g. resnet seed=3).",
    )
    # Stage-in and stage-out: checked and placed in the person's folders by
    # jobs/launch/staging.py (clean() below), which sets Job.staging.
    stage_in = forms.CharField(
        required=False,
        max_length=staging.MAX_FOLDER_CHARS,
        label="Stage in (folder)",
        help_text=staging.STAGE_IN_HELP,
        widget=forms.TextInput(attrs={"placeholder": "e.g. datasets/mnist"}),
    )
    stage_out = staging.OutputsField(
        required=False, label="Copy back", help_text=staging.STAGE_OUT_HELP
    )
    stage_out_to = forms.CharField(
        required=False,
        max_length=staging.MAX_FOLDER_CHARS,
        label="Copy back to",
        help_text=staging.STAGE_OUT_TO_HELP,
        widget=forms.TextInput(attrs={"placeholder": "the job's work directory"}),
    )

    class Meta:
        model = Job
        fields = LAUNCH_FIELDS
        labels = {
            "gpus": "GPUs per node",
            "gpu_type": "GPU type",
            "min_gpu_capability": "Min. compute capability",
            "min_gpu_memory_gb": "Min. GPU memory (GB)",
            "nodes": "Nodes",
            "tasks_per_node": "Tasks per node",
            "cpus": "CPUs per task",
            "memory_gb": "Memory (GB)",
            "time_limit_minutes": "Walltime (minutes)",
            "resumable": "Checkpoint and requeue",
            "max_attempts": "Attempts",
            "checkpoint_warning_seconds": "Warning before the limit (s)",
            "work_dir_kind": "Work directory",
            "notebook_dir": "Folder",
            "name": "Name (optional)",
            "app": "App",
        }
        widgets = {
            "kind": forms.RadioSelect,
            "launcher": forms.RadioSelect,
            "work_dir_kind": forms.RadioSelect,
            "command": forms.Textarea(
                attrs={"rows": 3, "placeholder": "python train.py --epochs 10"}
            ),
        }

    def __init__(self, *args, user, **kwargs):
        super().__init__(*args, **kwargs)
        self.user = user
        self.instance.owner = user
        self.fields["account"].widget.attrs["placeholder"] = "cluster default"
        self.name_account()
        # Left out (a form or script from before multi-node jobs): one process on one node.
        for name in self.OPTIONAL_DEFAULTS:
            self.fields[name].required = False
        self.fields["notebook_dir"].widget.attrs["placeholder"] = "e.g. projects/mnist"
        # App sessions: offered when the catalog has apps; they run in their app's image.
        # An imported run is never launched.
        kind = self.fields["kind"]
        left_out = {Job.Kind.IMPORTED}
        if not SessionApp.objects.offered().exists():
            left_out.add(Job.Kind.APP)
        kind.choices = [c for c in kind.choices if c[0] not in left_out]  # type: ignore[attr-defined]
        if self.data.get("kind") == Job.Kind.APP:
            self.fields["image"].required = False

    def name_account(self) -> None:
        """The account field in the words of the chosen cluster's scheduler ("Slurm
        account", "Accounting group"): its adapter's; the page follows a change of cluster."""
        chosen = self.data.get("cluster") if self.is_bound else self.initial.get("cluster")
        cluster = Cluster.objects.filter(name=str(chosen or ""), enabled=True).first()
        adapter = schedulers.for_cluster(cluster) if cluster is not None else None
        field = self.fields["account"]
        field.label = adapter.account_label if adapter else "Account"
        field.help_text = adapter.account_help if adapter else ""

    LAYOUT_DEFAULTS = {"nodes": 1, "tasks_per_node": 1, "launcher": Job.Launcher.NONE}
    # Left out (the page sends no disabled field): as the model's defaults.
    OPTIONAL_DEFAULTS = {
        **LAYOUT_DEFAULTS,
        "max_attempts": 1,
        "checkpoint_warning_seconds": 120,
    }

    # A word about the image shown before the user submits (a disabled one).
    image_notice = ""
    # "Launch again": the job this copies (the page shows what reproduced it).
    source: Job | None = None

    def clean(self):
        super().clean()  # ModelForm's returns cleaned_data (its stubs allow None)
        cleaned = self.cleaned_data
        if not cleaned.get("gpus"):
            # A GPU type means nothing without GPUs (the page's list keeps one selected),
            # nor do GPU requirements.
            cleaned["gpu_type"] = ""
            cleaned["min_gpu_capability"] = cleaned["min_gpu_memory_gb"] = None
        for name, default in self.OPTIONAL_DEFAULTS.items():
            if name not in self.errors and cleaned.get(name) in (None, ""):
                cleaned[name] = default
        cluster = cleaned.get("cluster")
        if cluster is not None and ClusterAccount.for_user(cluster, self.user) is None:
            self.add_error(
                "cluster",
                f"You have no account on {cluster.name} yet: set one up on your Account page.",
            )
        if cluster is not None and "account" not in self.errors:
            from projects.models import launch_refusal

            if refusal := launch_refusal(self.user, cluster.pk, cleaned.get("account") or ""):
                self.add_error("account", refusal)
        staging.clean(self, cleaned)
        self._clean_app_session(cleaned)
        return cleaned

    def _clean_app_session(self, cleaned: dict) -> None:
        """An app session runs in its app's image, with the values of its fields: an
        object from the API, ``app_field_<name>`` inputs from the page (Job.clean checks
        them against the app's fields)."""
        if cleaned.get("kind") != Job.Kind.APP:
            cleaned["app"], cleaned["app_values"] = None, None
            return
        app = cleaned.get("app")
        if app is None:
            if "app" not in self.errors:
                self.add_error("app", "Choose the app to start.")
            return
        cleaned["image"] = app.image
        if isinstance(self.data.get("app_values"), dict):
            return
        try:
            specs = app.field_specs()
        except ValueError:
            return  # the model's check says so
        values: dict[str, object] = {}
        for spec in specs:
            key = f"app_field_{spec.name}"
            if spec.type == "boolean":
                values[spec.name] = self.data.get(key) in ("on", "true")
            elif key in self.data:
                value = self.data.get(key)
                if spec.type == "text" and isinstance(value, str):
                    # A textarea's lines end in CRLF (the HTML form encoding).
                    value = value.replace("\r\n", "\n")
                values[spec.name] = value
        cleaned["app_values"] = values

    def save(self, commit: bool = True) -> Job:
        job = super().save(commit=commit)
        if commit:
            job.set_tags(self.cleaned_data.get("tags") or [])
        return job


def last_notebook_dir(user) -> str:
    """The folder the user's last notebook or editor opened in: the form remembers it."""
    last = (
        Job.objects.filter(owner=user, kind__in=FOLDER_SESSION_KINDS)
        .order_by("-created_at")
        .first()
    )
    return last.notebook_dir if last else ""


def tensorboard_initial(job: Job) -> dict:
    """A TensorBoard session on ``job``'s runs: its work directory as the folder, on its
    cluster, in its image if that has TensorBoard (else the first image that has)."""
    from clusters.workdir import work_root

    initial: dict = {
        "kind": Job.Kind.TENSORBOARD,
        "gpus": 0,
        "gpu_type": "",
        "cluster": job.cluster.name,
    }
    partition = job.cluster.default_partition()
    if partition is not None:
        initial["partition"] = partition.pk
    if job.work_dir:
        initial["notebook_dir"] = job.work_dir.removeprefix(work_root(job.work_dir)).strip("/")
        initial["work_dir_kind"] = job.work_dir_kind
    image = job.image if job.image.offers_tensorboard and job.image.enabled else None
    image = image or ContainerImage.objects.offered().filter(offers_tensorboard=True).first()
    if image is not None:
        initial["image"] = image.slug
    return initial


def _trial_again(source: Job) -> dict:
    """A trial's job launched again runs its configuration on the whole data, told its
    parameters as the experiment's relaunch does (the fold and params.json were the array's)."""
    trial = source.trial
    return {} if trial is None else trial.again()  # (experiments.models.Trial)


def launch_initial(user, source: Job | None = None) -> dict:
    """Defaults that make "choose an image, press Launch" work; or a copy of ``source``."""
    if source is not None:
        relations = {"image", "cluster", "partition"}  # by slug, name and id, below
        copy = {name: getattr(source, name) for name in LAUNCH_FIELDS if name not in relations}
        return (
            copy
            | {
                "image": source.image.slug,
                "cluster": source.cluster.name,
                "partition": source.partition_id,
                # Asked by capability and memory: asked again that way (the type they resolved
                # to then may change with the partition).
                "gpu_type": ""
                if source.min_gpu_capability or source.min_gpu_memory_gb
                else source.gpu_type,
                "notebook_dir": source.notebook_dir or last_notebook_dir(user),
                "tags": source.tag_names,
            }
            | _trial_again(source)
        )
    cluster = Cluster.objects.default_for(user)
    partition = cluster.default_partition() if cluster else None
    image = ContainerImage.objects.offered().filter(deprecated=False).first()
    initial = {
        "image": image.slug if image else None,
        "kind": "notebook",
        "work_dir_kind": "home",
        "notebook_dir": last_notebook_dir(user),
    }
    initial.update(image_layout(image, partition))
    if image and not image.offers_notebook:
        initial["kind"] = "batch"
    if cluster and partition:
        initial.update(
            cluster=cluster.name, partition=partition.pk, **partition.job_defaults(image)
        )
    return initial


def image_layout(image: ContainerImage | None, partition: Partition | None = None) -> dict:
    """How the image's batch command starts unless the user says: its launcher and layout,
    on at most the partition's nodes (as the launch page caps it)."""
    if image is None:
        return dict(LaunchForm.LAYOUT_DEFAULTS)
    nodes = image.default_nodes
    if partition is not None:
        nodes = min(nodes, partition.max_nodes)
    return {
        "nodes": nodes,
        "tasks_per_node": image.default_tasks_per_node,
        "launcher": image.default_launcher,
    }


def partition_limits() -> dict:
    """What the browser needs to show limits and prevent impossible requests."""
    clusters: dict[str, dict[str, Any]] = {}
    for p in (
        Partition.objects.filter(cluster__enabled=True)
        .select_related("cluster")
        .prefetch_related("cluster__gpu_types")
    ):
        c = clusters.setdefault(
            p.cluster.name,
            {
                "scratch": bool(p.cluster.scratch_root),
                "scheduler": p.cluster.scheduler,
                "partitions": [],
            },
        )
        c["partitions"].append(p.limits())
    return clusters
