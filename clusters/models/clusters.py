"""Clusters and their partitions (what a job may ask for); the accounts jobs run under
are clusters/models/accounts.py."""

from __future__ import annotations

from typing import Any, Protocol

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models, transaction
from django.db.models import Q

from common import validators
from common.choices import WorkDir
from common.validators import split_list


class ImageLike(Protocol):
    """What a partition's job defaults read of an image (catalog.models.ContainerImage: that
    floor is above this one)."""

    @property
    def supports_gpu(self) -> bool: ...


class ClusterQuerySet(models.QuerySet["Cluster"]):
    def default_for(self, user) -> Cluster | None:
        """The cluster a job of ``user`` goes to when it names none: the launch form's
        first choice, and the cluster of an API or CLI request without one. Among the
        enabled clusters the user has an account on (all enabled ones if none): the one an
        administrator marked default; else the cluster of the user's most recent job;
        else the first by name."""
        enabled: list[Cluster] = list(self.filter(enabled=True).order_by("name"))
        known = getattr(user, "pk", None) is not None
        # ClusterAccount (clusters/models/accounts.py, which imports this module), by relation.
        accounts: Any = self.model._meta.get_field("accounts").related_model
        usable = [c for c in enabled if known and accounts.for_user(c, user) is not None] or enabled
        marked = next((c for c in usable if c.is_default), None)
        if marked is not None:
            return marked
        if known:
            last: Cluster | None = (
                self.filter(pk__in=[c.pk for c in usable], jobs__owner=user)
                .order_by("-jobs__created_at", "-jobs__pk")
                .first()
            )
            if last is not None:
                return last
        return usable[0] if usable else None


class Cluster(models.Model):
    class LoginMode(models.TextChoices):
        PER_USER = "per_user", "Each portal user logs in with their own cluster account"
        SERVICE = "service", "One service account runs every user's jobs"

    class Scheduler(models.TextChoices):
        SLURM = "slurm", "Slurm"
        HTCONDOR = "htcondor", "HTCondor"

    class NodeSsh(models.TextChoices):
        SRUN = "srun", "Through the login node with srun --overlap (Slurm)"
        PROXYJUMP = "proxyjump", "Jump to the node: its sshd adopts logins (pam_slurm_adopt)"

    class SshAuth(models.TextChoices):
        KEY_PAIR = "key_pair", "A stored key pair per account"
        CERTIFICATE = "certificate", "Short-lived certificates signed by the portal's CA"

    name = models.SlugField(max_length=64, unique=True)
    description = models.CharField(max_length=200, blank=True)
    scheduler = models.CharField(
        max_length=16,
        choices=Scheduler.choices,
        default=Scheduler.SLURM,
        help_text="The batch system behind the login node (an HTCondor access point): what "
        "the portal submits with. Slurm runs multi-node jobs, launchers (torchrun, mpirun) "
        "and checkpoint-and-requeue; HTCondor runs each job as one process on one machine.",
    )
    ssh_host = models.CharField(max_length=253, validators=[validators.hostname])
    ssh_port = models.PositiveIntegerField(
        default=22, validators=[MinValueValidator(1), MaxValueValidator(65535)]
    )
    host_key = models.TextField(
        validators=[validators.host_key],
        help_text="Pinned SSH host key: the public key line or its SHA256 fingerprint. "
        "Connections presenting any other key are refused.",
    )
    user_ssh_host = models.CharField(
        "login node for people",
        max_length=253,
        blank=True,
        db_default="",  # (the previous release inserts clusters without it)
        validators=[validators.hostname],
        help_text="The login node's name as people reach it with their own SSH client (on the "
        "SSH port above), when it differs from the SSH host the portal uses. Empty: the SSH host.",
    )
    node_ssh = models.CharField(
        "SSH into a job",
        max_length=16,
        choices=NodeSsh.choices,
        default=NodeSsh.SRUN,
        db_default=NodeSsh.SRUN,
        help_text="How a person's own SSH client (a terminal, VS Code Remote-SSH) enters their "
        "running job with a certificate from the portal (clusters in certificate mode): a "
        "step of the job started through the login node, or a jump to the job's node where "
        "pam_slurm_adopt puts the login into the job. HTCondor pools use condor_ssh_to_job.",
    )
    login_mode = models.CharField(
        max_length=16,
        choices=LoginMode.choices,
        default=LoginMode.PER_USER,
        help_text="A service account makes the cluster ONE TRUST DOMAIN: every portal user's "
        "jobs run as the same cluster user, so any job can read, change or cancel the files "
        "and jobs of every other user there. Use it only for users who trust each other "
        "(one group, one project); otherwise give each user their own cluster account.",
    )
    ssh_auth = models.CharField(
        "SSH authentication",
        max_length=16,
        choices=SshAuth.choices,
        default=SshAuth.KEY_PAIR,
        help_text="For every account of this cluster (per-user and service account). "
        "Certificates: the portal signs a certificate valid for a few minutes for each "
        "connection, with the cluster user as its only principal, and keeps no private key "
        "for the account; the login nodes' sshd must trust the portal's CA "
        "(TrustedUserCAKeys: `manage.py ssh_ca` prints it) and name each user in its "
        "AuthorizedPrincipalsFile. Switching to certificates deletes the accounts' stored keys. "
        "Key pair: the portal keeps an encrypted private key per account, whose public key "
        "is installed in authorized_keys.",
    )
    default_account = models.CharField(
        max_length=64,
        blank=True,
        validators=[validators.slurm_name],
        help_text="Charged when the user names none: the Slurm account (--account) or the "
        "HTCondor accounting group (accounting_group).",
    )
    home_root = models.CharField(
        max_length=255,
        default="/home/{user}",
        validators=[validators.work_dir_root],
        help_text="Home directory of a cluster user; {user} is replaced by the cluster user name.",
    )
    scratch_root = models.CharField(
        max_length=255,
        blank=True,
        validators=[validators.work_dir_root],
        help_text="Scratch directory, e.g. /scratch/{user}. Leave empty if the cluster has none.",
    )
    node_scratch = models.CharField(
        "node-local scratch",
        max_length=255,
        blank=True,
        validators=[validators.node_scratch],
        help_text="Where stage-in copies a job's folder on each compute node: a folder on the "
        "node's own disk, such as /local/scratch, or an environment variable the job has there "
        "followed by a path ($LOCAL_SCRATCH, $LOCAL_SCRATCH/jobs). Empty: $SLURM_TMPDIR, "
        "else HTCondor's scratch directory, else $TMPDIR, else /tmp.",
    )
    project_root = models.CharField(
        max_length=255,
        blank=True,
        validators=[validators.project_root],
        help_text="A project's shared folder, e.g. /proj/{project} ({project}: the account's "
        "name); the file manager offers it to the project's members. Empty: none.",
    )
    quota_files = models.CharField(
        "storage quota files",
        max_length=1000,
        blank=True,
        validators=[validators.path_list],
        help_text="Open OnDemand quota files (JSON, written by the site) on the cluster, "
        "':'-separated as OOD_QUOTA_PATH: project pages show their members' storage use.",
    )
    metrics_over_ssh = models.BooleanField(
        "read metrics over SSH",
        default=False,
        help_text="Compute nodes cannot reach the portal: read running jobs' metrics files "
        "over SSH on every sync instead of waiting for uploads. (Files are always read "
        "once more when a job ends.)",
    )
    command_path = models.CharField(
        "scheduler commands' PATH",
        max_length=500,
        blank=True,
        default="/usr/local/bin:/usr/bin:/bin",
        db_default="/usr/local/bin:/usr/bin:/bin",  # (the previous release's inserts)
        validators=[
            RegexValidator(
                r"^/[A-Za-z0-9._+/-]*(:/[A-Za-z0-9._+/-]*)*\Z",
                "Absolute folders separated by colons, e.g. /opt/slurm/bin:/usr/bin:/bin.",
            )
        ],
        help_text="The portal's reads of the scheduler (squeue, sacct, sacctmgr, condor_q, "
        "...) run as env -i PATH=<this> <command>: no function, alias, PATH or SLURM_* "
        "variable of the person's login environment reaches them. Empty: through the login "
        "environment as it is (a cluster whose scheduler needs it). A login environment "
        "can still print anything before the command runs: what it prints is believed "
        "about that person alone.",
    )
    sync_reads_all_jobs = models.BooleanField(
        "sync reads every job through the service account",
        default=False,
        help_text="Each sync asks the scheduler once for every user's jobs, through the "
        "cluster's service account, instead of once per cluster account: its cost stays a "
        "few commands however many people use the cluster. The service account must be "
        "allowed to see other users' jobs (Slurm: PrivateData without 'jobs', in slurm.conf "
        "and slurmdbd.conf); it needs no other right. Each job is still checked against its "
        "owner and name; a job it cannot see is asked about through its owner's account.",
    )
    rclone_command = models.CharField(
        "rclone on the cluster",
        max_length=255,
        default="rclone",
        validators=[validators.command_path],
        help_text="The rclone program transfers run on the login node as each person "
        "(a name on their PATH, or an absolute path).",
    )
    transfer_flags = models.CharField(
        "rclone flags for every transfer",
        max_length=500,
        blank=True,
        validators=[validators.long_flags],
        help_text="e.g. --transfers 8 --bwlimit 500M (a centre's limits on its login nodes).",
    )
    max_array_size = models.PositiveIntegerField(
        "largest job array",
        default=1001,
        help_text="Slurm's MaxArraySize (scontrol show config): an array's task ids stay "
        "below it. Experiments split their trials into arrays that fit.",
    )
    enabled = models.BooleanField(default=True)
    is_default = models.BooleanField(
        "default cluster",
        default=False,
        help_text="Where a job goes when it names no cluster: the launch form's first choice "
        "and the cluster of API and CLI requests without one. At most one cluster is the "
        "default; with none, each user's jobs go to the cluster of their last job (or the "
        "first by name).",
    )
    # OIDC sign-in (identity/): which cluster user a person is here, and who may use it.
    user_map = models.TextField(
        "cluster user from sign-in",
        blank=True,
        validators=[validators.user_map],
        help_text="With OIDC sign-in: the cluster user name made from the person's claims. "
        "Either a template such as {preferred_username} (any claim name in braces), or "
        "lines 'REGEX => TEMPLATE' tried in order against the portal user name, the first "
        r"match winning (\1 or \g<name> take the regex's groups). Empty: no account is "
        "made at sign-in.",
    )
    allowed_groups = models.CharField(
        max_length=500,
        blank=True,
        help_text="With OIDC sign-in: the provider groups whose members may use this "
        "cluster, comma-separated. Empty: everyone allowed into the portal.",
    )

    objects = ClusterQuerySet.as_manager()

    class Meta:
        app_label = "jobs"
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(
                fields=["is_default"],
                condition=Q(is_default=True),
                name="one_default_cluster",
                violation_error_message="Another cluster is already the default: unmark it "
                "first, or use the action “Make it the default cluster” in the list.",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    def save(self, *args, **kwargs) -> None:
        super().save(*args, **kwargs)
        if self.uses_certificates:
            # A key the portal no longer uses is only a liability: none is kept in this mode.
            self.accounts.exclude(private_key_encrypted="", public_key="").update(
                private_key_encrypted="", public_key=""
            )

    def mark_default(self) -> None:
        """Make this the default cluster, and no other."""
        # One transaction: no reader sees two defaults or none; two admins marking at once
        # meet the constraint (one_default_cluster), and the second one is refused.
        with transaction.atomic():
            Cluster.objects.filter(is_default=True).exclude(pk=self.pk).update(is_default=False)
            Cluster.objects.filter(pk=self.pk).update(is_default=True)
        self.is_default = True

    @property
    def host_key_fingerprint(self) -> str:
        key = self.host_key.strip()
        return key if key.startswith("SHA256:") else validators.host_key_fingerprint(key)

    @property
    def uses_certificates(self) -> bool:
        return self.ssh_auth == self.SshAuth.CERTIFICATE

    @property
    def is_one_trust_domain(self) -> bool:
        """All users' jobs run as one cluster user: they can reach each other's work."""
        return self.login_mode == self.LoginMode.SERVICE

    def clean(self) -> None:
        super().clean()
        if self.login_mode == self.LoginMode.PER_USER:
            errors = {
                field: "Each user has their own cluster account here: the folder must "
                "contain {user}, or every user's work directories would share one folder."
                for field in ("home_root", "scratch_root")
                if getattr(self, field) and "{user}" not in getattr(self, field)
            }
            if errors:
                raise ValidationError(errors)
        signs = settings.PORTAL_SSH_CA_KEY_FILES or settings.PORTAL_SSH_SIGNER_SOCKET
        if self.uses_certificates and not signs:
            raise ValidationError(
                {
                    "ssh_auth": "Certificates need the portal's CA: set PORTAL_SSH_CA_KEY_FILES "
                    "(make the key with `manage.py ssh_ca`), or PORTAL_SSH_SIGNER_SOCKET where "
                    "a signer holds it."
                }
            )

    @property
    def allowed_group_list(self) -> list[str]:
        return split_list(self.allowed_groups)

    def allows(self, groups: frozenset[str] | None) -> bool:
        """Whether a person in provider ``groups`` may use this cluster (None: no provider
        says, as with OIDC sign-in off: the group rule does not apply)."""
        wanted = self.allowed_group_list
        return groups is None or not wanted or bool(groups & set(wanted))

    def work_dir_root(self, kind: str, cluster_username: str) -> str:
        template = self.scratch_root if kind == WorkDir.SCRATCH else self.home_root
        if not template:
            raise ValidationError(f"Cluster {self.name} has no {kind} directory.")
        if self.login_mode == self.LoginMode.PER_USER and "{user}" not in template:
            # A row saved before the rule (clean()) or around the admin: never one folder.
            raise ValidationError(
                f"Cluster {self.name}'s {kind} directory has no {{user}}; an administrator "
                "must fix it before jobs can use it."
            )
        return template.replace("{user}", cluster_username)

    def default_partition(self) -> Partition | None:
        return self.partitions.filter(is_default=True).first() or self.partitions.first()


class Partition(models.Model):
    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="partitions")
    name = models.CharField(max_length=64, validators=[validators.slurm_name])
    description = models.CharField(max_length=200, blank=True)
    gpu_types = models.CharField(
        max_length=200,
        blank=True,
        validators=[validators.EachItem(validators.slurm_name)],
        help_text="GRES GPU types offered, comma-separated (e.g. v100, a100). "
        "Empty for a CPU-only partition.",
    )
    max_gpus_per_job = models.PositiveSmallIntegerField(
        default=0, help_text="GPUs of all the job's nodes together."
    )
    max_nodes = models.PositiveSmallIntegerField(
        default=1,
        validators=[MinValueValidator(1)],
        help_text="Most nodes one job may use (multi-node training).",
    )
    max_gpus_per_node = models.PositiveSmallIntegerField(
        default=0,
        help_text="GPUs one node of this partition has (0: as many as max GPUs per job). "
        "A job asks for GPUs per node; more GPUs than a node has need more nodes.",
    )
    max_cpus_per_job = models.PositiveIntegerField(
        default=8,
        validators=[MinValueValidator(1)],
        help_text="CPUs on each node of a job (CPUs per task × tasks per node).",
    )
    max_memory_gb = models.PositiveIntegerField(
        default=32, validators=[MinValueValidator(1)], help_text="Memory on each node of a job."
    )
    max_time_minutes = models.PositiveIntegerField(
        default=24 * 60, validators=[MinValueValidator(1)]
    )
    default_time_minutes = models.PositiveIntegerField(
        default=60, validators=[MinValueValidator(1)]
    )
    # What a job asks for when the user does not say (form, API and CLI alike): modest, so
    # that several default jobs share a node instead of queueing behind each other.
    default_gpus = models.PositiveSmallIntegerField(
        default=1, help_text="GPUs for an image that supports them (capped by max GPUs)."
    )
    default_cpus = models.PositiveIntegerField(default=2, validators=[MinValueValidator(1)])
    default_memory_gb = models.PositiveIntegerField(default=4, validators=[MinValueValidator(1)])
    gpu_type_as_constraint = models.BooleanField(
        default=False,
        help_text="Request the GPU type as a node feature (--gres=gpu:N --constraint=TYPE) "
        "instead of a typed GRES (--gres=gpu:TYPE:N).",
    )
    mem_per_gpu = models.BooleanField(
        "memory per GPU",
        default=False,
        help_text="GPU jobs ask for memory per GPU (--mem-per-gpu, the job's memory divided "
        "by its GPUs per node) instead of per node (--mem), as this partition wants.",
    )

    class TimeClass(models.TextChoices):
        NONE = "", "—"
        SHORT = "short", "short"
        MEDIUM = "medium", "medium"
        LONG = "long", "long"

    time_class = models.CharField(
        max_length=8,
        choices=TimeClass.choices,
        blank=True,
        help_text="How long jobs here run (CHTC's short/medium/long GPU jobs); the launch "
        "page suggests checkpoint and requeue for long ones.",
    )
    is_default = models.BooleanField(default=False, help_text="Offered first for this cluster.")

    # The idle-GPU policy (usage/idle_policy.py): off by default; dry-run only lists.
    class IdlePolicy(models.TextChoices):
        OFF = "", "off"
        DRY_RUN = "dry_run", "dry run (list only)"
        ENFORCE = "enforce", "enforce (warn, then cancel)"

    idle_policy = models.CharField(
        "idle-GPU policy",
        max_length=8,
        choices=IdlePolicy.choices,
        blank=True,
        help_text="Warn, then cancel, GPU jobs whose GPUs all stay idle (dry run: only list "
        "them on the idle-GPU policy page).",
    )
    idle_percent = models.FloatField(
        "idle at or below (%)",
        default=5.0,
        validators=[MinValueValidator(0), MaxValueValidator(100)],
        help_text="A GPU at or below this utilisation counts as idle.",
    )
    idle_minutes = models.FloatField(
        default=60.0,
        validators=[MinValueValidator(0.1)],
        help_text="Minutes all of a job's GPUs must stay idle before it is warned.",
    )
    idle_grace_minutes = models.FloatField(
        default=60.0,
        validators=[MinValueValidator(0.05)],
        help_text="Minutes from the warning to the cancellation.",
    )
    idle_keep_minutes = models.FloatField(
        "keep-it minutes",
        default=120.0,
        validators=[MinValueValidator(0)],
        help_text='Minutes the owner\'s one "Keep it" adds to the grace.',
    )

    class Meta:
        app_label = "jobs"
        ordering = ["cluster__name", "-is_default", "name"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "name"], name="partition_unique_name"),
            models.UniqueConstraint(
                fields=["cluster"], condition=Q(is_default=True), name="one_default_partition"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.cluster.name}/{self.name}"

    # What a job may ask for here: at most (LIMIT_FIELDS) and unless it says (DEFAULT_FIELDS),
    # GPUs, CPUs, memory, walltime in that order. The admin, the API and the launch page
    # all show them from here.
    LIMIT_FIELDS = ("max_gpus_per_job", "max_cpus_per_job", "max_memory_gb", "max_time_minutes")
    DEFAULT_FIELDS = ("default_gpus", "default_cpus", "default_memory_gb", "default_time_minutes")
    # The shape of its nodes, for multi-node jobs.
    NODE_FIELDS = ("max_nodes", "max_gpus_per_node")

    @property
    def gpu_type_list(self) -> list[str]:
        return split_list(self.gpu_types)

    @property
    def gpus_per_node_limit(self) -> int:
        """Most GPUs a job may ask for on one node."""
        if self.max_gpus_per_node:
            return min(self.max_gpus_per_node, self.max_gpus_per_job)
        return self.max_gpus_per_job

    def limits(self) -> dict:
        """The partition's limits and defaults for the launch page's script."""
        return {
            "id": self.pk,
            "name": self.name,
            "is_default": self.is_default,
            "gpu_types": self.gpu_type_list,
            "max_gpus": self.max_gpus_per_job,
            "max_gpus_per_node": self.gpus_per_node_limit,
            "max_nodes": self.max_nodes,
            "max_cpus": self.max_cpus_per_job,
            "max_memory_gb": self.max_memory_gb,
            "max_minutes": self.max_time_minutes,
            "default_minutes": self.default_time_minutes,
            "default_gpus": self.default_gpus,
            "default_cpus": self.default_cpus,
            "default_memory_gb": self.default_memory_gb,
            "time_class": self.time_class,
            # Described GPU types offered here: the page shows which match a requirement.
            "gpus": [
                {
                    "name": t.name,
                    "model": t.model,
                    "compute_capability": float(t.compute_capability),
                    "memory_gb": t.memory_gb,
                }
                for t in self.cluster.gpu_types.all()
                if t.name in self.gpu_type_list
            ],
        }

    def job_defaults(self, image: ImageLike | None = None) -> dict:
        """What a job on this partition asks for unless the user says otherwise. GPUs only
        for an image that supports them (and a GPU type only with GPUs)."""
        gpus = 0
        if self.max_gpus_per_job and (image is None or image.supports_gpu):
            gpus = min(self.default_gpus, self.gpus_per_node_limit)
        return {
            "gpus": gpus,
            "gpu_type": "",  # any type: a job asks for one (or for what it needs) if it cares
            "cpus": min(self.default_cpus, self.max_cpus_per_job),
            "memory_gb": min(self.default_memory_gb, self.max_memory_gb),
            "time_limit_minutes": min(self.default_time_minutes, self.max_time_minutes),
        }

    def clean(self) -> None:
        errors = {}
        if self.default_time_minutes and self.max_time_minutes:
            if self.default_time_minutes > self.max_time_minutes:
                errors["default_time_minutes"] = (
                    f"The default walltime ({self.default_time_minutes} min) is longer than the "
                    f"maximum ({self.max_time_minutes} min)."
                )
        for field, limit, unit in (
            ("default_cpus", "max_cpus_per_job", "CPUs"),
            ("default_memory_gb", "max_memory_gb", "GB"),
            ("default_gpus", "max_gpus_per_job", "GPUs"),
            ("default_gpus", "max_gpus_per_node", "GPUs"),
        ):
            default, maximum = getattr(self, field), getattr(self, limit)
            if default and maximum and default > maximum:
                errors[field] = (
                    f"The default ({default} {unit}) is more than the maximum ({maximum})."
                )
        if self.max_gpus_per_job and not self.gpu_type_list:
            errors["gpu_types"] = "List the GPU types this partition offers, or set max GPUs to 0."
        if self.gpu_type_list and not self.max_gpus_per_job:
            errors["max_gpus_per_job"] = (
                "A partition offering GPU types needs max GPUs of 1 or more."
            )
        if errors:
            raise ValidationError(errors)
