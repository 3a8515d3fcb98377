"""What registering asks: where the files a source names are, and which namespace, as rules
written once for the MLflow API, the REST API and the pages. Errors are RegistryError: a
message for the person with MLflow's error code and status (tracking/protocol.py)."""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Q

from identity import audit
from jobs.models import Job
from projects import access
from projects.models import Role, at_least
from registry import tasks
from registry.models import (
    MAX_ALIASES_PER_MODEL,
    MAX_MODELS_PER_NAMESPACE,
    MAX_NAME_CHARS,
    ModelAlias,
    ModelVersion,
    RegisteredModel,
    ancestors,
)
from tracking.models import LoggedModel, TrackedRun
from tracking.protocol import EXHAUSTED, EXISTS, INVALID, NOT_FOUND, PERMISSION, ApiError

NAME = re.compile(r"[^\x00-\x1f/\\]{1,256}\Z")  # MLflow forbids '/' in a model's name
ALIAS = re.compile(r"[A-Za-z0-9_-]{1,255}\Z")  # (and 'latest' and 'v<digits>' are taken)


class RegistryError(ApiError):
    """A registry rule said no (MLflow's API answers it as it is)."""


@dataclass
class Files:
    """Where a version's files are: a path on the job's cluster, and what made them."""

    job: Job
    path: str
    run: TrackedRun | None = None
    logged_model: LoggedModel | None = None
    step: int | None = None


def check_name(name: str) -> str:
    if not NAME.match(name or "") or name != name.strip():
        raise RegistryError(
            INVALID,
            f"A model's name is 1 to {MAX_NAME_CHARS} characters, without '/' or control "
            "characters, and no spaces around it.",
        )
    return name


def check_alias(alias: str) -> str:
    if not ALIAS.match(alias or "") or alias == "latest" or re.fullmatch(r"[vV][0-9]+", alias):
        raise RegistryError(
            INVALID,
            "An alias is letters, digits, '-' and '_' (at most 255), and not 'latest' or "
            "'v' followed by digits.",
        )
    return alias


def may_register(user: Any, project_id: int | None) -> bool:
    """Register into a namespace: one's own; a project's as its member or manager."""
    if project_id is None:
        return True
    role = access.role_in(user, project_id)
    return bool(role) and at_least(role, Role.MEMBER)


def visible(user: Any):
    """The models the person sees: their own, their projects' (any role; staff: every
    one). Another person's own models are nobody else's to see."""
    if access.sees_every_job(user):
        return RegisteredModel.objects.all()
    projects = sorted(access.roles(user))
    return RegisteredModel.objects.filter(
        Q(owner_id=user.pk, project=None) | Q(project_id__in=projects)
    )


def may_change(user: Any, model: RegisteredModel) -> bool:
    """Register into, or set an alias of, a model: a person's own, theirs alone (not
    staff's); a project's, its members' and managers' (a viewer only sees)."""
    if model.project_id is None:
        return model.owner_id == user.pk
    return may_register(user, model.project_id)


def may_set_protected(user: Any, model: RegisteredModel) -> bool:
    """Move or remove a protected alias: the project's managers (or, for a person's own
    model, the person)."""
    if model.project_id is None:
        return model.owner_id == user.pk
    return access.role_in(user, model.project_id) == Role.MANAGER


def create_model(user: Any, project_id: int | None, name: str, **fields: Any) -> RegisteredModel:
    check_name(name)
    if not may_register(user, project_id):
        raise RegistryError(PERMISSION, "Registering into this project takes a member's role.")
    namespace = RegisteredModel.namespace(user.pk, project_id)
    if namespace.count() >= MAX_MODELS_PER_NAMESPACE:
        raise RegistryError(EXHAUSTED, f"At most {MAX_MODELS_PER_NAMESPACE} models here.")
    try:
        with transaction.atomic():
            return RegisteredModel.objects.create(
                owner_id=user.pk, project_id=project_id, name=name, **fields
            )
    except IntegrityError:
        raise RegistryError(EXISTS, f"Registered Model (name={name}) already exists.") from None


def model_named(namespace, name: str) -> RegisteredModel:
    found = namespace.filter(name=name[:MAX_NAME_CHARS]).first()
    if found is None:
        raise RegistryError(NOT_FOUND, f"Registered Model with name={name[:300]} not found")
    return found


def version_of(model: RegisteredModel, version: Any) -> ModelVersion:
    text = str(version)
    if not text.isdigit() or len(text) > 9:
        raise RegistryError(INVALID, f"Version '{text[:30]}' is not a number.")
    found = model.versions.filter(version=int(text)).first()
    if found is None:
        raise RegistryError(
            NOT_FOUND, f"Model Version (name={model.name}, version={text}) not found"
        )
    return found


def set_alias(user: Any, model: RegisteredModel, alias: str, version: ModelVersion) -> None:
    check_alias(alias)
    target = f"{model.name}@{alias} -> version {version.version}"
    with audit.action(audit.Action.MODEL_ALIAS, user=user, cluster=version.cluster, target=target):
        _set_alias(user, model, alias, version)


def _set_alias(user: Any, model: RegisteredModel, alias: str, version: ModelVersion) -> None:
    with transaction.atomic():
        current = ModelAlias.objects.select_for_update().filter(model=model, alias=alias).first()
        if current is not None and current.protected and not may_set_protected(user, model):
            raise RegistryError(
                PERMISSION, f"The alias {alias} is protected: the project's managers move it."
            )
        if current is None and model.aliases.count() >= MAX_ALIASES_PER_MODEL:
            raise RegistryError(EXHAUSTED, f"A model has at most {MAX_ALIASES_PER_MODEL} aliases.")
        ModelAlias.objects.update_or_create(
            model=model, alias=alias, defaults={"version": version, "set_by_id": user.pk}
        )


def protect_alias(user: Any, model: RegisteredModel, alias: str, protected: bool) -> None:
    """Mark an alias protected (or not): the project's managers (a person's own model:
    the person)."""
    current = model.aliases.filter(alias=alias[:MAX_NAME_CHARS]).first()
    if current is None:
        raise RegistryError(NOT_FOUND, f"The model has no alias {alias[:100]}.")
    with audit.action(
        audit.Action.MODEL_ALIAS,
        user=user,
        cluster=current.version.cluster,
        target=f"{model.name}@{alias} {'protected' if protected else 'unprotected'}",
    ):
        if not may_set_protected(user, model):
            raise RegistryError(PERMISSION, "Only the project's managers protect an alias.")
        current.protected = protected
        current.save(update_fields=["protected", "updated_at"])


def delete_alias(user: Any, model: RegisteredModel, alias: str) -> None:
    current = model.aliases.filter(alias=alias[:MAX_NAME_CHARS]).first()
    if current is None:
        return
    with audit.action(
        audit.Action.MODEL_ALIAS,
        user=user,
        cluster=current.version.cluster,
        target=f"{model.name}@{alias} removed",
    ):
        if current.protected and not may_set_protected(user, model):
            raise RegistryError(
                PERMISSION, f"The alias {alias} is protected: the project's managers remove it."
            )
        current.delete()


# -- where the files are ---------------------------------------------------------------------


def _inside_work_dir(owner_id: int, cluster_id: int, path: str) -> Job:
    """The person's job whose work directory holds ``path`` on the cluster."""
    above = ancestors(path)
    job = (
        Job.objects.filter(owner_id=owner_id, cluster_id=cluster_id)
        .exclude(work_dir="")
        .filter(work_dir__in=above + [a + "/" for a in above])
        .order_by("-pk")
        .first()
    )
    if job is None:
        raise RegistryError(
            INVALID,
            "Register files inside one of your jobs' work directories "
            f"({path[:200]} is in none of them).",
        )
    return job


def absolute(path: str) -> str:
    path = path.removeprefix("file://")
    if not path.startswith("/") or "\x00" in path or len(path) > 4000:
        raise RegistryError(INVALID, "The files' path must be an absolute path on the cluster.")
    return posixpath.normpath(path)


def files_of(job: Job, source: str, run_id: str = "", model_id: str = "") -> Files:
    """Where ``source`` (``models:/<model id>``, ``runs:/<run id>/<path>``, or a path in a
    work directory), said by a call of ``job``'s, puts a version's files."""
    owner = job.owner_id
    if source.startswith("models:/m-") or model_id:
        wanted = model_id or source.removeprefix("models:/").split("/", 1)[0]
        logged = (
            LoggedModel.objects.filter(model_id=wanted[:64], job__owner_id=owner)
            .select_related("job", "run")
            .first()
        )
        if logged is None or not logged.artifact_path():
            raise RegistryError(NOT_FOUND, f"Logged model with ID '{wanted[:64]}' not found.")
        return Files(logged.job, logged.artifact_path(), logged.run, logged, logged.step)
    if source.startswith("runs:/"):
        run_part, _, rel = source.removeprefix("runs:/").partition("/")
        run = TrackedRun.objects.filter(run_id=run_part[:32], job__owner_id=owner).first()
        if run is None or not run.artifact_uri():
            raise RegistryError(NOT_FOUND, f"Run with id={run_part[:32]} not found")
        root = run.artifact_uri().removeprefix("file://")
        path = posixpath.normpath(posixpath.join(root, rel)) if rel else root
        if path != root and not path.startswith(root + "/"):
            raise RegistryError(INVALID, "The path must stay inside the run's artifacts.")
        return Files(run.job, path, run, None, None)
    path = absolute(source)
    found = _inside_work_dir(owner, job.cluster_id, path)
    run = TrackedRun.objects.filter(run_id=run_id[:32], job=found).first() if run_id else None
    return Files(found, path, run)


def register(
    user: Any,
    model: RegisteredModel,
    files: Files,
    *,
    source: str,
    description: str = "",
    tags: dict | None = None,
) -> ModelVersion:
    """A new version of ``model`` pointing at ``files``; its manifest is read next
    (tasks.read_manifest), PENDING_REGISTRATION until then."""
    if not may_register(user, model.project_id):
        raise RegistryError(PERMISSION, "Registering into this project takes a member's role.")
    metrics = {}
    if files.run is not None:
        metrics = {m["key"]: m["value"] for m in files.run.latest_metrics()[:100]}
    with audit.action(
        audit.Action.MODEL_REGISTER,
        user=user,
        cluster=files.job.cluster,
        target=f"{model.name} {files.path}",
    ):
        try:
            version = ModelVersion.add(
                model,
                cluster=files.job.cluster,
                path=files.path,
                source=source[:4096],
                job=files.job,
                run=files.run,
                logged_model=files.logged_model,
                step=files.step,
                metrics=metrics,
                registered_by_id=user.pk,
                description=description,
                tags=tags or {},
            )
        except ValueError as exc:
            raise RegistryError(EXHAUSTED, str(exc)) from None
    transaction.on_commit(lambda: tasks.read_manifest.delay(version.pk))
    return version
