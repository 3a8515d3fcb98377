"""The MLflow-compatible tracking API, beside a job's metrics upload:
``/api/v1/jobs/<id>/metrics/mlflow/api/2.0/mlflow/<endpoint>``, with the job's own metrics
token as MLflow's ``MLFLOW_TRACKING_TOKEN`` (every job is given both:
schedulers/on_node/wrapper.sh). What MLflow's Python client calls to log a run is served
(docs/use/existing-logging.md); anything else is an ``ENDPOINT_NOT_FOUND`` that
says so. Thin: messages in protocol.py, a run's logic on TrackedRun."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass

from django.db import IntegrityError, transaction
from django.http import HttpRequest, JsonResponse
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt

from jobs.models import Job
from metrics import ingest
from metrics.auth import job_for_upload
from metrics.views import JobIngestThrottle
from tracking import protocol
from tracking.models import LoggedModel, TrackedExperiment, TrackedRun
from tracking.protocol import ApiError

MAX_EXPERIMENTS_PER_PERSON = 1000
DEFAULT_EXPERIMENT = "Default"  # MLflow's experiment "0"


@dataclass
class Call:
    job: Job
    body: dict
    nbytes: int
    args: tuple[str, ...] = ()  # what a pattern endpoint's path holds (a model's id)

    def run(self) -> TrackedRun:
        """The run the call names: one of this job's (a token reaches its own runs only)."""
        run_id = protocol.text(self.body, "run_id", 32, required=False) or protocol.text(
            self.body, "run_uuid", 32
        )
        run = TrackedRun.objects.filter(run_id=run_id, job=self.job).select_related("job").first()
        if run is None:
            raise ApiError(protocol.NOT_FOUND, f"Run with id={run_id} not found")
        return run

    def most(self) -> int:
        """A search's ``max_results``, within the portal's bound."""
        bound = protocol.MAX_SEARCH_RESULTS
        return protocol.integer(self.body, "max_results", default=bound, low=1, high=bound)

    def experiment(self, experiment_id: str) -> TrackedExperiment:
        owner = self.job.owner_id
        if experiment_id in ("", "0"):
            found, _ = TrackedExperiment.objects.get_or_create(
                owner_id=owner, name=DEFAULT_EXPERIMENT
            )
            return found
        if not experiment_id.isdigit() or len(experiment_id) > 18:
            raise ApiError(protocol.NOT_FOUND, f"No Experiment with id={experiment_id} exists")
        experiment = TrackedExperiment.objects.filter(pk=int(experiment_id), owner_id=owner).first()
        if experiment is None:
            raise ApiError(protocol.NOT_FOUND, f"No Experiment with id={experiment_id} exists")
        return experiment


Handler = Callable[[Call], dict]
ENDPOINTS: dict[tuple[str, str], Handler] = {}
# Endpoints with an id in their path (``logged-models/{id}/tags``): (method, name) -> the
# name's pattern and the handler.
PATTERNS: dict[tuple[str, str], tuple[re.Pattern[str], Handler]] = {}


def endpoint(method: str, name: str) -> Callable[[Handler], Handler]:
    """Serve ``method name`` with the handler; a name with ``{id}`` takes one path segment
    (letters, digits, ``-`` and ``_``), given to the handler as ``call.args``. Other apps
    add theirs too (registry/: MLflow's Model Registry) from their ``ready()``."""

    def register(handler: Handler) -> Handler:
        if "{id}" in name:
            pattern = re.escape(name).replace(re.escape("{id}"), "([A-Za-z0-9_-]{1,64})")
            PATTERNS[(method, name)] = (re.compile(pattern + r"\Z"), handler)
        else:
            ENDPOINTS[(method, name)] = handler
        return handler

    return register


def handler_for(method: str, name: str) -> tuple[Handler | None, tuple[str, ...]]:
    if (method, name) in ENDPOINTS:
        return ENDPOINTS[(method, name)], ()
    for (want, _), (pattern, handler) in PATTERNS.items():
        if want == method and (found := pattern.match(name)):
            return handler, found.groups()
    return None, ()


@csrf_exempt
def api(request: HttpRequest, pk: int, endpoint: str) -> JsonResponse:
    try:
        job = authenticate(request, pk)
        handler, args = handler_for(request.method or "", endpoint)
        if handler is None:
            served = ", ".join(sorted(f"{m} {n}" for m, n in [*ENDPOINTS, *PATTERNS]))
            raise ApiError(
                protocol.NO_ENDPOINT,
                f"The portal's MLflow-compatible API does not serve {request.method} "
                f"{endpoint[:100]}; it serves {served}.",
            )
        throttle = JobIngestThrottle()
        request.auth = job  # type: ignore[attr-defined]  # what the throttle keys on
        if not throttle.allow_request(request, None):
            response = JsonResponse(
                ApiError(protocol.LIMITED, "Too many requests for this job.").body(), status=429
            )
            response["Retry-After"] = str(int(throttle.wait() or 1))
            return response
        return JsonResponse(handler(Call(job, read(request), len(request.body or b""), args)))
    except ApiError as exc:
        return JsonResponse(exc.body(), status=exc.status)


def authenticate(request: HttpRequest, pk: int) -> Job:
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise ApiError(
            protocol.UNAUTHENTICATED,
            "Send the job's token as MLFLOW_TRACKING_TOKEN (portal jobs have it set).",
        )
    job = job_for_upload(pk)
    if job is None or not ingest.token_matches(job, token.strip()):
        raise ApiError(protocol.PERMISSION, f"This token is not valid for job {pk}.")
    if job.is_final:  # a job's token serves it while it runs (as its uploads' does)
        raise ApiError(protocol.INVALID_STATE, f"Job {pk} has ended.")
    return Job.objects.select_related("owner").get(pk=job.pk)


def read(request: HttpRequest) -> dict:
    """The call's values: a GET's query, a POST's JSON object (at most MLflow's 1 MB)."""
    if request.method == "GET":
        return dict(request.GET.items())
    length = int(request.headers.get("Content-Length") or 0)
    if length > protocol.MAX_BODY_BYTES:
        raise ApiError(protocol.INVALID, f"The body is {length} bytes; at most 1,000,000.")
    if not request.body:
        return {}
    if len(request.body) > protocol.MAX_BODY_BYTES:  # (sent without a length)
        raise ApiError(protocol.INVALID, "The body is over 1,000,000 bytes.")
    try:
        body = json.loads(request.body)
    except (ValueError, RecursionError):
        raise ApiError(protocol.BAD_REQUEST, "The body is not JSON.") from None
    if not isinstance(body, dict):
        raise ApiError(protocol.BAD_REQUEST, "The body must be a JSON object.")
    return body


def _experiment_json(call: Call, experiment: TrackedExperiment) -> dict:
    root = f"file://{call.job.work_dir.rstrip('/')}/mlflow-artifacts" if call.job.work_dir else ""
    return protocol.experiment_json(
        str(experiment.pk), experiment.name, protocol.ms(experiment.created_at), root
    )


# -- experiments ---------------------------------------------------------------------------


@endpoint("GET", "experiments/get-by-name")
def get_experiment_by_name(call: Call) -> dict:
    name = protocol.text(call.body, "experiment_name", protocol.MAX_EXPERIMENT_NAME_CHARS)
    experiment = TrackedExperiment.objects.filter(owner_id=call.job.owner_id, name=name).first()
    if experiment is None and name == DEFAULT_EXPERIMENT:
        experiment = call.experiment("0")
    if experiment is None:
        raise ApiError(protocol.NOT_FOUND, f"Could not find experiment with name '{name}'")
    return {"experiment": _experiment_json(call, experiment)}


@endpoint("GET", "experiments/get")
def get_experiment(call: Call) -> dict:
    experiment = call.experiment(protocol.text(call.body, "experiment_id", 20))
    return {"experiment": _experiment_json(call, experiment)}


@endpoint("POST", "experiments/create")
def create_experiment(call: Call) -> dict:
    name = protocol.text(call.body, "name", protocol.MAX_EXPERIMENT_NAME_CHARS)
    owner = call.job.owner_id
    if TrackedExperiment.objects.filter(owner_id=owner).count() >= MAX_EXPERIMENTS_PER_PERSON:
        raise ApiError(
            protocol.EXHAUSTED, f"A person has at most {MAX_EXPERIMENTS_PER_PERSON} experiments."
        )
    try:
        with transaction.atomic():
            experiment = TrackedExperiment.objects.create(owner_id=owner, name=name)
    except IntegrityError:
        raise ApiError(protocol.EXISTS, f"Experiment(name={name}) already exists.") from None
    return {"experiment_id": str(experiment.pk)}


@endpoint("POST", "experiments/search")
def search_experiments(call: Call) -> dict:
    if call.body.get("filter"):
        raise ApiError(protocol.INVALID, "The portal does not filter experiments; ask by name.")
    most = call.most()
    call.experiment("0")  # MLflow lists its Default experiment
    found = TrackedExperiment.objects.filter(owner_id=call.job.owner_id).order_by("pk")[:most]
    return {"experiments": [_experiment_json(call, e) for e in found]}


# -- runs ------------------------------------------------------------------------------------


@endpoint("POST", "runs/create")
def create_run(call: Call) -> dict:
    experiment = call.experiment(str(call.body.get("experiment_id") or "0"))
    run = TrackedRun.start(
        call.job,
        experiment,
        name=protocol.text(call.body, "run_name", protocol.MAX_KEY_CHARS, required=False),
        start_time=protocol.integer(
            call.body, "start_time", default=protocol.ms(timezone.now()), low=0
        ),
        tags=protocol.pairs(call.body.get("tags"), "tags", protocol.MAX_TAG_VALUE_CHARS),
    )
    return {"run": run.json()}


@endpoint("GET", "runs/get")
def get_run(call: Call) -> dict:
    return {"run": call.run().json()}


@endpoint("POST", "runs/update")
def update_run(call: Call) -> dict:
    run = call.run()
    end = call.body.get("end_time")
    run.update(
        status=protocol.text(call.body, "status", 16, required=False),
        end_time=None if end in (None, "") else protocol.integer(call.body, "end_time", low=0),
        name=protocol.text(call.body, "run_name", protocol.MAX_KEY_CHARS, required=False),
    )
    return {"run_info": run.info_json()}


@endpoint("POST", "runs/search")
def search_runs(call: Call) -> dict:
    if call.body.get("filter"):
        raise ApiError(protocol.INVALID, "The portal does not filter runs; ask by run id.")
    ids = call.body.get("experiment_ids") or []
    if not isinstance(ids, list) or len(ids) > 100:
        raise ApiError(protocol.INVALID, "'experiment_ids' is a list of at most 100 ids.")
    experiments = [call.experiment(str(i)) for i in ids]
    most = call.most()
    runs = TrackedRun.objects.filter(job=call.job, experiment__in=experiments).select_related(
        "job"
    )[:most]
    return {"runs": [r.json() for r in runs]}


@endpoint("POST", "runs/log-batch")
def log_batch(call: Call) -> dict:
    run = call.run()
    run.log(
        protocol.metrics(call.body.get("metrics")),
        protocol.pairs(call.body.get("params"), "params", protocol.MAX_PARAM_VALUE_CHARS),
        protocol.pairs(call.body.get("tags"), "tags", protocol.MAX_TAG_VALUE_CHARS),
        call.nbytes,
    )
    return {}


@endpoint("POST", "runs/log-metric")
def log_metric(call: Call) -> dict:
    call.run().log([protocol.metric(call.body)], {}, {}, call.nbytes)
    return {}


@endpoint("POST", "runs/log-parameter")
def log_parameter(call: Call) -> dict:
    params = protocol.pairs([call.body], "params", protocol.MAX_PARAM_VALUE_CHARS)
    call.run().log([], params, {}, call.nbytes)
    return {}


@endpoint("POST", "runs/set-tag")
def set_tag(call: Call) -> dict:
    tags = protocol.pairs([call.body], "tags", protocol.MAX_TAG_VALUE_CHARS)
    call.run().log([], {}, tags, call.nbytes)
    return {}


HISTORY_PAGE = 25_000  # MLflow's own page of a metric's history


@endpoint("GET", "metrics/get-history")
def get_metric_history(call: Call) -> dict:
    """A metric's points in the order they were logged, a page at a time (the client
    follows ``next_page_token``)."""
    from metrics.models import MetricPoint  # noqa: PLC0415

    run = call.run()
    key = run.metric_key(protocol.text(call.body, "metric_key", 250))
    series = run.series().filter(key=key).first()
    if series is None:
        return {"metrics": []}
    most = protocol.integer(
        call.body, "max_results", default=HISTORY_PAGE, low=1, high=HISTORY_PAGE
    )
    after = protocol.integer(call.body, "page_token", default=-1, low=-1)
    rows = list(
        MetricPoint.objects.filter(series=series, seq__gt=after)
        .order_by("seq")
        .values_list("seq", "step", "value", "time")[: most + 1]
    )
    answer: dict = {
        "metrics": [
            {"key": run.mlflow_key(key), "value": v, "timestamp": int(t * 1000), "step": st}
            for _, st, v, t in rows[:most]
        ]
    }
    if len(rows) > most:
        answer["next_page_token"] = str(rows[most - 1][0])
    return answer


@endpoint("POST", "runs/log-inputs")
def log_inputs(call: Call) -> dict:
    """Datasets a run used (``mlflow.log_input``): accepted so a script goes on; not kept."""
    call.run()
    return {}


# -- logged models (MLflow 3's log_model) ---------------------------------------------------

MAX_LOGGED_MODELS_PER_JOB = 1000


def _logged_model(call: Call, model_id: str) -> LoggedModel:
    """One of this job owner's logged models (a model logged by another of their jobs is
    found too: ``register_model`` may name one)."""
    found = (
        LoggedModel.objects.filter(model_id=model_id, job__owner_id=call.job.owner_id)
        .select_related("job", "run")
        .first()
    )
    if found is None:
        raise ApiError(protocol.NOT_FOUND, f"Logged model with ID '{model_id[:64]}' not found.")
    return found


@endpoint("POST", "logged-models")
def create_logged_model(call: Call) -> dict:
    experiment = call.experiment(str(call.body.get("experiment_id") or "0"))
    run_id = protocol.text(call.body, "source_run_id", 32, required=False)
    run = None
    if run_id:
        run = TrackedRun.objects.filter(run_id=run_id, job=call.job).first()
        if run is None:
            raise ApiError(protocol.NOT_FOUND, f"Run with id={run_id} not found")
    if LoggedModel.objects.filter(job=call.job).count() >= MAX_LOGGED_MODELS_PER_JOB:
        raise ApiError(
            protocol.EXHAUSTED, f"A job logs at most {MAX_LOGGED_MODELS_PER_JOB} models."
        )
    model = LoggedModel.objects.create(
        job=call.job,
        experiment=experiment,
        run=run,
        name=protocol.text(call.body, "name", protocol.MAX_KEY_CHARS, required=False) or "model",
        model_type=protocol.text(call.body, "model_type", 100, required=False),
        params=protocol.pairs(call.body.get("params"), "params", protocol.MAX_PARAM_VALUE_CHARS),
        tags=protocol.pairs(call.body.get("tags"), "tags", protocol.MAX_TAG_VALUE_CHARS),
    )
    return {"model": model.json()}


@endpoint("GET", "logged-models/{id}")
def get_logged_model(call: Call) -> dict:
    return {"model": _logged_model(call, call.args[0]).json()}


@endpoint("PATCH", "logged-models/{id}")
def finalize_logged_model(call: Call) -> dict:
    model = _logged_model(call, call.args[0])
    status = protocol.text(call.body, "status", 32)
    if status not in LoggedModel.Status.values:
        raise ApiError(protocol.INVALID, f"'status' must be one of {LoggedModel.Status.values}.")
    model.status = status
    model.save(update_fields=["status", "updated_at"])
    return {"model": model.json()}


@endpoint("PATCH", "logged-models/{id}/tags")
def set_logged_model_tags(call: Call) -> dict:
    model = _logged_model(call, call.args[0])
    tags = protocol.pairs(call.body.get("tags"), "tags", protocol.MAX_TAG_VALUE_CHARS)
    with transaction.atomic():
        locked = LoggedModel.objects.select_for_update().get(pk=model.pk)
        merged = {**locked.tags, **tags}
        if len(merged) > protocol.MAX_TAGS_PER_RUN:
            raise ApiError(
                protocol.EXHAUSTED, f"A model has at most {protocol.MAX_TAGS_PER_RUN} tags."
            )
        locked.tags = merged
        locked.save(update_fields=["tags", "updated_at"])
    return {}


# MLflow's client asks ``name = '<name>'`` (register_model) and nothing else of a search.
_NAME_FILTER = re.compile(r"\s*name\s*=\s*'([^'\\]{1,250})'\s*\Z")


@endpoint("POST", "logged-models/search")
def search_logged_models(call: Call) -> dict:
    ids = call.body.get("experiment_ids") or []
    if not isinstance(ids, list) or len(ids) > 100:
        raise ApiError(protocol.INVALID, "'experiment_ids' is a list of at most 100 ids.")
    experiments = [call.experiment(str(i)) for i in ids]
    found = LoggedModel.objects.filter(job__owner_id=call.job.owner_id).select_related("job", "run")
    if experiments:
        found = found.filter(experiment__in=experiments)
    wanted = protocol.text(call.body, "filter", 1000, required=False)
    if wanted:
        name = _NAME_FILTER.match(wanted)
        if name is None:
            raise ApiError(
                protocol.INVALID, "The portal filters logged models by name = '<name>' only."
            )
        found = found.filter(name=name[1])
    return {"models": [m.json() for m in found[: call.most()]]}


@endpoint("POST", "runs/outputs")
def log_outputs(call: Call) -> dict:
    """The models a run produced, at which step (``log_model``): the step is kept."""
    run = call.run()
    models = call.body.get("models") or []
    if not isinstance(models, list) or len(models) > 100:
        raise ApiError(protocol.INVALID, "'models' is a list of at most 100 models.")
    for item in models:
        if not isinstance(item, dict):
            raise ApiError(protocol.INVALID, "Each of 'models' is an object.")
        model_id = protocol.text(item, "model_id", 64)
        step = protocol.integer(item, "step", default=0, low=0, high=protocol.STEP_LIMIT)
        LoggedModel.objects.filter(model_id=model_id, job=call.job).update(run=run, step=step)
    return {}
