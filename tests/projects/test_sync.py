"""The sync makes a cluster's projects and memberships what the scheduler says, for the
people whose cluster user is proven theirs (never a name they typed)."""

import pytest

from clusters.models import ClusterAccount
from projects import sync
from projects.models import Membership, Project, Role
from schedulers.seam import AccountRecord, AccountsRead
from tests import factories

pytestmark = pytest.mark.django_db


def read(**accounts):
    """AccountsRead of {account: (users, coordinators)}; defaults: each user's first."""
    records, defaults = [], {}
    for name, (users, coordinators) in accounts.items():
        records.append(AccountRecord(name, frozenset(users), frozenset(coordinators)))
        for u in users:
            defaults.setdefault(u, name)
    return AccountsRead(tuple(records), defaults)


@pytest.fixture
def people(cluster):
    pi = factories.user("pi")
    student = factories.user("student")
    typed = factories.user("typed")
    factories.account(cluster, pi, "hpcpi")
    factories.account(cluster, student, "hpcstudent", ClusterAccount.MappedBy.USER_MAP)
    # Typed by its person, not proven: it never makes them a member of anything.
    factories.account(cluster, typed, "hpcpi2", ClusterAccount.MappedBy.TYPED)
    return pi, student, typed


def members(project_name):
    return sorted(
        (m.user.username, m.role)
        for m in Membership.objects.filter(project__name=project_name).select_related(
            "user", "project"
        )
    )


def test_accounts_become_projects_with_proven_members_and_coordinators_as_managers(
    cluster, people, settings
):
    settings.PORTAL_PROJECT_DEFAULT_ROLE = "viewer"
    outcome = sync.apply(
        cluster,
        read(
            vision=({"hpcpi", "hpcstudent", "hpcpi2", "nobody"}, {"hpcpi"}),
            nlp=({"hpcpi"}, ()),
        ),
    )
    assert (outcome.projects, outcome.joined, outcome.left) == (2, 3, 0)
    assert members("vision") == [("pi", Role.MANAGER), ("student", Role.VIEWER)]
    assert members("nlp") == [("pi", Role.VIEWER)]
    assert Membership.objects.get(user__username="student").is_default  # vision: its first


def test_joins_and_leaves_follow_the_scheduler_and_a_gone_account_keeps_its_row(cluster, people):
    sync.apply(cluster, read(vision=({"hpcpi", "hpcstudent"}, ()), nlp=({"hpcpi"}, ())))
    outcome = sync.apply(cluster, read(vision=({"hpcpi"}, ())))
    assert (outcome.joined, outcome.left, outcome.gone) == (0, 2, 1)
    assert members("vision") == [("pi", "none")]  # the portal's default: none
    nlp = Project.objects.get(name="nlp")
    assert nlp.gone_at is not None and not nlp.memberships.exists()
    sync.apply(cluster, read(vision=({"hpcpi"}, ()), nlp=({"hpcpi"}, ())))
    assert Project.objects.get(name="nlp").gone_at is None  # back


def test_a_disabled_or_unsealed_account_is_no_member(cluster, people):
    pi, student, _ = people
    ClusterAccount.objects.filter(user=student).update(username="hpcpi3")  # around the portal
    sync.apply(cluster, read(vision=({"hpcpi", "hpcpi3"}, ())))
    assert members("vision") == [("pi", "none")]


def test_provider_groups_extend_a_project_and_make_managers(cluster, people, settings):
    from django.core import checks

    from projects.apps import check_group_grants

    pi, student, typed = people
    reader = factories.user("reader")
    for person, groups in ((pi, ["vision-pis"]), (reader, ["vision-readers"])):
        factories.identity(person, "https://idp.example.org", person.username)
        person.identities.update(groups=groups)
    settings.PORTAL_PROJECT_GROUPS = [
        "vision-pis=testcluster/vision:manager",
        "vision-readers=testcluster/vision",
        "ghosts=testcluster/no-such-account:manager",  # a group never invents an account
        "vision-readers=othercluster/vision",
    ]
    sync.apply(cluster, read(vision=({"hpcpi", "hpcstudent"}, ())))
    assert members("vision") == [
        ("pi", Role.MANAGER),
        ("reader", Role.VIEWER),
        ("student", "none"),
    ]
    only_by_group = Membership.objects.get(user=reader)
    assert only_by_group.cluster_user == "" and not only_by_group.is_default
    assert not Project.objects.filter(name="no-such-account").exists()
    # Out of the group: out of the project at the next sync.
    reader.identities.update(groups=[])
    sync.apply(cluster, read(vision=({"hpcpi", "hpcstudent"}, ())))
    assert not Membership.objects.filter(user=reader).exists()

    settings.PORTAL_PROJECT_GROUPS = ["no equals sign", "g=c/a:owner"]
    errors = check_group_grants()
    assert [e.id for e in errors] == ["projects.E001", "projects.E001"]
    assert all(isinstance(e, checks.Error) for e in errors)


def test_a_group_narrows_a_catch_all_account_to_its_people(cluster, people, settings):
    pi, student, typed = people
    factories.identity(pi, "https://idp.example.org", "pi")
    pi.identities.update(groups=["lab-a"])
    settings.PORTAL_PROJECT_GROUPS = ["lab-a=testcluster/everyone:only"]
    sync.apply(cluster, read(everyone=({"hpcpi", "hpcstudent"}, ()), vision=({"hpcstudent"}, ())))
    assert [m[0] for m in members("everyone")] == ["pi"]
    assert [m[0] for m in members("vision")] == ["student"]  # other projects as they were


def test_a_persons_own_read_places_only_them_for_charging_and_never_as_coordinator(
    cluster, people, settings
):
    """Without a service account each read is its reader's word about themselves: what
    hpcpi's login prints about hpcstudent (or about hpcpi's own coordinator role, or
    anyone's default) moves nobody, and hpcpi's own association gives no role."""
    settings.PORTAL_PROJECT_DEFAULT_ROLE = "member"
    forged = read(
        vision=({"hpcpi", "hpcstudent"}, {"hpcpi"}),
        nlp=({"hpcpi"}, {"hpcpi"}),
    )
    forged = AccountsRead(forged.accounts, {"hpcpi": "nlp", "hpcstudent": "nlp"})
    sync.apply(cluster, forged, frozenset({"hpcpi"}))
    assert members("vision") == [("pi", Role.NONE)]
    assert members("nlp") == [("pi", Role.NONE)]
    pi_in_nlp = Membership.objects.get(project__name="nlp")
    assert pi_in_nlp.self_reported and not pi_in_nlp.coordinator and pi_in_nlp.is_default
    assert not Membership.objects.filter(user__username="student").exists()


def test_people_not_read_keep_their_memberships_and_a_project_goes_when_empty(
    cluster, people, settings
):
    settings.PORTAL_PROJECT_DEFAULT_ROLE = "viewer"
    sync.apply(cluster, read(vision=({"hpcpi", "hpcstudent"}, {"hpcpi"})))  # the service's
    # hpcstudent's own read no longer names vision; hpcpi was not read this time.
    outcome = sync.apply(cluster, read(other=({"hpcstudent"}, ())), frozenset({"hpcstudent"}))
    assert members("vision") == [("pi", Role.MANAGER)]
    assert members("other") == [("student", Role.NONE)]
    assert outcome.gone == 0 and Project.objects.get(name="vision").gone_at is None
    # hpcpi's read names nothing now: vision has nobody left and nobody reports it.
    outcome = sync.apply(cluster, read(), frozenset({"hpcpi"}))
    assert outcome.gone == 1 and Project.objects.get(name="vision").gone_at is not None
    assert members("other") == [("student", Role.NONE)]


def test_without_a_service_account_readers_take_turns_and_read_themselves(
    cluster, people, settings, monkeypatch
):
    from clusters import pool

    pi, student, _ = people
    monkeypatch.setattr(sync, "MAX_READERS", 1)
    logins = []

    def login(account, action):
        logins.append(account.username)
        return read(vision=({"hpcpi", "hpcstudent"}, {"hpcpi", "hpcstudent"}))

    monkeypatch.setattr(pool, "with_connection", login)
    evidence = sync.read_accounts(cluster)
    assert evidence is not None and evidence.speaks_for == frozenset({"hpcpi"})
    assert evidence.read.accounts == (AccountRecord("vision", frozenset({"hpcpi"})),)
    assert sync.read_accounts(cluster).speaks_for == frozenset({"hpcstudent"})
    assert logins == ["hpcpi", "hpcstudent"]  # the typed hpcpi2 never reads
    factories.account(cluster, None, "svc")
    assert sync.read_accounts(cluster).speaks_for is None
    assert logins[-1] == "svc"
