"""SSH into a running job from the person's own client: the job page's form asks for a
certificate for one of their keys; the answer page shows it with the ~/.ssh/config stanza
(jobs/personal_ssh.py decides; the API and `portal ssh` do the same)."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from clusters.models import PersonalKey
from frontend.views.common import get_job_for_user, int_or_404
from jobs import node_access, personal_ssh


def ssh_context(user, job) -> dict:
    """What the job page's SSH card needs (nothing unless the person may enter the job)."""
    if job.owner_id != user.pk or not job.is_active or not job.cluster.uses_certificates:
        return {}
    return {"ssh_keys": list(PersonalKey.objects.filter(user_id=user.pk))}


@login_required
@require_POST
def job_ssh(request, pk: int):
    job = get_job_for_user(request, pk)
    key = get_object_or_404(
        PersonalKey.objects.filter(user=request.user),
        pk=int_or_404(request.POST.get("key", "")),
    )
    try:
        issued = personal_ssh.certify(request.user, job, key)
    except personal_ssh.Refused as exc:
        messages.error(request, str(exc))
        return redirect("job-detail", pk=job.pk)
    route = issued.route
    certificate_file = f"~/.ssh/{route.alias}-cert.pub"
    known_hosts = "~/.ssh/portal_known_hosts" if issued.known_hosts else ""
    context = {
        "job": job,
        "key": key,
        "issued": issued,
        "certificate_file": certificate_file,
        "known_hosts_file": known_hosts,
        "config": node_access.ssh_config(
            route, "~/.ssh/" + _private_name(key), certificate_file, known_hosts
        ),
    }
    response = render(request, "frontend/job_ssh.html", context)
    response["Cache-Control"] = "no-store"
    return response


def _private_name(key: PersonalKey) -> str:
    """The usual private key file of the key's type (the person edits it if theirs differs)."""
    kind = key.public_key.split()[0]
    return {"ssh-ed25519": "id_ed25519", "ssh-rsa": "id_rsa"}.get(kind, "id_ecdsa")
