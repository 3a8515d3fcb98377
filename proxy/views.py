"""Portal-side session endpoints: registration by the job, and opening a link."""

import json
from urllib.parse import urlencode

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods, require_POST

from common import validators
from common.throttle import digest, over_budget, throttled
from identity import audit
from jobs.models import Job
from jobs.tasks import sync_soon
from proxy import access, routes, sharing
from proxy.access import session_for_user, session_to_open
from proxy.codes import (
    cookie_name,
    issue_code,
    make_cookie,
    new_state,
    redeem_code,
    safe_path,
    state_cookie_name,
)
from proxy.models import SessionLink


def _session(request, public_id: str) -> str:
    return f"session-{digest(public_id)}"


def _audit_registration(session: SessionLink, outcome: str, message: str = "") -> None:
    """One audit row for a registration call about a known session (for its job's owner,
    on the job's account); calls naming no session act for nobody and are not recorded."""
    job = session.job
    audit.record(
        audit.Action.SESSION_REGISTER,
        outcome,
        user=job.owner,
        account=job.cluster_account,
        cluster=job.cluster,
        target=f"job {job.pk} session {session.public_id}",
        message=message,
    )


def _refused(session: SessionLink | None, error: str, status: int) -> JsonResponse:
    if session is not None:
        _audit_registration(session, audit.Outcome.REFUSED, error)
    return JsonResponse({"error": error}, status=status)


@csrf_exempt
@require_POST
def register(request, public_id: str):
    """Called by the notebook job when Jupyter listens. Authenticated by the job's one-time
    secret. Every answer about a known session but "not running yet" is audited."""
    session = (
        SessionLink.objects.filter(public_id=public_id)
        .select_related("job__owner", "job__cluster", "job__cluster_account")
        .first()
    )
    auth = request.headers.get("Authorization", "")
    secret = auth[7:] if auth.startswith("Bearer ") else ""
    if session is not None and session.state != SessionLink.State.STARTING:
        return _refused(session, "this session is already registered or closed", 409)
    if session is None or not session.check_register_secret(secret):
        return _refused(session, "unknown session or wrong secret", 403)
    # The session's budget is spent only by calls with its secret: whoever merely knows
    # the session's id (its host name) cannot use up the job's registrations.
    refused = over_budget(request, "session-register", _session(request, public_id), json=True)
    if refused:
        _audit_registration(session, audit.Outcome.REFUSED, "over the registration budget")
        return refused
    job = session.job
    if job.state in (Job.State.QUEUED, Job.State.PENDING) and job.scheduler_job_id:
        # The job calls as soon as Jupyter listens, often before the periodic sync has
        # seen it start: a worker asks the scheduler now (never this request: it would
        # hold a web worker on SSH), and the job's next call, two seconds on, finds it.
        sync_soon(job)
    if job.state != Job.State.RUNNING or not job.node:
        response = JsonResponse(
            {"error": "the scheduler does not report this job running on a node yet"}, status=409
        )
        response["Retry-After"] = "2"
        return response
    try:
        body = json.loads(request.body)
        port, token = int(body["port"]), str(body["token"])
    # A body nested past the parser's depth, or {"port": Infinity}, is bad input, not a 500.
    except (ValueError, KeyError, TypeError, RecursionError, OverflowError):
        return _refused(session, 'send JSON {"port": <int>, "token": "<jupyter token>"}', 400)
    if not (1024 <= port <= 65535) or not validators.SESSION_TOKEN.match(token):
        return _refused(session, "port must be 1024-65535 and token URL-safe", 400)
    # Where to connect: the node the scheduler reports, never a host named in the
    # request or the caller's address, so a job cannot aim the proxy anywhere else. A node
    # read through the owner's own login (no service account read it) is only their
    # login's word, which its environment can forge: it counts only when this call comes
    # from that node's own address.
    caller = request.META.get("REMOTE_ADDR", "")
    if not job.node_vouched and not routes.same_address(job.node, caller):
        job.note(
            f"Its session was not registered: the call came from {caller}, not from "
            f"{job.node}, the node the scheduler named through its owner's login. (A "
            "cluster whose nodes reach the portal through another address needs a service "
            "account that reads every job: Cluster.sync_reads_all_jobs.)"
        )
        return _refused(session, f"this call does not come from the job's node {job.node}", 403)
    if not session.mark_ready(job.node, port, token):
        return _refused(session, "this session is already registered", 409)
    _audit_registration(session, audit.Outcome.OK, f"accepted: {job.node} port {port}")
    return HttpResponse(status=204)


# The sessions of others this browser session confirmed opening (the newest kept).
CONFIRMED_OPENS = "confirmed_session_opens"
CONFIRMED_KEPT = 50


@login_required
@throttled("cluster-pages")
@require_http_methods(["GET", "POST"])
def open_session(request, public_id: str):
    """Hand the signed-in owner (or a holder of proxy.open_others_sessions: recorded, and
    told to the owner) to the proxy with a one-time code bound to the browser's state (set
    on the session host by session_start); or say why not.

    Someone else's session is opened only after a POST from this browser session (a form
    with its CSRF token: "Open <owner>'s notebook?"), so another site cannot make a
    signed-in colleague's or administrator's browser open it, with the opener entry, the
    audit row and the owner's notice that an open records."""
    session = session_to_open(request, public_id)
    context = {"session": session, "job": session.job}
    if session.job.owner_id != request.user.pk:
        confirmed = request.session.get(CONFIRMED_OPENS, [])
        if request.method == "POST":
            request.session[CONFIRMED_OPENS] = [
                *[c for c in confirmed if c != public_id][-(CONFIRMED_KEPT - 1) :],
                public_id,
            ]
            kept = {k: request.POST[k][:2000] for k in ("next", "state") if request.POST.get(k)}
            here = reverse("session-open", args=[public_id])
            return redirect(f"{here}?{urlencode(kept)}" if kept else here)
        if public_id not in confirmed:
            fields = {k: request.GET[k][:2000] for k in ("next", "state") if request.GET.get(k)}
            return render(request, "proxy/confirm_open.html", {**context, "fields": fields})
    elif request.method == "POST":
        return redirect("session-open", public_id=public_id)
    access.will_open(request.user, session)  # an administrator's opener entry, if needed
    if session.display_state == "closed":
        return render(request, "proxy/closed.html", context, status=410)
    if not session.is_open or not routes.push(session):
        # Not running yet, or HAProxy cannot route it right now: a page that retries.
        return render(request, "proxy/starting.html", context)
    app = session.job.session_app
    home = app.start_path if app is not None else "/"  # the app's own start page
    next_path = safe_path(request.GET.get("next", home), default=home)
    state = request.GET.get("state", "")
    if not state:  # from the portal's own pages: the session host sets the state first
        return redirect(f"{session.origin}/_portal/start?{urlencode({'next': next_path})}")
    code = issue_code(session.public_id, request.user.pk, state)
    access.opened(request.user, session)
    query = urlencode({"code": code, "next": next_path}, safe="/")
    return redirect(f"{session.origin}/_portal/login?{query}")


@login_required
def session_status(request, public_id: str):
    """The link's state, for those who see its job or may open it (someone it is shared
    with waits on the "starting" page too)."""
    try:
        session = session_for_user(request, public_id)
    except Http404:
        session = session_to_open(request, public_id)
    return JsonResponse({"state": session.display_state, "job_state": session.job.state})


@login_required
@require_POST
def revoke(request, public_id: str):
    session = session_for_user(request, public_id)
    session.close()
    return redirect("job-detail", pk=session.job_id)


@login_required
@require_POST
def share(request, public_id: str):
    """The owner shares their running session (proxy/sharing.py)."""
    session = session_for_user(request, public_id)
    if not sharing.may_share(request.user, session):
        raise Http404("No such session.")
    outcome = sharing.share(
        session,
        request.user,
        people=request.POST.get("people", "")[:4000],
        project=request.POST.get("project") == "on",
        acts_as_owner=request.POST.get("acts_as_owner") == "on",
    )
    for problem in outcome.problems:
        messages.error(request, problem)
    if outcome.shared:
        messages.success(request, f"Shared with {', '.join(outcome.shared)}.")
    return redirect(reverse("job-detail", args=[session.job_id]) + "#session")


@login_required
@require_POST
def unshare(request, public_id: str, share_id: int):
    """Withdraw a share: its people's next request to the session is refused."""
    session = (
        SessionLink.objects.select_related("job", "job__owner", "job__project")
        .filter(public_id=public_id)
        .first()
    )
    if session is None or not sharing.may_unshare(request.user, session):
        raise Http404("No such session.")
    if sharing.unshare(session, request.user, share_id):
        messages.success(request, "Share withdrawn: its next request to the session is refused.")
    return redirect(reverse("job-detail", args=[session.job_id]) + "#session")


def session_start(request, public_id: str):
    """On the session's host, for a browser without a valid cookie (HAProxy sends it
    here): a fresh state in a host-only cookie, then the portal, which checks who it is."""
    state = new_state()
    next_path = safe_path(request.GET.get("next", "/"), default="/")
    query = urlencode({"next": next_path, "state": state})
    response = redirect(f"{settings.PORTAL_URL}{reverse('session-open', args=[public_id])}?{query}")
    _set_host_cookie(response, state_cookie_name(), state, max(settings.PROXY_CODE_TTL, 300))
    response["Cache-Control"] = "no-store"
    return response


def _set_host_cookie(response, name: str, value: str, max_age: int) -> None:
    """A cookie of the session's own host: no Domain, Path=/, HttpOnly, Lax, and Secure
    over HTTPS (the __Host- names need it)."""
    response.set_cookie(
        name,
        value,
        max_age=max_age,
        path="/",
        secure=settings.PROXY_SESSION_SCHEME == "https",
        httponly=True,
        samesite="Lax",
    )


def session_login(request, public_id: str):
    """On the session's own host (through HAProxy): trade the one-time code from
    open_session for the session cookie, then go to the page asked for. The code was
    issued only to whom proxy/access.py allowed, and that is asked again here (a
    permission withdrawn meanwhile counts), so a cookie is proof of it."""
    state = request.COOKIES.get(state_cookie_name(), "")
    user_id = redeem_code(request.GET.get("code", ""), public_id, state)
    if user_id is not None and not access.may_open_by_id(user_id, public_id):
        user_id = None
    if user_id is None:
        response = render(
            request,
            "proxy/expired.html",
            {"portal_url": settings.PORTAL_URL},
            status=403,
        )
    else:
        response = redirect(safe_path(request.GET.get("next", "/lab")))
        _set_host_cookie(
            response,
            cookie_name(),
            make_cookie(public_id, user_id),
            settings.PROXY_COOKIE_MAX_AGE,
        )
    response.delete_cookie(state_cookie_name(), path="/", samesite="Lax")
    response["Cache-Control"] = "no-store"
    return response
