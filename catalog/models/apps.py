"""Session apps: what a session runs, in the catalog an administrator curates.

JupyterLab, TensorBoard and VS Code are shipped as apps (a data migration makes their
rows); a centre adds its own in the admin without code: a name, an image (runtime "none"
for the node's own environment), the command that starts it with where it listens
(``{port}`` or ``{socket}``), a readiness check, its form fields, and whether it may be
shared without the "acts as me" acceptance (it only shows). Every app's session is
registered, routed and opened the same way (proxy/); JupyterLab and TensorBoard start
from the portal's own scripts (schedulers/on_node/notebook/, tensorboard/), every other app
from its command behind the session guard (schedulers/on_node/app/). Commands and fields are
read as hostile input by catalog/app_command.py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from django.core.exceptions import ValidationError
from django.db import models

from catalog import app_command
from common.choices import COMMAND_SESSION_KINDS, Kind

if TYPE_CHECKING:
    from schedulers.seam import AppSpec


class SessionJob(Protocol):
    """What ``SessionApp.for_job`` reads of a job (jobs.models.Job: this floor is below it)."""

    @property
    def app_id(self) -> int | None: ...

    @property
    def app(self) -> SessionApp | None: ...

    @property
    def kind(self) -> str: ...


# The shipped apps, by the kind of their jobs: one row each (made by migration 0053); a
# kind whose row is missing (a database emptied by hand, a test's flush) runs as shipped.
SHIPPED: dict[str, dict] = {
    Kind.NOTEBOOK: {
        "slug": "jupyterlab",
        "name": "JupyterLab",
        "description": "Notebooks, a terminal and files in the browser (Jupyter).",
        "start_path": "/lab",
        "sort_order": 10,
    },
    Kind.TENSORBOARD: {
        "slug": "tensorboard",
        "name": "TensorBoard",
        "description": "The runs under a folder, or one job's, in TensorBoard.",
        "shareable_read_only": True,
        "sort_order": 20,
    },
    Kind.VSCODE: {
        "slug": "vscode",
        "name": "VS Code",
        "description": "VS Code in the browser (code-server), with its terminal and extensions.",
        "command": (
            "code-server --config /dev/null --auth none --socket {socket} --socket-mode 600 "
            "--disable-telemetry --disable-update-check --disable-getting-started-override "
            "--ignore-last-opened {folder}"
        ),
        "ready_path": "/healthz",
        "sort_order": 30,
    },
}
BUILTIN_KINDS = tuple(SHIPPED)
# The ``builtin`` of the portal's own serving apps (endpoints/serving.py): hidden from the
# launch form and the API (offered() lists apps with no builtin), launched by the portal
# for an endpoint in the image of the version's job.
SERVING = "serving"


class SessionAppQuerySet(models.QuerySet):
    def offered(self) -> SessionAppQuerySet:
        """The admin-added apps a person may launch now (the shipped ones are kinds)."""
        return self.filter(enabled=True, builtin="", image__enabled=True)


class SessionApp(models.Model):
    slug = models.SlugField(max_length=40, unique=True)
    name = models.CharField(max_length=80)
    description = models.CharField(max_length=300, blank=True)
    builtin = models.CharField(
        "shipped as",
        max_length=16,
        blank=True,
        editable=False,
        help_text="A shipped app's session kind; empty for an app added here.",
    )
    image = models.ForeignKey(
        "jobs.ContainerImage",
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="session_apps",
        help_text="What it runs in (an image with runtime 'none' runs on the node itself). "
        "Shipped apps run in the image a person chooses among those that offer them.",
    )
    command = models.TextField(
        max_length=app_command.COMMAND_MAX_CHARS,
        blank=True,
        help_text="Words, not a shell line (quotes group words; nothing is expanded). "
        "Where it listens, exactly one of {port} (a free port on the node's loopback) or "
        "{socket} (a Unix socket in the job's private directory: prefer it where the app "
        "can, since other users of a shared node can reach a loopback port). Also "
        "{folder} (the folder the person chose), {work_dir}, {home}, and each field by "
        "its name, e.g. {script}; {{ and }} are braces. Each value is one argument "
        "whatever it holds, and is also PORTAL_APP_<NAME> in the environment.",
    )
    ready_path = models.CharField(
        max_length=200,
        default="/",
        help_text="The app is ready when a GET of this path answers one of the statuses below.",
    )
    ready_status = models.CharField(max_length=60, default="200-399")
    start_path = models.CharField(
        max_length=200, default="/", help_text="Where the browser opens it, e.g. /lab."
    )
    fields = models.JSONField(
        default=list,
        blank=True,
        help_text='Its form fields, a JSON list: {"name": "script", "label": "Script", '
        '"type": "text", "max_length": 200, "default": "app.py"}; types text, integer and '
        "number (min, max), choice (choices), boolean; each with an optional default and help.",
    )
    shareable_read_only = models.BooleanField(
        "shareable read-only",
        default=False,
        help_text="It only shows (like TensorBoard): shared without the owner accepting "
        "that whoever opens it acts as them. Leave it off for anything that runs code.",
    )
    enabled = models.BooleanField(default=True)
    sort_order = models.IntegerField(default=100)
    updated_at = models.DateTimeField(auto_now=True)

    objects = SessionAppQuerySet.as_manager()

    class Meta:
        app_label = "jobs"
        ordering = ["sort_order", "name"]

    def __str__(self) -> str:
        return self.name

    @classmethod
    def for_job(cls, job: SessionJob) -> SessionApp | None:
        """The app ``job``'s session runs: its own (an added app's), else its kind's."""
        if job.app_id is not None:
            return job.app
        if job.kind not in BUILTIN_KINDS:
            return None
        return cls.shipped(job.kind)

    @classmethod
    def shipped(cls, kind: str) -> SessionApp:
        """The shipped app of ``kind``: its row, else as shipped (unsaved)."""
        row = cls.objects.filter(builtin=kind).first()
        return row if row is not None else cls(builtin=kind, **SHIPPED[kind])

    def field_specs(self) -> list[app_command.Field]:
        return app_command.parse_fields(self.fields)

    def clean(self) -> None:
        errors: dict[str, str] = {}
        # A browser sends a textarea's lines ending in CRLF (the HTML form encoding).
        self.command = self.command.replace("\r\n", "\n")
        try:
            specs = self.field_specs()
        except app_command.AppError as exc:
            errors["fields"] = str(exc)
            specs = []
        if (self.builtin or Kind.APP) in COMMAND_SESSION_KINDS:  # it starts from its command
            try:
                app_command.split_command(self.command, [f.name for f in specs])
            except app_command.AppError as exc:
                errors["command"] = str(exc)
        if not self.builtin and self.image_id is None:
            errors["image"] = "An app runs in an image (runtime 'none': on the node itself)."
        try:
            app_command.check_ready(self.ready_path, self.ready_status)
        except app_command.AppError as exc:
            errors["ready_path"] = str(exc)
        if not app_command.HTTP_PATH.match(self.start_path or ""):
            errors["start_path"] = "A path starting with / (at most 200 URL characters)."
        if errors:
            raise ValidationError(errors)

    def spec(self, values: dict[str, str]) -> AppSpec:
        """What the job script runs of it, with ``values`` (checked by clean_values)."""
        from schedulers.seam import AppSpec

        specs = self.field_specs()
        parsed = app_command.split_command(self.command, [f.name for f in specs])
        return AppSpec(
            program=parsed[0][0][0],
            command=app_command.render(parsed, values),
            environment=app_command.environment(specs, values),
            listens=app_command.listening(parsed),
            ready_path=self.ready_path,
            ready_status=self.ready_status,
            # A model endpoint's server is timed by the endpoint meter in front of it.
            helpers=("endpoint_meter",) if self.builtin == SERVING else (),
        )
