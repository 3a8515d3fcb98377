"""Write HAProxy's configuration for the session data path from the portal's settings."""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from proxy.haproxy import render_config


def run_as(value: str) -> tuple[str, str]:
    """USER:GROUP, or USER alone for a group of the same name (Debian's haproxy:haproxy)."""
    user, _, group = value.partition(":")
    return user, group or user


class Command(BaseCommand):
    help = (
        "Print (or write) HAProxy's configuration for session links: "
        "render_proxy_config --bind :443 --tls-pem /etc/haproxy/sessions.pem "
        "--portal 10.0.0.11:8000 --portal 10.0.0.12:8000"
    )

    def add_arguments(self, parser):
        parser.add_argument("--bind", required=True, help="address:port HAProxy listens on")
        parser.add_argument(
            "--tls-pem", help="certificate chain and key in one PEM file (omit for plain HTTP)"
        )
        parser.add_argument(
            "--portal",
            required=True,
            action="append",
            help="host:port of a portal web server (gunicorn); repeat it for every instance",
        )
        parser.add_argument("--admin-socket", help="default: the first of PROXY_INSTANCES")
        parser.add_argument(
            "--run-as",
            metavar="USER:GROUP",
            help="drop root to HAProxy's own user and group (e.g. haproxy:haproxy)",
        )
        parser.add_argument(
            "--admin-group",
            metavar="GROUP",
            help="the portal's group: it may use the admin socket (and nothing else of HAProxy)",
        )
        parser.add_argument(
            "--redirect-http", metavar="BIND", help="also listen here, redirecting to HTTPS"
        )
        parser.add_argument("-o", "--output", help="write here instead of printing")

    def handle(self, *args, **options):
        try:
            text = render_config(
                bind=options["bind"],
                tls_pem=options["tls_pem"],
                portal_upstream=options["portal"],
                admin_socket=options["admin_socket"],
                run_as=run_as(options["run_as"]) if options["run_as"] else None,
                admin_group=options["admin_group"],
                redirect_bind=options["redirect_http"],
            )
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        if options["output"]:
            # It holds the session cookie's key: readable by root and HAProxy's group only.
            out = Path(options["output"])
            out.touch(mode=0o640)
            out.chmod(0o640)
            out.write_text(text)
        else:
            self.stdout.write(text, ending="")
