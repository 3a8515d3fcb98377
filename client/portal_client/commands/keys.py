"""portal keys list, add, remove: the SSH public keys the portal may certify."""

from __future__ import annotations

from pathlib import Path

from portal_client import common
from portal_client.api import Client, PortalError
from portal_client.common import Output, job_id


def cmd_keys_list(client: Client, args, out: Output) -> int:
    keys = client.ssh_keys()
    rows = [
        [str(k["id"]), k["name"], k["fingerprint"], k["last_certified_at"] or "-"] for k in keys
    ]
    text = (
        common.table(rows, ["ID", "NAME", "FINGERPRINT", "LAST CERTIFIED"]) if rows else "no keys"
    )
    out.data(keys, text)
    return 0


def cmd_keys_add(client: Client, args, out: Output) -> int:
    path = Path(args.file).expanduser()
    if not path.name.endswith(".pub"):
        raise PortalError(f"{path} is not a .pub file: the portal takes public keys only.")
    try:
        text = path.read_text()[: 16 * 1024 + 1]
    except OSError as exc:
        raise PortalError(f"{path}: {exc.strerror}") from None
    key = client.add_ssh_key(text, args.name or "")
    out.data(key, f"added key {key['id']}: {key['name']} {key['fingerprint']}")
    return 0


def cmd_keys_remove(client: Client, args, out: Output) -> int:
    client.remove_ssh_key(args.id)
    out.data({"removed": args.id}, f"removed key {args.id}")
    return 0


def add_to(commands) -> None:
    keys = commands.add_parser(
        "keys",
        help="your SSH public keys, which `portal ssh` has certified",
        description="The public keys the portal may certify for you (for `portal ssh`).",
    )
    key_actions = keys.add_subparsers(dest="keys_cmd", metavar="ACTION", required=True)
    key_actions.add_parser("list", help="your keys").set_defaults(run=cmd_keys_list)
    add = key_actions.add_parser("add", help="add a public key (a .pub file)")
    add.add_argument("file", help="e.g. ~/.ssh/id_ed25519.pub")
    add.add_argument("--name", help="a name for it (default: the key's comment)")
    add.set_defaults(run=cmd_keys_add)
    remove = key_actions.add_parser("remove", help="remove a key")
    remove.add_argument("id", type=job_id)
    remove.set_defaults(run=cmd_keys_remove)
