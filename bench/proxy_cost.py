"""What each request costs HAProxy, in CPU instructions (callgrind): the portal's session
configuration against HAProxy with none of its checks, and where the difference goes.

    .venv/bin/python bench/proxy_cost.py [--requests 2000]

Instructions, not seconds: callgrind counts the same for the same binary, configuration
and requests whatever else the machine is doing, so a change to the configuration
(proxy/templates/proxy/haproxy.cfg) shows its cost exactly. Each configuration is run
twice under valgrind, with no request and with --requests keep-alive requests of a 1 KiB
answer; the difference over the requests is the cost of one. The portal's run is the
configuration `make demo` renders (plain HTTP), its session's route and map entries
written into it, a browser's session cookie on every request.
"""

from __future__ import annotations

import argparse
import http.client
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

from netutil import free_port, wait_port
from sessionpath import BARE_CFG, HAPROXY, Stack

# Where the portal's checks go (callgrind's inclusive counts of these functions).
PARTS = {
    "jwt_verify": "the cookie's HS256 signature (OpenSSL's HMAC)",
    "jwt_tokenize": "the cookie split in three (each claim read)",
    "base64urldec": "its payload decoded (each claim read)",
    "mjson_find": "its JSON searched (each claim read)",
    "http_replace_hdrs": "the portal's cookies removed, Set-Cookie checked",
    "regex_exec_match2": "regular expressions (hosts, cookies, origins)",
    "pattern_exec_match": "map lookups (route, opener) and matches",
    "sess_build_logline": "formatted values (the opener key, the token header)",
}


def run(config: Path, port: int, headers: dict, requests: int, out: Path) -> int:
    """HAProxy under callgrind, ``requests`` made on one connection; total instructions."""
    proc = subprocess.Popen(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", HAPROXY, "-db"]
        + ["-f", str(config)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_port(port, timeout=180)
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        for _ in range(requests):
            conn.request("GET", "/x", headers=headers)
            answer = conn.getresponse()
            answer.read()
            if answer.status != 200:
                sys.exit(f"bench/proxy_cost.py: HAProxy answered {answer.status}")
        conn.close()
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(120)
    found = re.search(r"^summary:\s+(\d+)", out.read_text(errors="replace"), re.M)
    if found is None:
        sys.exit(f"bench/proxy_cost.py: no callgrind summary in {out}")
    return int(found[1])


def inclusive(out: Path, names: list[str]) -> dict[str, int]:
    text = subprocess.run(
        ["callgrind_annotate", "--inclusive=yes", "--threshold=100", str(out)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    found: dict[str, int] = {}
    for line in text.splitlines():
        cost = re.match(r"\s*([\d,]+)\s.*:(\w+) \[", line)
        if cost and cost[2] in names and cost[2] not in found:
            found[cost[2]] = int(cost[1].replace(",", ""))
    return found


def portal_config(stack: Stack, upstream: int) -> tuple[Path, int, dict]:
    """The portal's configuration with its session's route and map entries written in:
    (its path, its port, a browser's headers)."""
    sid, cookie = stack.add_session(upstream, "t" * 32)
    entries = stack.haproxy_admin(f"show map {stack.work / 'tokens.map'}").splitlines()
    mapfile = stack.work / "cost-tokens.map"
    mapfile.write_text("".join(" ".join(e.split()[1:]) + "\n" for e in entries if e.strip()))
    port = free_port()
    text = stack.config.replace(str(stack.work / "tokens.map"), str(mapfile))
    text = re.sub(r"bind 127\.0\.0\.1:\d+", f"bind 127.0.0.1:{port}", text, count=1)
    text = re.sub(r"stats socket \S+", f"stats socket {stack.work}/cost-admin.sock", text, count=1)
    route = "    use-server %[var(txn.sid)] if { var(txn.sid) -m found }"
    if route not in text:
        sys.exit("bench/proxy_cost.py: the sessions' backend changed: update this script")
    text = text.replace(route, f"    server {sid} 127.0.0.1:{upstream} weight 0\n{route}", 1)
    path = stack.work / "cost.cfg"
    path.write_text(text)
    return path, port, stack.session_headers(sid, cookie)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000)
    args = parser.parse_args()
    if not shutil.which("valgrind") or not shutil.which("callgrind_annotate"):
        sys.exit("bench/proxy_cost.py: valgrind is missing (apt-get install valgrind)")
    n = args.requests
    with Stack("portal-bench-cost-") as stack:
        upstream = stack.start_1k_upstream()
        stack.start_portal_haproxy()
        wait_port(upstream, timeout=30)
        portal, portal_port, headers = portal_config(stack, upstream)
        bare_port = free_port()
        bare = stack.work / "cost-bare.cfg"
        bare.write_text(
            BARE_CFG.format(work=stack.work, port=bare_port, upstream=upstream, options="")
        )
        cost = {}
        for name, config, port, sent in (
            ("HAProxy (no checks)", bare, bare_port, {"Authorization": "token x"}),
            ("HAProxy (portal config)", portal, portal_port, headers),
        ):
            idle = run(config, port, sent, 0, stack.work / f"{port}-0.cg")
            busy = run(config, port, sent, n, stack.work / f"{port}-{n}.cg")
            cost[name] = (busy - idle) / n
        print(f"instructions per request (callgrind, {n} keep-alive requests of 1 KiB)")
        for name, value in cost.items():
            print(f"  {name:26} {value:10,.0f}")
        extra = cost["HAProxy (portal config)"] - cost["HAProxy (no checks)"]
        print(f"  {'the portal checks add':26} {extra:10,.0f}")
        print("where (inclusive counts per request; the parts overlap where one calls another):")
        parts = inclusive(stack.work / f"{portal_port}-{n}.cg", list(PARTS))
        idle_parts = inclusive(stack.work / f"{portal_port}-0.cg", list(PARTS))
        for name, words in PARTS.items():
            per = (parts.get(name, 0) - idle_parts.get(name, 0)) / n
            print(f"  {name:20} {per:9,.0f}  {words}")


if __name__ == "__main__":
    main()
