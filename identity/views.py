"""The sign-in page and the OIDC round trip: /oidc/login/ sends the browser to the
provider, /oidc/callback/ takes its answer (Authlib checks state, PKCE, the id token's
signature, nonce, iss, aud and times; signin.py the rest), /oidc/logout/ ends the portal's
session and the provider's, /oidc/backchannel-logout/ takes the provider's word that a
person signed out there. Any failure is one page, HTTP 403, with no session."""

from __future__ import annotations

import logging
import time

import requests
from authlib.integrations.base_client import OAuthError  # type: ignore[import-untyped]
from django.conf import settings
from django.contrib import auth
from django.contrib.auth import get_user_model
from django.contrib.auth import views as auth_views
from django.contrib.auth.signals import user_login_failed
from django.core.cache import cache
from django.http import Http404, HttpResponseRedirect, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST
from joserfc.errors import JoseError

from common.crypto import secret_hash
from identity import confirmation, provider, signin, throttle
from identity.mapping import Refused
from identity.models import Identity
from identity.signin import sign_in

log = logging.getLogger(__name__)

NEXT_KEY = "oidc_next"
ID_TOKEN_KEY = "oidc_id_token"
LINK_KEY = "oidc_link"  # a verified sign-in waiting for the local password (/oidc/link/)
LINK_SECONDS = 600
UNVERIFIED = "The sign-in could not be verified. Try again; if it keeps failing, tell the portal's administrators."
SESSION_BACKEND = "identity.backends.ProviderSessionBackend"


class SignInView(auth_views.LoginView):
    """Django's sign-in page; with OIDC on it offers the provider and hides the password
    form unless ?local=1 (the emergency admins of PORTAL_LOCAL_LOGIN_USERS)."""

    template_name = "frontend/login.html"
    redirect_authenticated_user = True

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        oidc = provider.enabled()
        context["oidc"] = oidc
        context["provider_name"] = settings.PORTAL_OIDC_PROVIDER_NAME
        context["password_form"] = (
            not oidc or self.request.GET.get("local") == "1" or self.request.method == "POST"
        )
        return context


def refused(request, message: str):
    return render(request, "identity/refused.html", {"message": message}, status=403)


def login(request):
    if not provider.enabled():
        raise Http404("OIDC sign-in is off")
    wanted = request.GET.get("next", "")
    if url_has_allowed_host_and_scheme(wanted, {request.get_host()}, request.is_secure()):
        request.session[NEXT_KEY] = wanted
    extra = {}
    if settings.PORTAL_OIDC_REQUIRE_ACR:
        extra["acr_values"] = " ".join(settings.PORTAL_OIDC_REQUIRE_ACR)
    try:
        return provider.client().authorize_redirect(
            request, request.build_absolute_uri(reverse("oidc-callback")), **extra
        )
    except (requests.RequestException, provider.ProviderError, ValueError) as exc:
        log.warning("OIDC provider unusable: %s", exc)
        return refused(request, "The identity provider cannot be reached; try again later.")


def callback(request):
    if not provider.enabled():
        raise Http404("OIDC sign-in is off")
    try:
        token = provider.client().authorize_access_token(
            request,
            claims_options=provider.id_token_options(),
            leeway=settings.PORTAL_OIDC_LEEWAY,
        )
        claims = token.get("userinfo")
        if not claims:  # Authlib verifies an id token only when there is one
            raise OAuthError(description="the provider sent no id token")
        user = sign_in(dict(claims), refresh_token=token.get("refresh_token"))
    except signin.NameTaken as exc:
        offer = signin.may_link_by_password(exc.username)
        if offer:
            request.session[LINK_KEY] = {
                "claims": dict(claims),
                "refresh_token": token.get("refresh_token"),
                "at": time.time(),
            }
        context = {"message": str(exc), "link": offer, "username": exc.username}
        return render(request, "identity/refused.html", context, status=403)
    except Refused as exc:
        return refused(request, str(exc))
    except (OAuthError, JoseError, provider.ProviderError, requests.RequestException) as exc:
        log.warning("OIDC sign-in refused: %s: %s", type(exc).__name__, exc)
        return refused(request, UNVERIFIED)
    wanted = request.session.pop(NEXT_KEY, "") or settings.LOGIN_REDIRECT_URL
    auth.login(request, user, backend=SESSION_BACKEND)
    request.session[ID_TOKEN_KEY] = token["id_token"]
    if isinstance(claims.get("sid"), str):  # a logout token may name the session only
        cache.set(_sid_key(claims["sid"]), user.pk, settings.SESSION_COOKIE_AGE)
    return redirect(wanted)


def _sid_key(sid: str) -> str:
    return f"oidc-sid:{secret_hash(settings.PORTAL_OIDC_ISSUER + ' ' + sid)}"


@require_POST
def logout(request):
    """End the portal's session, then (OIDC on) the provider's: RP-initiated logout."""
    id_token = request.session.get(ID_TOKEN_KEY)
    auth.logout(request)
    after = request.build_absolute_uri(reverse(settings.LOGOUT_REDIRECT_URL))
    if provider.enabled() and id_token:
        try:
            client = provider.client()
            if client.load_server_metadata().get("end_session_endpoint"):
                # The id token stays out of the URL (browser history, the provider's logs)
                # unless the provider needs it (PORTAL_OIDC_LOGOUT_ID_TOKEN_HINT).
                hint = (
                    {"id_token_hint": id_token} if settings.PORTAL_OIDC_LOGOUT_ID_TOKEN_HINT else {}
                )
                url = client.create_logout_url(
                    post_logout_redirect_uri=after, client_id=settings.PORTAL_OIDC_CLIENT_ID, **hint
                )["url"]
                return HttpResponseRedirect(url)
        except (requests.RequestException, provider.ProviderError) as exc:
            log.warning("OIDC logout at the provider skipped: %s", exc)
    return redirect(settings.LOGOUT_REDIRECT_URL)


@require_POST
def link(request):
    """The local password of the portal user whose name the provider's sign-in carried,
    proven once: the identity is linked to that user (throttled like a password sign-in)."""
    pending = request.session.pop(LINK_KEY, None)
    if not provider.enabled() or not pending or time.time() - pending["at"] > LINK_SECONDS:
        return refused(request, "That sign-in is over; sign in again.")
    claims = pending["claims"]
    username = str(claims.get(settings.PORTAL_OIDC_USERNAME_CLAIM))
    if throttle.is_locked(request, username):
        return refused(request, throttle.locked_message())
    password = request.POST.get("password", "")
    if not signin.link_by_password(str(claims["iss"]), str(claims["sub"]), username, password):
        user_login_failed.send(__name__, credentials={"username": username}, request=request)
        return refused(
            request,
            f"That is not the portal password of {username!r}: nothing was linked. Sign in "
            "again to retry, or ask the portal's administrators to link your identity.",
        )
    try:
        user = sign_in(claims, refresh_token=pending["refresh_token"])
    except Refused as exc:
        return refused(request, str(exc))
    auth.login(request, user, backend=SESSION_BACKEND)
    return redirect(settings.LOGIN_REDIRECT_URL)


@csrf_exempt  # the provider POSTs here, server to server; the logout token is the proof
@require_POST
def backchannel_logout(request):
    """OpenID Connect Back-Channel Logout 1.0: the provider says a person signed out there
    (or was signed out by its administrators). Every portal session of that person ends and
    their confirmation is cleared: API tokens and cluster actions wait for a new sign-in."""
    if not provider.enabled():
        raise Http404("OIDC sign-in is off")
    token = request.POST.get("logout_token", "")
    try:
        claims = provider.verify_logout_token(token)
    except (JoseError, ValueError, TypeError) as exc:
        log.info("logout token refused: %s", exc)
        return _logout_answer(400, "invalid_request", "the logout token is not valid")
    except (provider.ProviderError, requests.RequestException) as exc:
        log.warning("logout token not checked, provider keys unavailable: %s", exc)
        return _logout_answer(501, "temporarily_unavailable", "keys unavailable")
    # A logout token is used once (its jti), for as long as it could be accepted.
    window = provider.LOGOUT_TOKEN_MAX_AGE + 2 * settings.PORTAL_OIDC_LEEWAY
    if not cache.add(f"oidc-logout-jti:{secret_hash(str(claims['jti']))}", 1, window):
        return _logout_answer(400, "invalid_request", "the logout token was used before")
    users = get_user_model().objects
    if isinstance(claims.get("sub"), str):
        identities = Identity.objects.filter(issuer=claims["iss"], subject=claims["sub"])
        people = list(users.filter(identities__in=identities).distinct())
    else:
        user_id = cache.get(_sid_key(claims["sid"]))
        people = list(users.filter(pk=user_id)) if user_id is not None else []
    for person in people:
        confirmation.unconfirm(person)
        confirmation.end_sessions(person)
        log.info("back-channel logout: %s signed out at the provider", person)
    return _logout_answer(200)


def _logout_answer(status: int, error: str = "", description: str = "") -> JsonResponse:
    body = {"error": error, "error_description": description} if error else {}
    response = JsonResponse(body, status=status)
    response["Cache-Control"] = "no-store"
    return response
