"""The sign-in page and the OIDC round trip: /oidc/login/ sends the browser to the
provider, /oidc/callback/ takes its answer (Authlib checks state, PKCE, the id token's
signature, nonce, iss, aud and times; signin.py the rest), /oidc/logout/ ends the portal's
session and the provider's. Any failure is one page, HTTP 403, with no session."""

from __future__ import annotations

import logging

import requests
from authlib.integrations.base_client import OAuthError  # type: ignore[import-untyped]
from django.conf import settings
from django.contrib import auth
from django.contrib.auth import views as auth_views
from django.http import Http404, HttpResponseRedirect
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST
from joserfc.errors import JoseError

from portal.identity import provider
from portal.identity.mapping import Refused
from portal.identity.signin import sign_in

log = logging.getLogger(__name__)

NEXT_KEY = "oidc_next"
ID_TOKEN_KEY = "oidc_id_token"
UNVERIFIED = "The sign-in could not be verified. Try again; if it keeps failing, tell the portal's administrators."
SESSION_BACKEND = "portal.identity.backends.ProviderSessionBackend"


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
        user = sign_in(dict(claims))
    except Refused as exc:
        return refused(request, str(exc))
    except (OAuthError, JoseError, provider.ProviderError, requests.RequestException) as exc:
        log.warning("OIDC sign-in refused: %s: %s", type(exc).__name__, exc)
        return refused(request, UNVERIFIED)
    wanted = request.session.pop(NEXT_KEY, "") or settings.LOGIN_REDIRECT_URL
    auth.login(request, user, backend=SESSION_BACKEND)
    request.session[ID_TOKEN_KEY] = token["id_token"]
    return redirect(wanted)


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
                url = client.create_logout_url(
                    post_logout_redirect_uri=after, id_token_hint=id_token
                )["url"]
                return HttpResponseRedirect(url)
        except (requests.RequestException, provider.ProviderError) as exc:
            log.warning("OIDC logout at the provider skipped: %s", exc)
    return redirect(settings.LOGOUT_REDIRECT_URL)
