import json
import os
from pathlib import Path

import httpx
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from devtools import provider_login
from identity.models import Identity


class Command(BaseCommand):
    help = (
        "Link the demo user to its person at `make idp`'s provider, so that signing in "
        "through it as the console says lands on the dashboard (the demo's one way in). "
        "Learns the person's subject by signing in there once; idempotent."
    )

    def add_arguments(self, parser):
        parser.add_argument("--username", default="demo")
        parser.add_argument(
            "--idp-dir", default=os.environ.get("PORTAL_IDP_DIR", "/var/lib/portal-idp")
        )
        parser.add_argument(
            "--redirect", required=True, help="a redirect URI the provider's client accepts"
        )

    def handle(self, *args, username, idp_dir, redirect, **options):
        state = Path(idp_dir)
        try:
            env = provider_login.read_portal_env(state / "portal.env")
            person = json.loads((state / "users.json").read_text())["users"][username]
            issuer = env["PORTAL_OIDC_ISSUER"].rstrip("/")
            client = (env["PORTAL_OIDC_CLIENT_ID"], env["PORTAL_OIDC_CLIENT_SECRET"])
        except (OSError, ValueError, KeyError) as exc:
            raise CommandError(f"no identity provider in {state} (`make idp`): {exc}") from None
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"no portal user {username!r} (manage.py create_demo_user)")
        if Identity.objects.filter(user=user, issuer=issuer).exists():
            self.stdout.write(f"{username} is linked to its person at {issuer}")
            return
        try:
            subject = provider_login.subject_of(
                issuer, client, redirect, (username, person["password"])
            )
        except (provider_login.LoginFailed, httpx.HTTPError, OSError, ValueError) as exc:
            raise CommandError(
                f"the provider at {issuer} did not sign {username} in: {exc}"
            ) from None
        identity, _ = Identity.objects.get_or_create(
            issuer=issuer, subject=subject, defaults={"user": user}
        )
        if identity.user_id != user.pk:
            raise CommandError(f"that person is already {identity.user}'s identity")
        self.stdout.write(f"{username} linked to its person at {issuer}")
