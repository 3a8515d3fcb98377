"""Where a job goes when it names no cluster (Cluster.objects.default_for, one rule for
the launch form, the API and the CLI): the cluster an admin marked default; else the
user's last cluster; else the first by name. At most one default (a database constraint)."""

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from clusters.models import Cluster
from jobs.launch import LaunchForm, launch_initial
from tests import factories

pytestmark = pytest.mark.django_db


@pytest.fixture
def two_clusters(owner):
    """``condorpool`` (first by name, HTCondor) and ``devcluster`` (Slurm), the owner with
    an account on both, as `make demo` registers them."""
    made = {}
    for name, scheduler in (("devcluster", "slurm"), ("condorpool", "htcondor")):
        cluster = factories.cluster(name, scheduler=scheduler)
        factories.partition(cluster, "cpu", is_default=True)
        factories.account(cluster, owner, "alice")
        made[name] = cluster
    return made


def test_without_a_default_or_a_job_the_first_by_name(two_clusters, owner):
    assert Cluster.objects.default_for(owner).name == "condorpool"


def test_without_a_default_the_users_last_cluster(two_clusters, owner, outsider):
    factories.job(owner, two_clusters["condorpool"])
    factories.job(owner, two_clusters["devcluster"])
    # Someone else's later job does not move the owner's choice.
    factories.account(two_clusters["condorpool"], outsider, "eve")
    factories.job(outsider, two_clusters["condorpool"])
    assert Cluster.objects.default_for(owner).name == "devcluster"
    assert Cluster.objects.default_for(outsider).name == "condorpool"


def test_an_admins_default_wins_over_the_last_cluster_and_the_first(two_clusters, owner):
    factories.job(owner, two_clusters["condorpool"])
    two_clusters["devcluster"].mark_default()
    assert Cluster.objects.default_for(owner).name == "devcluster"
    assert launch_initial(owner)["cluster"] == "devcluster"


def test_clusters_the_user_cannot_use_are_passed_over(two_clusters, owner, outsider):
    two_clusters["devcluster"].mark_default()
    factories.account(two_clusters["condorpool"], outsider, "eve")
    # The outsider has an account on condorpool only: the default would refuse them.
    assert Cluster.objects.default_for(outsider).name == "condorpool"
    two_clusters["devcluster"].enabled = False
    two_clusters["devcluster"].save()
    assert Cluster.objects.default_for(owner).name == "condorpool"


def test_a_user_without_any_account_gets_the_rule_over_every_enabled_cluster(two_clusters):
    nobody = factories.user("newcomer")
    assert Cluster.objects.default_for(nobody).name == "condorpool"
    two_clusters["devcluster"].mark_default()
    assert Cluster.objects.default_for(nobody).name == "devcluster"


def test_no_enabled_cluster_no_default(owner):
    factories.cluster("off", enabled=False)
    assert Cluster.objects.default_for(owner) is None


def test_at_most_one_default_cluster(two_clusters):
    two_clusters["devcluster"].mark_default()
    with pytest.raises(IntegrityError), transaction.atomic():
        Cluster.objects.filter(name="condorpool").update(is_default=True)
    # The admin's form says so in words (the constraint's message), before the database.
    other = two_clusters["condorpool"]
    other.is_default = True
    with pytest.raises(ValidationError, match="already the default"):
        other.full_clean()


def test_marking_a_default_unmarks_the_other(two_clusters):
    two_clusters["devcluster"].mark_default()
    two_clusters["condorpool"].mark_default()
    assert list(Cluster.objects.filter(is_default=True).values_list("name", flat=True)) == [
        "condorpool"
    ]


@pytest.mark.parametrize(
    ("name", "label"), [("devcluster", "Slurm account"), ("condorpool", "Accounting group")]
)
def test_the_account_field_is_named_as_the_clusters_scheduler_names_it(
    two_clusters, owner, name, label
):
    initial = LaunchForm(initial={"cluster": name}, user=owner)
    assert initial.fields["account"].label == label
    bound = LaunchForm(data={"cluster": name}, user=owner)
    assert bound.fields["account"].label == label
