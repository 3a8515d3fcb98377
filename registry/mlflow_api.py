"""MLflow's Model Registry REST API, on the tracking URI a job is given (tracking/views.py
dispatches; these handlers join it from RegistryConfig.ready): what ``register_model``,
``MlflowClient``'s registered-model and model-version calls (create, get, search, update,
delete, tags, aliases; no stages) and ``models:/name@alias`` ask. A job's token acts as
its owner, in its project's namespace when it has one (service.py, whose RegistryError is
MLflow's ApiError)."""

from __future__ import annotations

import re

from django.db.models import Q
from django.db.models.fields.json import KeyTextTransform

from registry import service
from registry.models import (
    MAX_DESCRIPTION_CHARS,
    MAX_NAME_CHARS,
    MAX_TAGS,
    ModelVersion,
    RegisteredModel,
)
from tracking import protocol
from tracking.protocol import ApiError
from tracking.views import Call, endpoint


def _namespace(call: Call):
    return RegisteredModel.namespace(call.job.owner_id, call.job.project_id)


def _model(call: Call, field: str = "name") -> RegisteredModel:
    return service.model_named(_namespace(call), protocol.text(call.body, field, MAX_NAME_CHARS))


def _version(call: Call) -> ModelVersion:
    return service.version_of(_model(call), protocol.text(call.body, "version", 12))


def version_json(version: ModelVersion, aliases: list[str] | None = None) -> dict:
    answer = {
        "name": version.model.name,
        "version": str(version.version),
        "creation_timestamp": protocol.ms(version.created_at),
        "last_updated_timestamp": protocol.ms(version.updated_at),
        "current_stage": "None",
        "description": version.description,
        "source": version.source,
        "run_id": version.run.run_id if version.run else "",
        "status": version.status,
        "status_message": version.status_message,
        "run_link": "",
        "tags": protocol.listed(version.tags),
        "aliases": sorted(
            aliases if aliases is not None else version.aliases.values_list("alias", flat=True)
        ),
    }
    if version.logged_model is not None:
        answer["model_id"] = version.logged_model.model_id
    return answer


def model_json(model: RegisteredModel) -> dict:
    latest = model.versions.select_related("model", "run", "logged_model").first()
    return {
        "name": model.name,
        "creation_timestamp": protocol.ms(model.created_at),
        "last_updated_timestamp": protocol.ms(model.updated_at),
        "description": model.description,
        "latest_versions": [version_json(latest, [])] if latest else [],
        "aliases": [
            {"alias": a, "version": str(v)}
            for a, v in model.aliases.values_list("alias", "version__version")
        ],
        "tags": protocol.listed(model.tags),
    }


def _tags(call: Call) -> dict[str, str]:
    tags = protocol.pairs(call.body.get("tags"), "tags", protocol.MAX_TAG_VALUE_CHARS)
    if len(tags) > MAX_TAGS:
        raise ApiError(protocol.EXHAUSTED, f"At most {MAX_TAGS} tags.")
    return tags


def _merge_tag(row, call: Call) -> None:
    key = protocol.text(call.body, "key", protocol.MAX_KEY_CHARS)
    value = protocol.text(call.body, "value", protocol.MAX_TAG_VALUE_CHARS, required=False)
    merged = {**row.tags, key: value}
    if len(merged) > MAX_TAGS:
        raise ApiError(protocol.EXHAUSTED, f"At most {MAX_TAGS} tags.")
    row.tags = merged
    row.save(update_fields=["tags", "updated_at"])


def _describe(row, call: Call) -> None:
    if "description" in call.body:
        row.description = protocol.text(
            call.body, "description", MAX_DESCRIPTION_CHARS, required=False
        )
        row.save(update_fields=["description", "updated_at"])


def _drop_tag(row, call: Call) -> None:
    row.tags.pop(protocol.text(call.body, "key", protocol.MAX_KEY_CHARS), None)
    row.save(update_fields=["tags", "updated_at"])


# -- registered models ---------------------------------------------------------------------


@endpoint("POST", "registered-models/create")
def create_registered_model(call: Call) -> dict:
    model = service.create_model(
        call.job.owner,
        call.job.project_id,
        protocol.text(call.body, "name", MAX_NAME_CHARS),
        description=protocol.text(call.body, "description", MAX_DESCRIPTION_CHARS, required=False),
        tags=_tags(call),
    )
    return {"registered_model": model_json(model)}


@endpoint("GET", "registered-models/get")
def get_registered_model(call: Call) -> dict:
    return {"registered_model": model_json(_model(call))}


_NAME_IS = re.compile(r"name\s*=\s*'([^'\\]{1,256})'\Z")
_NAME_LIKE = re.compile(r"name\s+(I?LIKE)\s+'([^'\\]{1,256})'\Z", re.I)
_TAG_IS = re.compile(
    r"tags?\.(?:`([^`]{1,250})`|([A-Za-z0-9_.]{1,250}))\s*(!?=)\s*'([^'\\]{0,1000})'\Z"
)


def _filtered(found, wanted: str):
    """MLflow's filters the client sends, joined by AND: ``name = 'x'``, ``name [I]LIKE
    'x%'``, ``tag.`key` [!]= 'value'`` (the client adds ``tag.`mlflow.prompt.is_prompt`
    != 'true'`` to every search); nothing else."""
    if not wanted:
        return found
    for clause in re.split(r"\s+AND\s+", wanted.strip(), flags=re.I)[:10]:
        if equal := _NAME_IS.match(clause):
            found = found.filter(name=equal[1])
        elif like := _NAME_LIKE.match(clause):
            pattern = "".join(
                ".*" if c == "%" else "." if c == "_" else re.escape(c) for c in like[2]
            )
            lookup = "name__iregex" if like[1].upper() == "ILIKE" else "name__regex"
            found = found.filter(**{lookup: f"^{pattern}$"})
        elif tag := _TAG_IS.match(clause):
            # (a key transform: JSON containment is not SQLite's)
            found = found.alias(_tag=KeyTextTransform(tag[1] or tag[2], "tags"))
            if tag[3] == "=":
                found = found.filter(_tag=tag[4])
            else:
                found = found.filter(~Q(_tag=tag[4]) | Q(_tag__isnull=True))
        else:
            raise ApiError(
                protocol.INVALID,
                "The portal filters by name = '...', name LIKE '...' and tag.`key` = '...', "
                "joined by AND.",
            )
    return found


def _paged(call: Call, found, key: str, render, default: int = 100) -> dict:
    """A page of ``found`` as MLflow's searches answer (``next_page_token``: an offset)."""
    most = protocol.integer(call.body, "max_results", default=default, low=1, high=1000)
    start = protocol.integer(call.body, "page_token", default=0, low=0, high=10**9)
    rows = list(found[start : start + most + 1])
    answer: dict = {key: [render(row) for row in rows[:most]]}
    if len(rows) > most:
        answer["next_page_token"] = str(start + most)
    return answer


@endpoint("GET", "registered-models/search")
def search_registered_models(call: Call) -> dict:
    found = _filtered(_namespace(call), protocol.text(call.body, "filter", 1000, required=False))
    return _paged(call, found.order_by("name"), "registered_models", model_json)


@endpoint("PATCH", "registered-models/update")
def update_registered_model(call: Call) -> dict:
    model = _model(call)
    _describe(model, call)
    return {"registered_model": model_json(model)}


@endpoint("DELETE", "registered-models/delete")
def delete_registered_model(call: Call) -> dict:
    _model(call).delete()
    return {}


@endpoint("POST", "registered-models/set-tag")
def set_registered_model_tag(call: Call) -> dict:
    _merge_tag(_model(call), call)
    return {}


@endpoint("DELETE", "registered-models/delete-tag")
def delete_registered_model_tag(call: Call) -> dict:
    _drop_tag(_model(call), call)
    return {}


@endpoint("POST", "registered-models/alias")
def set_registered_model_alias(call: Call) -> dict:
    model = _model(call)
    version = service.version_of(model, protocol.text(call.body, "version", 12))
    service.set_alias(call.job.owner, model, protocol.text(call.body, "alias", 255), version)
    return {}


@endpoint("DELETE", "registered-models/alias")
def delete_registered_model_alias(call: Call) -> dict:
    service.delete_alias(call.job.owner, _model(call), protocol.text(call.body, "alias", 255))
    return {}


@endpoint("GET", "registered-models/alias")
def get_model_version_by_alias(call: Call) -> dict:
    model = _model(call)
    alias = protocol.text(call.body, "alias", 255)
    found = model.aliases.filter(alias=alias).select_related("version__model").first()
    if found is None:
        raise ApiError(
            protocol.NOT_FOUND, f"Registered model alias {alias} not found for {model.name}."
        )
    return {"model_version": version_json(found.version)}


@endpoint("POST", "registered-models/get-latest-versions")
def get_latest_versions(call: Call) -> dict:
    if call.body.get("stages"):
        raise ApiError(protocol.INVALID, "The portal has no stages: use aliases.")
    latest = _model(call).versions.select_related("model", "run", "logged_model").first()
    return {"model_versions": [version_json(latest)] if latest else []}


# -- model versions ------------------------------------------------------------------------


@endpoint("POST", "model-versions/create")
def create_model_version(call: Call) -> dict:
    model = _model(call)
    source = protocol.text(call.body, "source", 4096)
    files = service.files_of(
        call.job,
        source,
        run_id=protocol.text(call.body, "run_id", 32, required=False),
        model_id=protocol.text(call.body, "model_id", 64, required=False),
    )
    version = service.register(
        call.job.owner,
        model,
        files,
        source=source,
        description=protocol.text(call.body, "description", MAX_DESCRIPTION_CHARS, required=False),
        tags=_tags(call),
    )
    return {"model_version": version_json(version, [])}


@endpoint("GET", "model-versions/get")
def get_model_version(call: Call) -> dict:
    return {"model_version": version_json(_version(call))}


@endpoint("PATCH", "model-versions/update")
def update_model_version(call: Call) -> dict:
    version = _version(call)
    _describe(version, call)
    return {"model_version": version_json(version)}


@endpoint("DELETE", "model-versions/delete")
def delete_model_version(call: Call) -> dict:
    _version(call).delete()
    return {}


@endpoint("POST", "model-versions/set-tag")
def set_model_version_tag(call: Call) -> dict:
    _merge_tag(_version(call), call)
    return {}


@endpoint("DELETE", "model-versions/delete-tag")
def delete_model_version_tag(call: Call) -> dict:
    _drop_tag(_version(call), call)
    return {}


_RUN_IS = re.compile(r"\s*run_id\s*=\s*'([0-9a-f]{32})'\s*\Z")


@endpoint("GET", "model-versions/search")
def search_model_versions(call: Call) -> dict:
    wanted = protocol.text(call.body, "filter", 1000, required=False)
    found = ModelVersion.objects.filter(model__in=_namespace(call)).select_related(
        "model", "run", "logged_model"
    )
    if run := _RUN_IS.match(wanted or ""):
        found = found.filter(run__run_id=run[1])
    elif wanted:
        found = found.filter(model__in=_filtered(_namespace(call), wanted))
    ordered = found.order_by("model__name", "-version")
    return _paged(call, ordered, "model_versions", version_json, default=200)


@endpoint("GET", "model-versions/get-download-uri")
def get_model_version_download_uri(call: Call) -> dict:
    """Where the files are: the node reads them in place (no copy, no download)."""
    version = _version(call)
    if version.status == ModelVersion.Status.FAILED:
        raise ApiError(
            protocol.INVALID_STATE, f"Version {version.version} failed: {version.status_message}"
        )
    return {"artifact_uri": version.path}
