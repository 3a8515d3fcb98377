#!/usr/bin/env python3
"""Configure the dev identity provider (glewlwyd) through its own admin API.

Run by deploy/idp/up.sh once the daemon answers; Debian's python3 only (no venv, no
third-party modules). Idempotent: every object is read first and written only when it
differs from what is wanted here, and the script prints one line per change.

Secrets are made once and kept in STATE, root only (0600):
  admin.password   glewlwyd's own administrator ("admin"; the package's database starts
                   with the well-known password "password", replaced on the first run)
  portal.env       PORTAL_OIDC_ISSUER / _CLIENT_ID / _CLIENT_SECRET / _API_AUDIENCE for
                   the portal
  users.json       {"users": {name: {"password", "groups", "email", "name"}}}
  account.key      an API key for glewlwyd's admin API (the portal's account checks)
  oidc-rsa.key     the RS256 signing key (made by up.sh with openssl)

Usage: configure.py STATE API_URL ISSUER DEMO_REDIRECT_URI DEMO_POST_LOGOUT_URI
"""

from __future__ import annotations

import fcntl
import json
import os
import secrets
import sys
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

CLIENT_ID = "portal"
PLUGIN = "oidc"  # the plugin instance's name is the path under /api: /api/oidc
SCOPES = ("openid", "profile", "email")
# name -> (display name, groups). portal-users may sign in, portal-staff are the portal's
# staff; outsider is a person the portal must refuse (only in "visitors").
USERS = {
    "demo": ("Demo Person", ["portal-users", "portal-staff"]),
    "hpcuser": ("HPC User", ["portal-users"]),
    "hpcuser2": ("HPC User Two", ["portal-users"]),
    "outsider": ("Out Sider", ["visitors"]),
}
EMAIL_DOMAIN = "example.org"
CHANGES: list[str] = []


def log(msg: str) -> None:
    print(f"idp: {msg}", flush=True)


def write_secret(path: Path, text: str) -> None:
    """Write a root-only file atomically (never readable by others, even for a moment)."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)


def kept_secret(path: Path) -> str:
    """The secret kept in ``path``, made (random) on the first call."""
    if not path.exists() or not path.read_text().strip():
        write_secret(path, secrets.token_urlsafe(24) + "\n")
    os.chmod(path, 0o600)
    return path.read_text().strip()


class Api:
    """A cookie session against glewlwyd's REST API (admin or user).

    Cookies are kept by hand: glewlwyd sends ``Domain=`` (empty), which browsers treat as
    a host-only cookie but Python's cookie jar drops.
    """

    def __init__(self, base: str) -> None:
        self.base = base.rstrip("/")
        self.cookies: dict[str, str] = {}

    def call(self, method: str, path: str, body: object = None) -> tuple[int, object]:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        if self.cookies:
            req.add_header("Cookie", "; ".join(f"{k}={v}" for k, v in self.cookies.items()))
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                status, raw, headers = resp.status, resp.read(), resp.headers
        except urllib.error.HTTPError as exc:
            status, raw, headers = exc.code, exc.read(), exc.headers
        for cookie in headers.get_all("Set-Cookie") or []:
            name, _, value = cookie.split(";", 1)[0].partition("=")
            self.cookies[name.strip()] = value.strip()
        try:
            return status, json.loads(raw) if raw else None
        except ValueError:
            return status, raw.decode(errors="replace")

    def must(self, method: str, path: str, body: object = None) -> object:
        status, answer = self.call(method, path, body)
        if status != 200:
            sys.exit(f"idp: error: {method} {path} answered {status}: {answer}")
        return answer

    def login(self, username: str, password: str) -> bool:
        status, _ = self.call("POST", "/auth/", {"username": username, "password": password})
        return status == 200


def account_key(api: Api, state: Path) -> str:
    """An API key for glewlwyd's admin API, kept in STATE/account.key: the portal asks
    /api/user/{username} with it whether a person is still enabled (PORTAL_OIDC_ACCOUNT_*).
    A kept key that no longer works is replaced."""
    path = state / "account.key"
    if path.exists():
        key = path.read_text().strip()
        req = urllib.request.Request(f"{api.base}/user/admin", method="GET")
        req.add_header("Authorization", f"token {key}")
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                if resp.status == 200:
                    return key
        except urllib.error.HTTPError:
            pass
    made = api.must("POST", "/key", {"issued_for": "the portal's account checks"})
    key = made.get("key") if isinstance(made, dict) else None
    if not isinstance(key, str) or not key:
        sys.exit(f"idp: error: POST /key answered {made!r}")
    write_secret(path, key + "\n")
    CHANGES.append("made an API key for the portal's account checks")
    return key


def differs(want: dict, have: dict) -> bool:
    """True when any wanted key has another value in ``have`` (extra keys there are fine)."""
    return any(have.get(k) != v for k, v in want.items())


def ensure(api: Api, kind: str, path: str, key: str, want: dict, create: str) -> None:
    """Create ``want`` under ``create`` or update it at ``path`` when it differs."""
    status, have = api.call("GET", path)
    if status == 404:
        api.must("POST", create, want)
        CHANGES.append(f"added {kind} {want[key]}")
    elif status != 200 or not isinstance(have, dict):
        sys.exit(f"idp: error: GET {path} answered {status}: {have}")
    elif differs(want, have):
        api.must("PUT", path, want)
        CHANGES.append(f"updated {kind} {want[key]}")


def admin_session(api: Api, state: Path) -> None:
    password = kept_secret(state / "admin.password")
    if api.login("admin", password):
        return
    # First run: the package's database ships admin/"password"; replace it at once.
    if not api.login("admin", "password"):
        sys.exit("idp: error: cannot sign in as glewlwyd's admin (see admin.password)")
    api.must(
        "PUT",
        "/user/admin",
        {
            "username": "admin",
            "name": "The Administrator",
            "scope": ["g_admin", "g_profile"],
            "enabled": True,
            "password": password,
        },
    )
    CHANGES.append("replaced the admin's initial password")


def configure_modules(api: Api) -> None:
    """Teach the database back-ends the two list-valued properties we use."""
    mod = api.must("GET", "/mod/user/database")
    assert isinstance(mod, dict)
    fmt = mod["parameters"].setdefault("data-format", {})
    groups = {"multiple": True, "read": True, "write": True, "profile-read": True}
    groups["profile-write"] = False
    if fmt.get("groups") != groups:
        fmt["groups"] = groups
        api.must("PUT", "/mod/user/database", mod)
        api.must("PUT", "/mod/user/database/reset")  # the running instance reads it anew
        CHANGES.append("user back-end: groups is a list")
    mod = api.must("GET", "/mod/client/database")
    assert isinstance(mod, dict)
    fmt = mod["parameters"].setdefault("data-format", {})
    uris = {"multiple": True, "read": True, "write": True}
    one = {"multiple": False, "read": True, "write": True}
    want = {
        "post_logout_redirect_uris": uris,
        # OpenID Connect Back-Channel Logout: where the provider POSTs its logout tokens.
        "backchannel_logout_uri": one,
        "backchannel_logout_session_required": one,
    }
    if any(fmt.get(k) != v for k, v in want.items()):
        fmt.update(want)
        api.must("PUT", "/mod/client/database", mod)
        api.must("PUT", "/mod/client/database/reset")
        CHANGES.append("client back-end: post-logout and back-channel logout properties")


def configure_scopes(api: Api) -> None:
    for name in SCOPES:
        want = {
            "name": name,
            "display_name": name,
            "description": f"OpenID Connect scope {name}",
            "password_required": True,
            "password_max_age": 0,
            "scheme": {},
        }
        ensure(api, "scope", f"/scope/{name}", "name", want, "/scope/")


def configure_plugin(api: Api, state: Path, issuer: str, api_audience: str) -> None:
    key = (state / "oidc-rsa.key").read_text()
    cert = (state / "oidc-rsa.pub").read_text()
    params = {
        "iss": issuer,
        "jwt-type": "rsa",
        "jwt-key-size": "256",  # RS256
        "key": key,
        "cert": cert,
        "jwks-show": True,
        "access-token-duration": 3600,
        "refresh-token-duration": 1209600,
        "refresh-token-rolling": False,
        "code-duration": 600,
        "allow-non-oidc": False,
        "auth-type-code-enabled": True,
        "auth-type-code-revoke-replayed": True,
        "auth-type-token-enabled": False,
        "auth-type-id-token-enabled": False,
        "auth-type-none-enabled": False,
        "auth-type-password-enabled": False,
        "auth-type-client-enabled": False,
        "auth-type-device-enabled": False,
        "auth-type-refresh-enabled": True,
        "subject-type": "public",
        "pkce-allowed": True,
        "pkce-method-plain-allowed": False,
        "introspection-revocation-allowed": False,
        "session-management-allowed": True,
        "session-cookie-name": "GLEWLWYD2_OIDC_SID",
        "session-cookie-expiration": 86400,
        # (the login app's end-session page reads its session list, which answers 400
        # unless front-channel logout is allowed; the portal's client registers no URI)
        "front-channel-logout-allowed": True,
        # A logout at the provider ends the portal's sessions (/oidc/backchannel-logout/).
        "back-channel-logout-allowed": True,
        "name-claim": "mandatory",
        "email-claim": "mandatory",
        "scope-claim": "no",
        "address-claim": {"type": "no"},
        "claims": [
            {
                "name": "preferred_username",
                "user-property": "username",
                "type": "string",
                "mandatory": True,
                "on-demand": False,
                "scope": [],
            },
            {
                "name": "groups",
                "user-property": "groups",
                "type": "string",
                "mandatory": True,
                "on-demand": False,
                "scope": [],
            },
        ],
        # Access tokens carry the groups (comma-separated), which the portal's API checks.
        "additional-parameters": [{"user-parameter": "groups", "token-parameter": "groups"}],
        # RFC 8707: a script asks for resource=<api_audience> and gets an access token with
        # that audience (without: the scope list), never the client id id tokens carry.
        "resource-allowed": True,
        "resource-scope": {"openid": [api_audience]},
        "resource-client-property": "",
        "resource-scope-and-client-property": False,
        "allowed-scope": list(SCOPES),
        "request-parameter-allow": False,
        "client-pubkey-parameter": "",
        "oauth-dpop-allowed": False,
        "oauth-rar-allowed": False,
        "oauth-par-allowed": False,
        "oauth-ciba-allowed": False,
        "register-client-allowed": False,
        "encrypt-out-token-allow": False,
    }
    want = {
        "module": "oidc",
        "name": PLUGIN,
        "display_name": "OpenID Connect (portal dev provider)",
        "enabled": True,
        "parameters": params,
    }
    status, have = api.call("GET", f"/mod/plugin/{PLUGIN}")
    if status == 404:
        api.must("POST", "/mod/plugin/", want)
        CHANGES.append("added the OpenID Connect plugin")
    elif status != 200 or not isinstance(have, dict):
        sys.exit(f"idp: error: GET /mod/plugin/{PLUGIN} answered {status}: {have}")
    elif differs(params, have.get("parameters", {})) or not have.get("enabled"):
        api.must("PUT", f"/mod/plugin/{PLUGIN}", want)
        # (PUT only writes the database: the running instance reads it on reset/enable)
        api.must("PUT", f"/mod/plugin/{PLUGIN}/{'reset' if have.get('enabled') else 'enable'}")
        CHANGES.append("updated the OpenID Connect plugin")


def configure_client(
    api: Api, state: Path, redirect: str, post_logout: str, backchannel: str
) -> str:
    secret = kept_secret(state / "client.secret")
    status, have = api.call("GET", f"/client/{CLIENT_ID}")
    have = have if status == 200 and isinstance(have, dict) else {}
    # Keep the redirect URIs tests added (tests/idp.py registers one per random port).
    redirects = list(dict.fromkeys([redirect, *have.get("redirect_uri", [])]))
    logouts = list(dict.fromkeys([post_logout, *have.get("post_logout_redirect_uris", [])]))
    want = {
        "client_id": CLIENT_ID,
        "name": "HPC portal",
        "description": "the portal (relying party)",
        "enabled": True,
        "confidential": True,
        "client_secret": secret,
        "scope": [],
        "redirect_uri": redirects,
        "post_logout_redirect_uris": logouts,
        "backchannel_logout_uri": have.get("backchannel_logout_uri") or backchannel,
        "backchannel_logout_session_required": "1",
        "authorization_type": ["code", "refresh_token"],
        "token_endpoint_auth_method": ["client_secret_basic", "client_secret_post"],
    }
    ensure(api, "client", f"/client/{CLIENT_ID}", "client_id", want, "/client/")
    return secret


def configure_users(api: Api, base: str, state: Path) -> dict:
    path = state / "users.json"
    kept = json.loads(path.read_text()).get("users", {}) if path.exists() else {}
    users = {}
    for name, (display, groups) in USERS.items():
        password = kept.get(name, {}).get("password") or secrets.token_urlsafe(12)
        email = f"{name}@{EMAIL_DOMAIN}"
        users[name] = {"password": password, "groups": groups, "email": email, "name": display}
        want = {
            "username": name,
            "name": display,
            "email": email,
            "enabled": True,
            "scope": list(SCOPES),
            "groups": groups,
        }
        status, have = api.call("GET", f"/user/{name}")
        if status == 404:
            api.must("POST", "/user/", {**want, "password": password})
            CHANGES.append(f"added user {name}")
        elif status != 200 or not isinstance(have, dict):
            sys.exit(f"idp: error: GET /user/{name} answered {status}: {have}")
        elif differs(want, have) or not Api(base).login(name, password):
            api.must("PUT", f"/user/{name}", {**want, "password": password})
            CHANGES.append(f"updated user {name}")
        grant_scopes(base, name, password)
    write_secret(path, json.dumps({"users": users}, indent=2) + "\n")
    return users


def grant_scopes(base: str, name: str, password: str) -> None:
    """The person's consent to the portal's scopes, given once here: the login page then
    asks for the password only (a dev provider; a real one asks the person)."""
    user = Api(base)
    if not user.login(name, password):
        sys.exit(f"idp: error: {name} cannot sign in with the password just set")
    scope_list = urllib.parse.quote(" ".join(SCOPES))
    have = user.must("GET", f"/auth/grant/{CLIENT_ID}/{scope_list}")
    listed = have.get("scope", []) if isinstance(have, dict) else []
    granted = {s.get("name") for s in listed if isinstance(s, dict) and s.get("granted")}
    if not set(SCOPES) <= granted:
        user.must("PUT", f"/auth/grant/{CLIENT_ID}", {"scope": " ".join(SCOPES)})
        CHANGES.append(f"granted {','.join(SCOPES)} to {CLIENT_ID} for {name}")


def main() -> None:
    state, base, issuer, redirect, post_logout = sys.argv[1:6]
    state_dir = Path(state)
    portal = redirect.removesuffix("/oidc/callback/")
    api_audience = f"{portal}/api/"
    api = Api(base)
    admin_session(api, state_dir)
    configure_modules(api)
    configure_scopes(api)
    configure_plugin(api, state_dir, issuer, api_audience)
    # Tests change the client's redirect URIs while they run (tests/idp.py), holding this
    # lock for each read-modify-write: so does this one, so neither loses the other's.
    with open(state_dir / "run" / "client.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        secret = configure_client(
            api, state_dir, redirect, post_logout, f"{portal}/oidc/backchannel-logout/"
        )
    configure_users(api, base, state_dir)
    key = account_key(api, state_dir)
    write_secret(
        state_dir / "portal.env",
        f"PORTAL_OIDC_ISSUER={issuer}\nPORTAL_OIDC_CLIENT_ID={CLIENT_ID}\n"
        f"PORTAL_OIDC_CLIENT_SECRET={secret}\nPORTAL_OIDC_API_AUDIENCE={api_audience}\n"
        f"PORTAL_OIDC_ACCOUNT_URL={base.rstrip('/')}/user/{{username}}\n"
        f"PORTAL_OIDC_ACCOUNT_AUTHORIZATION='token {key}'\n",
    )
    for change in CHANGES:
        log(change)
    if not CHANGES:
        log("configuration unchanged")


if __name__ == "__main__":
    main()
