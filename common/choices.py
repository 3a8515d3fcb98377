"""The portal's vocabulary for jobs, written once: states, kinds, launchers, container
runtimes, work directories.

The scheduler adapters (schedulers/slurm/status.py) map their own states onto ``State``; the
API sends ``is_active``/``is_final`` with every job so its clients need no copy.
"""

from django.db import models


class State(models.TextChoices):
    QUEUED = "queued", "Queued"  # accepted by the portal, not yet at the scheduler
    PENDING = "pending", "Pending"
    RUNNING = "running", "Running"
    COMPLETING = "completing", "Completing"
    COMPLETED = "completed", "Completed"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"
    TIMEOUT = "timeout", "Timed out"
    SUBMIT_FAILED = "submit_failed", "Submission failed"


class Kind(models.TextChoices):
    NOTEBOOK = "notebook", "Notebook session"
    BATCH = "batch", "Batch command"
    TENSORBOARD = "tensorboard", "TensorBoard session"
    VSCODE = "vscode", "VS Code session"
    APP = "app", "App session"
    # A run brought in from MLflow, W&B or TensorBoard (tracking/imports/): it never ran
    # here, nobody launches one.
    IMPORTED = "imported", "Imported run"


class Launcher(models.TextChoices):
    """How a batch job's command starts on its nodes (schedulers/on_node/distributed/)."""

    NONE = "none", "None: my command runs once, on the first node"
    TORCHRUN = "torchrun", "torchrun: one per node, it starts one process per task"
    MPI = "mpi", "MPI: mpirun starts one rank per task (Horovod, mpi4py)"


class Runtime(models.TextChoices):
    """What starts a container image on the node (ContainerImage.runtime)."""

    APPTAINER = "apptainer", "Apptainer"
    SINGULARITY = "singularity", "SingularityCE"
    PODMAN = "podman", "Podman"
    NONE = "none", "None (host environment)"


class WorkDir(models.TextChoices):
    """Where a job's work directory is made: under the cluster's home or scratch root."""

    HOME = "home", "Home"
    SCRATCH = "scratch", "Scratch"


ACTIVE_STATES = (State.QUEUED, State.PENDING, State.RUNNING, State.COMPLETING)
FINAL_STATES = (
    State.COMPLETED,
    State.FAILED,
    State.CANCELLED,
    State.TIMEOUT,
    State.SUBMIT_FAILED,
)
# At the scheduler: what a sync asks about.
SCHEDULED_STATES = (State.PENDING, State.RUNNING, State.COMPLETING)
# What a person may launch: every kind but an imported run.
LAUNCHED_KINDS = tuple(k for k in Kind if k != Kind.IMPORTED)
LAUNCHED_KIND_CHOICES = [(k.value, k.label) for k in LAUNCHED_KINDS]
# Kinds that open through a session link (a web app on the node, proxy/).
SESSION_KINDS = (Kind.NOTEBOOK, Kind.TENSORBOARD, Kind.VSCODE, Kind.APP)
# Sessions that open on a folder of the person's (the launch form remembers the last one).
FOLDER_SESSION_KINDS = (Kind.NOTEBOOK, Kind.VSCODE, Kind.APP)
# Sessions started by their app's command behind the session guard (schedulers/on_node/app/).
COMMAND_SESSION_KINDS = (Kind.VSCODE, Kind.APP)
# What a session's "Open …" button names.
SESSION_APP_NAMES: dict[str, str] = {
    Kind.NOTEBOOK: "notebook",
    Kind.TENSORBOARD: "TensorBoard",
    Kind.VSCODE: "VS Code",
}
