"""What register_devcluster and register_condorpool share: read the info file a dev set-up
script wrote (cluster.json, pool.json) and register that cluster with its pinned host key,
its SSH authentication and the accounts given as PORTAL_USER=CLUSTER_USER."""

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from devtools import devcluster


class RegisterCommand(BaseCommand):
    state_setting = "DEVCLUSTER_DIR"  # the setting naming the set-up script's state folder
    info_file = "cluster.json"
    default_name = "devcluster"
    noun = "cluster"  # in messages: "Registered cluster devcluster at ..."
    user_noun = "CLUSTER_USER"

    def add_arguments(self, parser):
        parser.add_argument(
            "--state-dir", default=None, help=f"default: settings.{self.state_setting}"
        )
        parser.add_argument(
            "--account",
            action="append",
            default=[],
            metavar=f"PORTAL_USER={self.user_noun}",
            help=f"map a portal user to a user of the {self.noun} (repeatable)",
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
                raise CommandError(f"--account takes PORTAL_USER={self.user_noun}, not {item!r}")
            accounts[portal_user] = cluster_user
        users = get_user_model().objects
        missing = sorted(name for name in accounts if not users.filter(username=name).exists())
        if missing:
            raise CommandError(f"No portal user named {', '.join(missing)}: create them first.")
        try:
            info = devcluster.read_info(
                state_dir or getattr(settings, self.state_setting),
                self.info_file,
                self.default_name,
            )
            cluster = devcluster.register(info, accounts, ssh_auth, default=default)
        except (devcluster.DevclusterMissing, ValueError) as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(
            f"Registered {self.noun} {cluster.name} at {cluster.ssh_host}:{cluster.ssh_port} "
            f"(host key {cluster.host_key_fingerprint}; SSH: {cluster.get_ssh_auth_display()})"
            + ("; the default cluster" if cluster.is_default else "")
        )
        for portal_user, cluster_user in accounts.items():
            self.stdout.write(f"  portal user {portal_user} -> {self.noun} user {cluster_user}")
