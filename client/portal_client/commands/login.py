"""portal login: check and save the portal's address and a token."""

from __future__ import annotations

import getpass
import sys

from portal_client.api import Client
from portal_client.common import Output
from portal_client.config import load_config, save_config


def cmd_login(args, out: Output) -> int:
    config = load_config()
    url = (args.url or config.url or input("Portal address (https://...): ")).strip().rstrip("/")
    if args.token_stdin:
        token = sys.stdin.readline().strip()
    else:
        token = getpass.getpass(f"API token (from {url}/account/): ").strip()
    client = Client(url, token, ca_bundle=config.ca_bundle)
    page = client.jobs(page_size=1)  # proves the address and the token
    values = {"url": url, "token": token, "ca_bundle": config.ca_bundle}
    path = save_config(values)
    out.note(f"Signed in to {url} ({page.get('count', 0)} jobs); saved to {path}.")
    return 0


def add_to(commands) -> None:
    login = commands.add_parser("login", help="check and save the portal address and token")
    login.add_argument("url", nargs="?")
    login.add_argument("--token-stdin", action="store_true", help="read the token from stdin")
    login.set_defaults(run=None)
