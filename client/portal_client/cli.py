"""The ``portal`` command.

    portal submit --container pytorch --partition gpu --gpus 2 --time 60 -- python train.py
    portal jobs | show ID | logs ID [-f] | cancel ID | open ID | containers | clusters | login
    portal sweep create sweep.yaml [--wait] | sweep list | sweep show ID | sweep cancel ID

The portal's address and a personal token come from PORTAL_URL / PORTAL_TOKEN or the
config file written by ``portal login`` (see portal_client.config)."""

from __future__ import annotations

import argparse
import os
import sys

from portal_client import __version__, commands
from portal_client.api import Client, PortalError
from portal_client.commands.login import cmd_login
from portal_client.common import EPILOG, Output
from portal_client.config import ConfigError, load_config


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="portal",
        description="Submit, follow and cancel jobs on the HPC portal.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("--json", action="store_true", help="print the API's JSON instead")
    parser.add_argument("--timeout", type=float, default=30, help="seconds per request")
    subcommands = parser.add_subparsers(dest="cmd", metavar="COMMAND", required=True)

    commands.add_all(subcommands)
    return parser


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = build_parser()
    args = parser.parse_args(argv)
    own = ("-i", "--identity", "--print-config", "--dry-run")
    if args.cmd == "ssh" and args.command and args.command[0].startswith(own):
        parser.error(f"{args.command[0]} goes before the job id (what follows it is the command)")
    # argparse.REMAINDER keeps the `--` itself (Python 3.11); it is not part of the command.
    if getattr(args, "command", None) and args.command[0] == "--":
        args.command = args.command[1:]
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    out = Output(args.json)
    try:
        if args.cmd == "login":
            return cmd_login(args, out)
        config = load_config()
        client = Client(config.url, config.token, timeout=args.timeout, ca_bundle=config.ca_bundle)
        return args.run(client, args, out)
    except (PortalError, ConfigError) as exc:
        print(f"portal: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `portal logs 12 | head`
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
