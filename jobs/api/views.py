"""REST API views: thin; the model and the launch form do the work."""

from __future__ import annotations

from datetime import UTC, datetime

from django.db import transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiExample,
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    inline_serializer,
)
from rest_framework import (
    mixins,
    pagination,
    serializers,
    status,
    viewsets,
)
from rest_framework.decorators import action
from rest_framework.exceptions import (
    APIException,
    PermissionDenied,
    ValidationError,
)
from rest_framework.response import Response

from catalog.models import ContainerImage, SessionApp
from clusters import files, ssh
from clusters.models import Cluster
from common.api_errors import RefuseNul
from identity import audit
from jobs import lifecycle, listing
from jobs.api.serializers import (
    ClusterSerializer,
    ContainerSerializer,
    JobAnnotationsSerializer,
    JobCreateSerializer,
    JobDetailSerializer,
    JobSerializer,
    SessionAppSerializer,
)
from jobs.launch import calendar
from jobs.models import Job
from jobs.models import annotations as tagging
from projects import access


class ClusterError(APIException):
    """The cluster did not answer as it should (formatted like every other API error)."""

    status_code = status.HTTP_502_BAD_GATEWAY
    default_code = "cluster_error"


class Pages(pagination.PageNumberPagination):
    page_size = 20
    page_size_query_param = "page_size"
    max_page_size = 200


class ContainerViewSet(RefuseNul, viewsets.ReadOnlyModelViewSet):
    """The catalog: images offered for new jobs."""

    serializer_class = ContainerSerializer
    lookup_field = "slug"
    pagination_class = None

    def get_queryset(self):
        return ContainerImage.objects.offered().prefetch_related("tags")


class SessionAppViewSet(RefuseNul, viewsets.ReadOnlyModelViewSet):
    """The apps a centre added (kind app): what each needs on a launch request."""

    serializer_class = SessionAppSerializer
    lookup_field = "slug"
    pagination_class = None

    def get_queryset(self):
        return SessionApp.objects.offered().select_related("image")


class ClusterViewSet(RefuseNul, viewsets.ReadOnlyModelViewSet):
    """Clusters with their partitions, GPU types and limits."""

    serializer_class = ClusterSerializer
    lookup_field = "name"
    pagination_class = None

    def get_queryset(self):
        return Cluster.objects.filter(enabled=True).prefetch_related(
            "partitions", "partitions__cluster__gpu_types"
        )


JOB_FILTERS = [
    OpenApiParameter("state", str, description="A state, several comma-separated, or 'active'."),
    OpenApiParameter("container", str, description="Catalog slug."),
    OpenApiParameter("created_after", OpenApiTypes.DATETIME),
    OpenApiParameter("created_before", OpenApiTypes.DATETIME),
    OpenApiParameter(
        "experiment",
        str,
        description="An experiment's id: its trials' jobs; 'none': only jobs outside experiments.",
    ),
]


def _utc(name: str, text: str) -> datetime:
    """An ISO 8601 date-time as UTC (databases refuse odd offsets such as +20:02)."""
    try:
        when = parse_datetime(text)
        if when is not None:
            if timezone.is_naive(when):
                when = timezone.make_aware(when)
            return when.astimezone(UTC)
    except (ValueError, OverflowError):
        pass
    raise ValidationError({name: ["Use an ISO 8601 date and time, e.g. 2026-01-31T12:00:00Z."]})


# The one error format (common.api_errors), for the schema.
ERROR = inline_serializer(
    "Error",
    {
        "error": inline_serializer(
            "ErrorBody",
            {
                "status": serializers.IntegerField(),
                "code": serializers.CharField(),
                "message": serializers.CharField(),
                "fields": serializers.DictField(child=serializers.ListField()),
            },
        )
    },
)

CREATE_DESCRIPTION = """Launch a batch job, a notebook or a TensorBoard session, as the launch page does.

Every field is optional. `kind` is `batch` unless you ask for a `notebook` or `tensorboard`
(the runs under `notebook_dir`; no GPU); everything else a
request leaves out is filled in exactly as on the launch page: the first image of the
catalog that is not deprecated, the first cluster you have an account on and its default
partition, your home directory (`workdir`); GPUs, CPUs, memory and walltime from the partition's defaults for that image
(no GPU for an image without GPU support or a partition without GPUs; a `gpu_type` alone
asks for one GPU; `gpus` alone takes the partition's first GPU type, none for 0); a batch
job without `command` runs the image's own default command; a notebook opens in the folder
of your last notebook. The request is then checked against the partition's limits and the
image (the same `Job.clean()` as the page), field by field.

Answers `201` with the job in state `queued`; it is submitted to the cluster at once
(follow it with `GET /api/v1/jobs/{id}/`, whose `state` moves through `pending`, `running`
and a final state). A refused request is a `400` that names each field and says what would
be accepted; nothing is created."""


class JobViewSet(
    RefuseNul,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    viewsets.GenericViewSet,
):
    """The jobs the user may see (projects/access.py: their own, their projects' that are not
    private; staff: everyone's). Another's job is a 404; acting on a colleague's, a 403."""

    queryset = Job.objects.none()  # tells the schema the id is an integer; get_queryset() serves
    serializer_class = JobSerializer
    pagination_class = Pages

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # schema generation
            return Job.objects.none()
        # Four relations joined, the optional three read apart: PostgreSQL spent 15 ms
        # planning the join of all seven for each page (0.6 ms for four; the rows
        # themselves took 0.3 ms to find), more than the rest of the request.
        jobs = (
            Job.objects.visible_to(self.request.user)
            .select_related("image", "cluster", "partition", "owner")
            .prefetch_related("session", "trial", "project", "tags", "app")
        )
        if self.action == "retrieve":
            return jobs.prefetch_related("events")
        if self.action != "list":
            return jobs
        params = self.request.query_params
        if params.get("state"):
            wanted = set(params["state"].split(","))
            if "active" in wanted:
                wanted |= set(Job.ACTIVE_STATES) - {"active"}
                wanted.discard("active")
            unknown = wanted - set(Job.State.values)
            if unknown:
                raise ValidationError(
                    {
                        "state": [
                            f"Unknown state(s) {', '.join(sorted(unknown))}; use "
                            f"{', '.join(Job.State.values)} or active."
                        ]
                    }
                )
            jobs = jobs.filter(state__in=wanted)
        if params.get("container"):
            jobs = jobs.filter(image__slug=params["container"])
        if experiment := params.get("experiment"):
            if experiment == "none":
                jobs = jobs.filter(trial__isnull=True)
            elif experiment.isascii() and experiment.isdigit() and len(experiment) <= 18:
                jobs = jobs.filter(trial__experiment_id=int(experiment))
            else:
                raise ValidationError({"experiment": ["An experiment's id, or none."]})
        for name, lookup in (("created_after", "gte"), ("created_before", "lt")):
            if params.get(name):
                jobs = jobs.filter(**{f"created_at__{lookup}": _utc(name, params[name])})
        return jobs

    @extend_schema(
        summary="List your jobs",
        description="Your jobs, newest first (staff: everyone's), 20 per page, filtered by "
        "state, image, creation time and experiment.",
        parameters=JOB_FILTERS,
    )
    def list(self, request, *args, **kwargs):
        # A page is kept until a job the person sees changes (jobs/listing.py). Its links
        # to the next and previous pages are absolute: the whole URL names the page.
        def page() -> dict:
            return super(JobViewSet, self).list(request, *args, **kwargs).data

        return Response(listing.cached(request.user, request.build_absolute_uri(), page))

    def retrieve(self, request, *args, **kwargs):
        job = self.get_object()
        # The job's row and its events are two reads: a change committed between them is
        # listed as an event that the row does not show yet (a follower would label it with
        # the old node). A state change writes both at once, so the read is done again.
        events = job.events.all()
        if events and events[len(events) - 1].to_state != job.state:
            job = self.get_object()
        return Response(self.get_serializer(job).data)

    def get_object_to_act(self) -> Job:
        """The job if the person may act on it (projects/access.py): 404 if they may not see
        it, 403 if they see it as a member of its project."""
        job = self.get_object()
        if not access.may_act(self.request.user, job.owner_id):
            raise PermissionDenied("Only the job's owner (or staff) may change it.")
        return job

    def get_serializer_class(self):
        return JobDetailSerializer if self.action == "retrieve" else JobSerializer

    @extend_schema(
        summary="Launch a job",
        description=CREATE_DESCRIPTION,
        request=JobCreateSerializer,
        responses={
            201: JobSerializer,
            400: OpenApiResponse(
                ERROR, description="Refused: each field that is wrong, and why. Nothing created."
            ),
        },
        examples=[
            OpenApiExample(
                "A CPU job with the partition's defaults",
                value={"partition": "cpu", "command": "python train.py --epochs 10"},
                request_only=True,
            ),
            OpenApiExample(
                "A notebook with two GPUs",
                value={"kind": "notebook", "container": "pytorch", "gpus": 2, "time_limit": 120},
                request_only=True,
            ),
            OpenApiExample(
                "Too many GPUs",
                value={
                    "error": {
                        "status": 400,
                        "code": "invalid",
                        "message": "Please correct: gpus.",
                        "fields": {"gpus": ["Partition gpu allows at most 4 GPU(s) per job."]},
                    }
                },
                response_only=True,
                status_codes=["400"],
            ),
        ],
    )
    def create(self, request, *args, **kwargs):
        incoming = JobCreateSerializer(data=request.data, context={"request": request})
        incoming.is_valid(raise_exception=True)
        job = lifecycle.launch(incoming.validated_data["form"])
        body = dict(JobSerializer(job, context={"request": request}).data)
        # What the person should know and the job cannot say yet (a maintenance it would
        # run into: jobs/launch/calendar.py).
        clash = calendar.for_job(job, request.user)
        body["warnings"] = [clash.text] if clash else []
        return Response(body, status=status.HTTP_201_CREATED)

    @extend_schema(
        summary="Change a job's note or tags",
        request=JobAnnotationsSerializer,
        responses={200: JobSerializer},
    )
    def partial_update(self, request, *args, **kwargs):
        """Its owner changes the job's note (`notes`) and tags: `tags` replaces them all,
        `add_tags`/`remove_tags` change some. Staff see others' jobs but change only their own
        (403); bounds: 32 tags of one word each, a note of 10,000 characters."""
        job = self.get_object()
        if job.owner_id != request.user.pk:
            raise PermissionDenied("Only the job's owner changes its tags and note.")
        incoming = JobAnnotationsSerializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        change = incoming.validated_data
        try:
            with transaction.atomic():
                if "notes" in change:
                    job.set_notes(change["notes"])
                if "tags" in change:
                    job.set_tags(change["tags"])
                if "add_tags" in change or "remove_tags" in change:
                    job.change_tags(change.get("add_tags", ()), change.get("remove_tags", ()))
        except tagging.BadAnnotation as exc:
            field = "notes" if "note" in str(exc).lower() else "tags"
            raise ValidationError({field: [str(exc)]}) from None
        job = self.get_object()  # its tags anew (the first read prefetched the old ones)
        return Response(JobSerializer(job, context={"request": request}).data)

    @extend_schema(request=None, responses={202: JobSerializer})
    @action(detail=True, methods=["post"])
    def cancel(self, request, pk=None):
        """Cancel the job (202: the cancellation is on its way; 200 if it had ended)."""
        job = self.get_object_to_act()
        if not lifecycle.cancel(job, by=request.user):
            return Response(JobSerializer(job, context={"request": request}).data)
        job.refresh_from_db()
        return Response(
            JobSerializer(job, context={"request": request}).data, status=status.HTTP_202_ACCEPTED
        )

    @extend_schema(request=None, responses={202: JobSerializer})
    @action(detail=True, methods=["post"])
    def release(self, request, pk=None):
        """Release a held job (202), e.g. one Slurm holds after its node failed to start it;
        409 if it is not held."""
        job = self.get_object_to_act()
        if not lifecycle.release(job, by=request.user):
            raise Conflict(f"Job {job.pk} is not held.")
        return Response(
            JobSerializer(job, context={"request": request}).data, status=status.HTTP_202_ACCEPTED
        )

    @extend_schema(
        parameters=[
            OpenApiParameter("stream", str, enum=[*files.LOG_STREAMS]),
            OpenApiParameter(
                "offset",
                int,
                description="Byte offset: return what follows it (send the last answer's "
                "next_offset to follow a log). Without it: the end of the log.",
            ),
        ]
    )
    @action(detail=True, methods=["get"])
    def logs(self, request, pk=None):
        """The end of the job's stdout or stderr, or what follows ``offset``."""
        job = self.get_object()
        stream = request.query_params.get("stream", "stdout")
        if stream not in files.LOG_STREAMS:
            raise ValidationError({"stream": ["Use stdout or stderr."]})
        offset = request.query_params.get("offset")
        if offset is not None:
            if not (offset.isascii() and offset.isdigit()) or int(offset) > 2**62:
                raise ValidationError({"offset": ["Use a byte offset: a whole number >= 0."]})
            offset = int(offset)
        try:
            tail = audit.read_job_log(request.user, job, stream, offset)
        except ssh.ClusterError as exc:
            raise ClusterError(f"Could not read the log from {job.cluster.name}: {exc}") from None
        return Response(
            {
                "stream": stream,
                "text": tail.text,
                "size": tail.size,
                "truncated": tail.truncated,
                "offset": tail.start,
                "next_offset": tail.end,
                "final": job.is_final,
            }
        )


class Conflict(APIException):
    status_code = status.HTTP_409_CONFLICT
    default_code = "conflict"
