"""The account page: the person's cluster accounts (key pairs, a connection test) and
their API tokens."""

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from clusters import pool, ssh
from clusters.models import Cluster, ClusterAccount, PersonalKey
from common.throttle import throttled
from frontend.forms import ClusterAccountForm
from identity import audit
from identity.tokens import ApiToken
from jobs import personal_ssh


@login_required
def account(request):
    form = ClusterAccountForm(request.POST or None, user=request.user)
    if request.method == "POST" and form.is_valid():
        cluster_account = form.save(commit=False)
        cluster_account.generate_key_pair()  # (only key-pair clusters are offered)
        cluster_account.save()
        audit.record(
            audit.Action.ACCOUNT_CREATE,
            audit.Outcome.OK,
            user=request.user,
            account=cluster_account,
            target=str(cluster_account),
            message="typed by the person; proven by installing its key",
        )
        messages.success(request, "Key pair created: install the public key below on the cluster.")
        return redirect("account")
    accounts = ClusterAccount.objects.filter(user=request.user).select_related("cluster")
    context = {
        "accounts": accounts,
        "form": form,
        # Certificate clusters the person has no account on: theirs comes from sign-in or
        # an administrator, and the page says so instead of offering a name to type.
        "certificate_clusters": Cluster.objects.filter(
            enabled=True,
            login_mode=Cluster.LoginMode.PER_USER,
            ssh_auth=Cluster.SshAuth.CERTIFICATE,
        ).exclude(accounts__user=request.user),
        "tokens": ApiToken.objects.filter(user=request.user),
        "ssh_keys": PersonalKey.objects.filter(user=request.user),
        "ssh_cert_minutes": settings.PORTAL_SSH_USER_CERT_MINUTES,
        "token_max_days": settings.PORTAL_API_TOKEN_MAX_DAYS,
        # Shown once, straight after creation (kept in the session only until this render).
        "new_token": request.session.pop("new_api_token", None),
        "new_token_name": request.session.pop("new_api_token_name", None),
    }
    return render(request, "frontend/account.html", context)


@login_required
@require_POST
def token_create(request):
    name = request.POST.get("name", "").strip()[:100]
    days = request.POST.get("days", "")
    if not name or (days and not days.isdigit()):
        messages.error(request, "Give the token a name (and a number of days).")
        return redirect("account")
    try:
        row, token = ApiToken.issue(
            request.user, name, int(days) if days else None, request.POST.getlist("scopes")
        )
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
        return redirect("account")
    audit.token_changed(audit.Action.TOKEN_CREATE, row, by=request.user)
    request.session["new_api_token"] = token
    request.session["new_api_token_name"] = row.name
    return redirect("account")


@login_required
@require_POST
def ssh_key_add(request):
    try:
        key = personal_ssh.add_key(
            request.user, request.POST.get("public_key", ""), request.POST.get("name", "")
        )
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
    else:
        messages.success(request, f"Key {key.name} added ({key.fingerprint}).")
    return redirect(f"{reverse('account')}#ssh-keys")


@login_required
@require_POST
def ssh_key_remove(request, pk: int):
    key = get_object_or_404(PersonalKey.objects.filter(user=request.user), pk=pk)
    personal_ssh.remove_key(request.user, key)
    messages.info(request, f"Key {key.name} removed.")
    return redirect(f"{reverse('account')}#ssh-keys")


@login_required
@require_POST
def token_revoke(request, pk: int):
    token = get_object_or_404(ApiToken.objects.filter(user=request.user), pk=pk)
    if token.revoke():
        audit.token_changed(audit.Action.TOKEN_REVOKE, token, by=request.user)
    messages.info(request, "Token revoked.")
    return redirect("account")


@login_required
@require_POST
@throttled("cluster-pages", json=True)
def account_test(request, pk: int):
    cluster_account = get_object_or_404(ClusterAccount.objects.filter(user=request.user), pk=pk)
    try:
        with audit.action(
            audit.Action.ACCOUNT_TEST, user=request.user, account=cluster_account, target="whoami"
        ):
            who = pool.with_connection(
                cluster_account, lambda conn: conn.run(["whoami"])
            ).stdout.strip()
    except ssh.ClusterError as exc:
        return JsonResponse({"ok": False, "message": str(exc)})
    return JsonResponse(
        {"ok": True, "message": f"Connected to {cluster_account.cluster.name} as {who}."}
    )
