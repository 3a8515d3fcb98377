"""portal models: the models you see (yours and your projects'), a model's versions, a
version's files; registering a run's files; setting and removing aliases."""

from __future__ import annotations

from urllib.parse import quote

from portal_client.api import Client, PortalError
from portal_client.common import Output, job_id


def _model_id(client: Client, text: str) -> int:
    """A model's id, or its name when exactly one model you see has it."""
    if text.isdigit():
        return int(text)
    found = [m for m in client.request("GET", "models/")["results"] if m["name"] == text]
    if len(found) != 1:
        raise PortalError(
            f"{len(found) or 'no'} models named {text!r} that you see: use the id (portal models)"
        )
    return found[0]["id"]


def _aliases(model: dict) -> str:
    return ", ".join(
        f"@{a['alias']}=v{a['version']}" + (" (protected)" if a["protected"] else "")
        for a in model["aliases"]
    )


def cmd_list(client: Client, args, out: Output) -> int:
    found = client.request("GET", "models/")["results"]
    rows = [
        [
            m["id"],
            m["name"],
            f"project {m['project']}" if m["project"] else m["owner"],
            m["version_count"],
            _aliases(m) or "-",
        ]
        for m in found
    ]
    out.rows(found, rows, ["ID", "NAME", "WHOSE", "VERSIONS", "ALIASES"], "no models yet")
    return 0


def cmd_show(client: Client, args, out: Output) -> int:
    pk = _model_id(client, args.model)
    if args.version is not None:
        version = client.request("GET", f"models/{pk}/versions/{args.version}/")
        lines = [
            f"{version['name']} version {version['version']}: {version['status']}",
            f"files: {version['cluster']}:{version['path']} ({version['files']} files, "
            f"{version['total_bytes']} bytes)",
            f"from job {version['job']}"
            + (f", run {version['run_id']}" if version["run_id"] else ""),
        ]
        lines += [f"  {f['sha256']}  {f['bytes']:>12}  {f['path']}" for f in version["manifest"]]
        out.data(version, "\n".join(lines))
        return 0
    model = client.request("GET", f"models/{pk}/")
    rows = [
        [
            v["version"],
            v["status"],
            v["job"] or "-",
            ",".join(v["aliases"]) or "-",
            v["registered_by"] or "-",
            v["path"],
        ]
        for v in model["versions"]
    ]
    header = (
        f"{model['name']} ({'project ' + model['project'] if model['project'] else model['owner']})"
    )
    out.rows(model, rows, ["VERSION", "STATUS", "JOB", "ALIASES", "BY", "FILES"], header)
    return 0


def cmd_register(client: Client, args, out: Output) -> int:
    body = {"job": args.job, "path": args.path, "name": args.name}
    if args.description:
        body["description"] = args.description
    version = client.request("POST", "models/", body=body)
    out.data(version, f"{version['name']} version {version['version']}: {version['status']}")
    return 0


def cmd_alias(client: Client, args, out: Output) -> int:
    pk = _model_id(client, args.model)
    body: dict = {"version": args.version}
    if args.protect is not None:
        body["protected"] = args.protect
    model = client.request("PUT", f"models/{pk}/aliases/{quote(args.alias, safe='')}/", body=body)
    out.data(model, f"{model['name']}: {_aliases(model)}")
    return 0


def cmd_unalias(client: Client, args, out: Output) -> int:
    pk = _model_id(client, args.model)
    client.request("DELETE", f"models/{pk}/aliases/{quote(args.alias, safe='')}/", raw=True)
    out.data({"removed": args.alias}, f"alias {args.alias} removed")
    return 0


def add_to(commands) -> None:
    models = commands.add_parser("models", help="registered models: list, show, register, alias")
    what = models.add_subparsers(dest="models_cmd", metavar="ACTION")
    models.set_defaults(run=cmd_list)
    what.add_parser("list", help="the models you see").set_defaults(run=cmd_list)
    show = what.add_parser("show", help="a model's versions, or one version's files")
    show.add_argument("model", help="its id, or its name")
    show.add_argument("--version", type=int)
    show.set_defaults(run=cmd_show)
    register = what.add_parser("register", help="register a file or folder of one of your runs")
    register.add_argument("job", type=job_id)
    register.add_argument("path", help="in the run's work directory (or absolute)")
    register.add_argument("--name", required=True, help="the model (made if new)")
    register.add_argument("--description")
    register.set_defaults(run=cmd_register)
    alias = what.add_parser("alias", help="point an alias at a version")
    alias.add_argument("model")
    alias.add_argument("alias")
    alias.add_argument("version", type=int)
    alias.add_argument("--protect", action="store_true", default=None)
    alias.add_argument("--unprotect", dest="protect", action="store_false")
    alias.set_defaults(run=cmd_alias)
    unalias = what.add_parser("unalias", help="remove an alias")
    unalias.add_argument("model")
    unalias.add_argument("alias")
    unalias.set_defaults(run=cmd_unalias)
