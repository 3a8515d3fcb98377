from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from jobs import devcluster


class Command(BaseCommand):
    help = "Register the local dev cluster (make devcluster) with its pinned host key and accounts."

    def add_arguments(self, parser):
        parser.add_argument("--state-dir", default=None, help="default: settings.DEVCLUSTER_DIR")
        parser.add_argument(
            "--account",
            action="append",
            default=[],
            metavar="PORTAL_USER=CLUSTER_USER",
            help="map a portal user to a dev-cluster user (repeatable)",
        )
        parser.add_argument(
            "--ssh-auth",
            choices=["key_pair", "certificate"],
            default=None,
            help="how the portal logs in: the users' stored key pairs, or certificates signed "
            "by its CA (manage.py ssh_ca; no private key is kept). Default: as registered "
            "before (key_pair for a new one)",
        )

        parser.add_argument(
            "--default",
            action="store_true",
            help="make it the default cluster: where the launch form, the API and the CLI "
            "send a job that names no cluster (any other cluster stops being the default)",
        )

    def handle(self, *args, state_dir=None, account=(), ssh_auth=None, default=False, **options):
        accounts = {}
        for item in account:
            portal_user, sep, cluster_user = item.partition("=")
            if not sep or not portal_user or not cluster_user:
                raise CommandError(f"--account takes PORTAL_USER=CLUSTER_USER, not {item!r}")
            accounts[portal_user] = cluster_user
        try:
            info = devcluster.read_info(state_dir or settings.DEVCLUSTER_DIR)
            cluster = devcluster.register(info, accounts, ssh_auth, default=default)
        except (devcluster.DevclusterMissing, ValueError) as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(
            f"Registered cluster {cluster.name} at {cluster.ssh_host}:{cluster.ssh_port} "
            f"(host key {cluster.host_key_fingerprint}; SSH: {cluster.get_ssh_auth_display()})"
            + ("; the default cluster" if cluster.is_default else "")
        )
        for portal_user, cluster_user in accounts.items():
            self.stdout.write(f"  portal user {portal_user} -> cluster user {cluster_user}")
