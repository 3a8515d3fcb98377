"""Pages of transfers and remotes (files/transfers.py does the work): a person's remotes,
a transfer asked for from a folder of the file manager, its page with live progress (it
reads ``status/`` as JSON), a timeline and a cancel. Only the person's own transfers
(``transfers.transfers_of``); no secret ever reaches a page."""

from __future__ import annotations

from urllib.parse import unquote

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.core.validators import validate_slug
from django.db import IntegrityError
from django.http import Http404, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from clusters import ssh
from clusters.models import Cluster
from common import paths
from files import rclone, tasks, transfers
from files.models import Remote, Transfer
from identity import audit
from projects import roots


@login_required
def remotes(request):
    """A person's remotes (add, remove) and the site's."""
    mine = Remote.objects.filter(owner=request.user)
    site = Remote.objects.filter(owner=None).select_related("cluster")
    if request.method == "POST":
        kind_key = request.POST.get("kind", "")
        kind = rclone.KINDS.get(kind_key)
        name = request.POST.get("name", "").strip()
        try:
            if kind is None:
                raise rclone.BadRemote("Choose a kind of remote.")
            try:
                validate_slug(name)
            except ValidationError:
                raise rclone.BadRemote("A name is letters, digits, '-' and '_'.") from None
            if len(name) > 64:  # Remote.name's max_length
                raise rclone.BadRemote("A name is at most 64 characters.")
            options = {
                option.name: request.POST.get(f"{kind_key}-{option.name}", "")
                for option in kind.options
            }
            remote_obj = Remote(owner=request.user, name=name, kind=kind_key)
            remote_obj.options = rclone.checked_options(kind_key, options)
            remote_obj.set_secret(request.POST.get(f"{kind_key}-secret", ""))
            remote_obj.save()
        except rclone.BadRemote as exc:
            messages.error(request, str(exc))
        except IntegrityError:
            messages.error(request, f"You have a remote called {name} already.")
        else:
            audit.record(
                audit.Action.REMOTE_ADD,
                "ok",
                user=request.user,
                target=f"{name} ({kind_key}) {remote_obj.where}",
            )
            messages.success(request, f"Remote {name} added.")
            return redirect("remotes")
    return render(
        request,
        "files/remotes.html",
        {
            "mine": mine,
            "site": site,
            "kinds": [(kind, kind.options) for kind in rclone.KINDS.values()],
        },
    )


@login_required
@require_POST
def remote_delete(request, pk: int):
    remote_obj = get_object_or_404(Remote, pk=pk, owner=request.user)
    busy = remote_obj.transfers.filter(state__in=Transfer.ACTIVE).exists()
    if busy:
        messages.error(request, "A transfer with that remote is not over: cancel it first.")
        return redirect("remotes")
    audit.record(audit.Action.REMOTE_DELETE, "ok", user=request.user, target=remote_obj.name)
    remote_obj.delete()
    messages.success(request, f"Remote {remote_obj.name} removed; its secret is gone.")
    return redirect("remotes")


@login_required
def transfer_list(request):
    rows = transfers.transfers_of(request.user).select_related("cluster")[:200]
    return render(request, "files/transfers.html", {"rows": rows})


@login_required
def transfer_new(request, cluster: str, root: str):
    """Copy a folder of the file manager to a remote, or a remote's folder into it."""
    cluster_obj = get_object_or_404(Cluster, name=cluster, enabled=True)
    try:
        account = roots.account_for(cluster_obj, request.user)
        root_obj = roots.root_named(cluster_obj, account, root)
    except roots.NoAccess as exc:
        raise Http404(str(exc)) from None
    rel = unquote(request.POST.get("path", request.GET.get("path", "")))
    choices = transfers.remotes_for(request.user, cluster_obj)
    if request.method == "POST":
        remote_obj = choices.filter(pk=request.POST.get("remote") or 0).first()
        try:
            if remote_obj is None:
                raise transfers.Refused("Choose one of your remotes (add one first).")
            transfer = transfers.ask(
                request.user,
                cluster_obj,
                remote_obj,
                request.POST.get("direction", ""),
                root_obj.key,
                rel,
                request.POST.get("remote_path", ""),
            )
        except transfers.Refused as exc:
            messages.error(request, str(exc))
        else:
            tasks.start_soon(transfer)
            return redirect("transfer-detail", transfer.pk)
    return render(
        request,
        "files/transfer_new.html",
        {
            "cluster": cluster_obj,
            "root": root_obj,
            "rel": rel,
            "shown": paths.shown(rel, 400),
            "remotes": choices,
            "directions": Transfer.Direction.choices,
        },
    )


def _mine(request, pk: int) -> Transfer:
    return get_object_or_404(transfers.transfers_of(request.user).select_related("cluster"), pk=pk)


@login_required
def transfer_detail(request, pk: int):
    transfer = _mine(request, pk)
    return render(
        request,
        "files/transfer.html",
        {
            "transfer": transfer,
            "what": transfers.describe(transfer),
            "status_url": reverse("transfer-status", args=[transfer.pk]),
            "events": transfer.events.all(),
        },
    )


@login_required
def transfer_status(request, pk: int):
    return JsonResponse(_mine(request, pk).status())


@login_required
@require_POST
def transfer_cancel(request, pk: int):
    transfer = _mine(request, pk)
    if transfer.is_final:
        messages.info(request, "It is over already.")
    else:
        try:
            transfers.cancel(transfer, request.user)
        except (ssh.ClusterError, OSError, roots.NoAccess) as exc:
            messages.error(request, f"Could not stop it on {transfer.cluster.name}: {exc}")
        else:
            messages.success(request, "Cancel asked: rclone is stopped on the cluster.")
    return redirect("transfer-detail", transfer.pk)
