"""`make demo`'s one way in, said once the stack answers: waits for the web server's
/healthz, then prints the portal's address, one user and one password, and stays (honcho
stops the whole stack when one of its processes ends).

The password is the identity provider's for `demo` where `make demo` signs in through it
(PORTAL_IDP_USERS: its users.json; the demo's set-up linked the two, so the first sign-in
lands on the dashboard), else the local one (PORTAL_DATA_DIR/demo-password)."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import urllib.request
from pathlib import Path

USER = "demo"


def password() -> str:
    users = os.environ.get("PORTAL_IDP_USERS", "")
    if users and Path(users).is_file():
        return json.loads(Path(users).read_text())["users"][USER]["password"]
    return (Path(os.environ.get("PORTAL_DATA_DIR", "var")) / f"{USER}-password").read_text().strip()


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def main() -> int:
    # (Not PORT: honcho gives each of its processes a PORT of its own.)
    url = os.environ.get("PORTAL_URL", "http://localhost:8000").rstrip("/")
    deadline = time.monotonic() + 300
    while not answers(f"{url}/healthz"):
        if time.monotonic() > deadline:
            print("The portal did not answer within 5 minutes; see the web lines above.")
            return 1
        time.sleep(0.5)
    print(f"\n  Sign in at {url}/ as {USER}, password {password()}\n", flush=True)
    signal.pause()
    return 0


if __name__ == "__main__":
    sys.exit(main())
