"""Checking catalog images on a cluster over SSH (catalog/image_check.py runs the
command), recorded as ``ImageCheck`` rows. Outside the model: a model imports no SSH code."""

from __future__ import annotations

from django.core.exceptions import ValidationError

from catalog import image_check
from catalog.models import ImageCheck
from clusters import pool, ssh
from clusters.models import ClusterAccount
from clusters.models.clusters import Cluster
from identity import audit


def run(images, cluster: Cluster, user) -> list[ImageCheck]:
    """Check ``images`` on ``cluster`` in one SSH command, as the admin's own cluster
    account or else the cluster's service account (never as another user), and record
    the outcome per image."""
    images = list(images)
    account = (
        ClusterAccount.for_user(cluster, user)
        or ClusterAccount.objects.filter(cluster=cluster, user__isnull=True).first()
    )
    if account is None:
        findings = [
            [
                f"✘ not checked: you have no account on {cluster.name} and it has no "
                "service account (add one on the Account page or in the admin)"
            ]
        ] * len(images)
        audit.record(
            audit.Action.CATALOG_CHECK,
            audit.Outcome.REFUSED,
            user=user,
            cluster=cluster,
            target=", ".join(i.slug for i in images),
            message="no cluster account of the admin's and no service account",
        )
    else:
        try:
            with audit.action(
                audit.Action.CATALOG_CHECK,
                user=user,
                account=account,
                target=", ".join(i.slug for i in images),
            ) as entry:
                found = pool.with_connection(
                    account, lambda conn: image_check.check_images(conn, images)
                )
                entry.note(f"{len(images)} image(s) checked")
            mark = {True: "✔", False: "✘", None: "·"}
            findings = [[f"{mark[f.ok]} {f.text}" for f in each] for each in found]
        except (ssh.ClusterError, ValidationError) as exc:
            findings = [[f"✘ could not check on {cluster.name}: {exc}"]] * len(images)
    return ImageCheck.record(images, cluster, account, findings)
