"""Experiment pages: the list with a spec form, and one experiment's live page."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from catalog.models import ContainerImage
from common import jsonfast
from common.throttle import throttled
from experiments import report, service, spec
from experiments.models import Experiment
from projects import access, links

# The spec the form starts from: the demo experiment (docs/examples/), with the first
# offered image when the demo's is not in the catalog.
EXAMPLE = Path(settings.BASE_DIR) / "docs" / "examples" / "digits-sweep.yaml"
DEMO_IMAGE = "digits-sweep-demo"


def example_spec() -> str:
    text = EXAMPLE.read_text()
    if not ContainerImage.objects.offered().filter(slug=DEMO_IMAGE).exists():
        first = ContainerImage.objects.offered().first()
        text = text.replace(
            f"container: {DEMO_IMAGE}", f"container: {first.slug if first else 'IMAGE'}"
        )
    return text


def get_experiment_for_user(request, pk: int) -> Experiment:
    """The experiment if the user may see it (projects/access.py: owner, staff, its project's
    members); 404 otherwise."""
    return get_object_or_404(
        Experiment.objects.visible_to(request.user).select_related("owner", "cluster"), pk=pk
    )


@login_required
def experiments(request):
    text, errors = example_spec(), {}
    if request.method == "POST":
        text = request.POST.get("spec", "").replace("\r\n", "\n")
        try:
            experiment = service.create(request.user, text)
        except spec.SpecError as exc:
            errors = exc.errors  # the spec stays in the box, nothing is lost
        else:
            return redirect("experiment-detail", experiment.pk)
    rows = report.summaries(
        list(Experiment.objects.visible_to(request.user).select_related("owner", "cluster")[:100])
    )
    return render(
        request,
        "frontend/experiments.html",
        {"rows": rows, "spec_text": text, "errors": errors},
        status=400 if errors else 200,
    )


@login_required
def experiment_detail(request, pk: int):
    experiment = get_experiment_for_user(request, pk)
    return render(
        request,
        "frontend/experiment_detail.html",
        {
            "experiment": experiment,
            "summary": report.summary(experiment),
            **links.form_context(request.user, experiment=experiment),
        },
    )


@login_required
@throttled("cluster-pages", json=True)
def experiment_data(request, pk: int):
    """Everything the page draws, polled while the experiment runs."""
    return jsonfast.JsonResponse(report.detail(get_experiment_for_user(request, pk)))


@login_required
def experiment_export(request, pk: int):
    experiment = get_experiment_for_user(request, pk)
    response = HttpResponse(report.as_csv(experiment), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="experiment-{experiment.pk}.csv"'
    return response


@login_required
@require_POST
def experiment_cancel(request, pk: int):
    experiment = get_experiment_for_user(request, pk)
    if not access.may_act(request.user, experiment.owner_id):
        raise PermissionDenied("Only the experiment's owner (or staff) may cancel it.")
    if service.cancel(experiment):
        messages.info(request, "Cancelling: no new trials; running ones are being stopped.")
    return redirect("experiment-detail", experiment.pk)


@login_required
@require_POST
def experiment_relaunch(request, pk: int):
    experiment = get_experiment_for_user(request, pk)
    if not access.may_relaunch(request.user, experiment.owner_id, experiment.project_id, False):
        raise PermissionDenied("A viewer of this experiment's project does not launch on it.")
    trial = service.trial_to_relaunch(experiment, request.POST.get("trial") or None)
    if trial is None:
        messages.error(request, "No such trial, or none has completed with a score yet.")
        return redirect("experiment-detail", experiment.pk)
    if experiment.owner_id != request.user.pk:
        # Staff and the project's members: the owner's command, in the launch form to
        # read; nothing runs as them.
        source = service.copy_source(trial)
        if source is None:
            messages.error(request, f"Trial {trial.number} has no job to copy.")
            return redirect("experiment-detail", experiment.pk)
        messages.warning(
            request,
            f"Trial {trial.number}'s configuration is {experiment.owner}'s: read its command "
            "before you launch it. It would run as you, on your cluster account.",
        )
        return redirect(f"{reverse('launch')}?from={source.pk}")
    try:
        job = service.relaunch(trial, request.user)
    except ValidationError as exc:
        messages.error(request, f"Could not launch it again: {'; '.join(exc.messages)}")
        return redirect("experiment-detail", experiment.pk)
    messages.success(request, f"Trial {trial.number}'s configuration runs again as job {job.pk}.")
    return redirect("job-detail", job.pk)
