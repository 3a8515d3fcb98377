#!/usr/bin/env python3
"""Wait until a web instance's /readyz answers 200 (the systemd unit's ExecStartPost, so
that `systemctl restart portal-web@PORT` returns only once the instance can serve: a
rolling upgrade restarts the next one after it). Standard library only.

    wait-ready.py URL [--timeout SECONDS]

The request names the portal's host (PORTAL_URL's, from the unit's environment file) so
that ALLOWED_HOSTS lets it through, as HAProxy's health check does. Exit 0 when ready;
1 with the last answer (or error) when the time is up."""

from __future__ import annotations

import argparse
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("--timeout", type=float, default=120.0)
    args = parser.parse_args()
    until = time.monotonic() + args.timeout
    last = "no answer"
    headers = {}
    if host := urllib.parse.urlsplit(os.environ.get("PORTAL_URL", "")).netloc:
        headers["Host"] = host
    request = urllib.request.Request(args.url, headers=headers)
    while True:
        try:
            with urllib.request.urlopen(request, timeout=5) as answer:  # noqa: S310 (the unit's own URL)
                if answer.status == 200:
                    return 0
                last = f"HTTP {answer.status}"
        except urllib.error.HTTPError as exc:
            last = f"HTTP {exc.code}: {exc.read(500).decode(errors='replace').strip()}"
        except (OSError, ValueError) as exc:
            last = str(exc)
        if time.monotonic() >= until:
            print(f"{args.url} not ready after {args.timeout:.0f} s: {last}", file=sys.stderr)
            return 1
        time.sleep(0.5)


if __name__ == "__main__":
    sys.exit(main())
