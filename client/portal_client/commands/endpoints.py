"""portal endpoints: the model endpoints you see, serving a registered version, starting
and stopping one, its API keys (made, shown once, listed, revoked)."""

from __future__ import annotations

from portal_client.api import Client, PortalError
from portal_client.commands.models import _model_id
from portal_client.common import Output


def _endpoint_id(client: Client, text: str) -> int:
    """An endpoint's id, or its name when exactly one endpoint you see has it."""
    if text.isdigit():
        return int(text)
    found = [e for e in client.request("GET", "endpoints/")["results"] if e["name"] == text]
    if len(found) != 1:
        raise PortalError(
            f"{len(found) or 'no'} endpoints named {text!r} that you see: use the id "
            "(portal endpoints)"
        )
    return found[0]["id"]


def _line(e: dict) -> str:
    model = e["model"]
    return f"{e['name']} ({model['name']} version {model['version']}): {e['state']} at {e['url']}"


def cmd_list(client: Client, args, out: Output) -> int:
    found = client.request("GET", "endpoints/")["results"]
    rows = [
        [
            e["id"],
            e["name"],
            f"{e['model']['name']}/v{e['model']['version']}",
            e["state"],
            e["traffic"]["requests"],
            e["url"],
        ]
        for e in found
    ]
    out.rows(found, rows, ["ID", "NAME", "SERVES", "STATE", "REQUESTS", "URL"], "no endpoints yet")
    return 0


def cmd_show(client: Client, args, out: Output) -> int:
    e = client.request("GET", f"endpoints/{_endpoint_id(client, args.endpoint)}/")
    traffic = e["traffic"]
    lines = [
        _line(e),
        f"kind {e['kind']}" + (f", model name {e['model_name']}" if e["model_name"] else ""),
        f"job {e['job'] or '-'}: {e['cpus']} CPUs, {e['memory_gb']} GB, {e['gpus']} GPUs on "
        f"{e['partition']}; stops after {e['idle_minutes'] or 'no'} idle minutes",
        f"requests {traffic['requests']} ({traffic['errors']} 5xx) since {traffic['since'] or '-'}"
        f", average {traffic['response_ms']} ms to the first bytes, {traffic['total_ms']} ms "
        "to the end",
    ]
    if e["message"]:
        lines.append(e["message"])
    out.data(e, "\n".join(lines))
    return 0


def cmd_serve(client: Client, args, out: Output) -> int:
    body: dict = {"model": _model_id(client, args.model), "version": args.version}
    body["name"] = args.name
    for field in ("kind", "partition", "cpus", "memory_gb", "gpus", "idle_minutes"):
        if getattr(args, field) is not None:
            body[field] = getattr(args, field)
    made = client.request("POST", "endpoints/", body=body)
    if not args.stopped:
        made = client.request("POST", f"endpoints/{made['id']}/start/")
    out.data(made, _line(made))
    return 0


def cmd_start(client: Client, args, out: Output) -> int:
    e = client.request("POST", f"endpoints/{_endpoint_id(client, args.endpoint)}/start/")
    out.data(e, _line(e))
    return 0


def cmd_stop(client: Client, args, out: Output) -> int:
    e = client.request("POST", f"endpoints/{_endpoint_id(client, args.endpoint)}/stop/")
    out.data(e, _line(e))
    return 0


def cmd_keys(client: Client, args, out: Output) -> int:
    found = client.request("GET", "endpoint-keys/")["results"]
    rows = [
        [
            k["id"],
            k["prefix"] + "…",
            k["name"],
            "all" if k["endpoints"] == "all" else ",".join(map(str, k["endpoints"])),
            f"{k['rate']}/s",
            k["expires_at"][:10],
            "live" if k["live"] else "revoked" if k["revoked_at"] else "expired",
        ]
        for k in found
    ]
    headers = ["ID", "KEY", "NAME", "OPENS", "RATE", "EXPIRES", "STATE"]
    out.rows(found, rows, headers, "no keys yet")
    return 0


def cmd_key(client: Client, args, out: Output) -> int:
    body: dict = {"name": args.name, "days": args.days, "rate": args.rate}
    if args.endpoint:
        body["endpoints"] = [_endpoint_id(client, e) for e in args.endpoint]
    if args.project is not None:
        body["project"] = args.project
    made = client.request("POST", "endpoint-keys/", body=body)
    # The secret alone on stdout (for `KEY=$(portal endpoints key …)`); the rest on stderr.
    out.data(made, made["key"])
    out.note(f"key {made['prefix']}… ({made['name']}): shown this once, keep it secret")
    return 0


def cmd_revoke(client: Client, args, out: Output) -> int:
    key = client.request("POST", f"endpoint-keys/{args.key}/revoke/")
    out.data(key, f"key {key['prefix']}… revoked")
    return 0


def add_to(commands) -> None:
    endpoints = commands.add_parser(
        "endpoints", help="model endpoints: list, show, serve, start, stop, keys"
    )
    what = endpoints.add_subparsers(dest="endpoints_cmd", metavar="ACTION")
    endpoints.set_defaults(run=cmd_list)
    what.add_parser("list", help="the endpoints you see").set_defaults(run=cmd_list)
    show = what.add_parser("show", help="an endpoint: its address, job and traffic")
    show.add_argument("endpoint", help="its id, or its name")
    show.set_defaults(run=cmd_show)
    serve = what.add_parser("serve", help="serve a model version (and start it)")
    serve.add_argument("model", help="the model's id, or its name")
    serve.add_argument("version", type=int)
    serve.add_argument("--name", required=True, help="the endpoint's name")
    serve.add_argument("--kind", choices=["mlflow", "openai"])
    serve.add_argument("--partition")
    serve.add_argument("--cpus", type=int)
    serve.add_argument("--memory-gb", dest="memory_gb", type=int)
    serve.add_argument("--gpus", type=int)
    serve.add_argument("--idle-minutes", dest="idle_minutes", type=int)
    serve.add_argument("--stopped", action="store_true", help="make it, do not start it")
    serve.set_defaults(run=cmd_serve)
    for name, run, words in (
        ("start", cmd_start, "start a stopped endpoint"),
        ("stop", cmd_stop, "stop an endpoint (its job cancelled)"),
    ):
        action = what.add_parser(name, help=words)
        action.add_argument("endpoint", help="its id, or its name")
        action.set_defaults(run=run)
    what.add_parser("keys", help="your endpoint keys").set_defaults(run=cmd_keys)
    key = what.add_parser("key", help="make a key (printed once)")
    key.add_argument("name")
    key.add_argument("--days", type=int, default=90)
    key.add_argument("--rate", type=int, default=10, help="requests a second")
    key.add_argument(
        "--endpoint", action="append", help="open only this one (repeatable; default: all)"
    )
    key.add_argument("--project", type=int, help="a project's key (its managers)")
    key.set_defaults(run=cmd_key)
    revoke = what.add_parser("revoke", help="revoke a key")
    revoke.add_argument("key", type=int, help="its id (portal endpoints keys)")
    revoke.set_defaults(run=cmd_revoke)
