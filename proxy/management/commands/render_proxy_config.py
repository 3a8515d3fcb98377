"""Write HAProxy's configuration for the session data path from the portal's settings."""

from pathlib import Path

from django.core.management.base import BaseCommand

from proxy.haproxy import render_config


class Command(BaseCommand):
    help = (
        "Print (or write) HAProxy's configuration for session links: "
        "render_proxy_config --bind :443 --tls-pem /etc/haproxy/sessions.pem --portal 127.0.0.1:8000"
    )

    def add_arguments(self, parser):
        parser.add_argument("--bind", required=True, help="address:port HAProxy listens on")
        parser.add_argument(
            "--tls-pem", help="certificate chain and key in one PEM file (omit for plain HTTP)"
        )
        parser.add_argument(
            "--portal", required=True, help="host:port of the portal's web server (gunicorn)"
        )
        parser.add_argument("--admin-socket", help="default: the first of PROXY_INSTANCES")
        parser.add_argument(
            "--run-as",
            metavar="USER:GROUP",
            help="drop root to USER; GROUP (the portal's) may use the admin socket",
        )
        parser.add_argument(
            "--redirect-http", metavar="BIND", help="also listen here, redirecting to HTTPS"
        )
        parser.add_argument("-o", "--output", help="write here instead of printing")

    def handle(self, *args, **options):
        text = render_config(
            bind=options["bind"],
            tls_pem=options["tls_pem"],
            portal_upstream=options["portal"],
            admin_socket=options["admin_socket"],
            run_as=tuple(options["run_as"].split(":", 1)) if options["run_as"] else None,
            redirect_bind=options["redirect_http"],
        )
        if options["output"]:
            # It holds the session cookie's key: readable by root and HAProxy's group only.
            out = Path(options["output"])
            out.touch(mode=0o640)
            out.chmod(0o640)
            out.write_text(text)
        else:
            self.stdout.write(text, ending="")
