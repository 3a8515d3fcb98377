"""Shared fixtures: an owner, a staff user and an outsider; the real dev cluster."""

import os
import subprocess
from pathlib import Path

import pytest
from django.conf import settings

from devtools import devcluster as devcluster_mod
from jobs.models import Job
from tests import factories, polling
from tests import idp as idp_mod
from tests import mailbox as mailbox_mod
from tests.liveserver import chunked_request_bodies  # noqa: F401 (a fixture, shared)

# --- the suite in parts ---------------------------------------------------------------
# deploy/run-tests.sh runs the tests that use the Slurm dev cluster beside all the others
# (`--part=other`: units, the HTCondor pool, the proxy), in separate processes. The Slurm
# tests come in three parts: `slurm-alone`, the tests that change what every Slurm test
# shares (they restart slurmctld, take every GPU, rewrite a cluster user's ~/.bashrc, make
# reservations or accounts: marked `alone`), run first and by themselves; then `slurm-1` and `slurm-2`, the
# rest, two at once (each test file wholly in one, alternately by name: module fixtures
# stay in one process; a test that asks for a node's every GPU waits long enough for the
# other half's GPU job to end). Each part has its own database, cache keys and Celery
# queues, and cancels only its own jobs. The other part shares no daemon a test stops or restarts:
# the Slurm tests kill slurmctld, the pool's tests stop its schedd and remove their user's
# jobs. Each test is in exactly one part. The identity provider (`idp` marker,
# `idp_provider` fixture) is in the other part unless the test also uses the Slurm
# cluster; no test stops it, so any part may use it. The same holds for the mail server
# (`mail` marker, `mailbox` fixture): never stopped by a test, each test reads only the
# messages sent to an address of its own.
SLURM_SHARED = ("slurm-1", "slurm-2")
PARTS = ("slurm-alone", *SLURM_SHARED, "other")


def pytest_addoption(parser):
    parser.addoption("--part", choices=PARTS, default=None, help="run only this part of the suite")


def part_of(item, files: list[str]) -> str:
    """``files``: the sorted paths of the Slurm tests' files being collected."""
    uses_pool = item.get_closest_marker("condorpool") or "condorpool_info" in item.fixturenames
    # The dev cluster's data-transfer node only (the file manager: no Slurm, and an sshd
    # of its own that no Slurm test restarts): the other part.
    files_only = "filecluster" in item.fixturenames and "devcluster" not in item.fixturenames
    uses_slurm = not files_only and (
        item.get_closest_marker("devcluster") or "devcluster_info" in item.fixturenames
    )
    if not uses_slurm or uses_pool:
        return "other"
    if item.get_closest_marker("alone"):
        return "slurm-alone"
    return SLURM_SHARED[files.index(str(item.path)) % len(SLURM_SHARED)]


def pytest_collection_modifyitems(config, items):
    scale_timeouts(config, items)
    part = config.getoption("--part")
    if part is None:
        return
    files = sorted({str(item.path) for item in items})
    keep, drop = [], []
    for item in items:
        (keep if part_of(item, files) == part else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def scale_timeouts(config, items) -> None:
    """pytest-timeout's limits (pyproject's 300 s, @pytest.mark.timeout(N)) grow with
    PORTAL_TEST_TIMEOUT_SCALE, as every wait in the tests does (tests/polling.py): a test
    given more time to wait is not killed for taking it."""
    factor = polling.scale()
    if factor == 1:
        return
    import pytest_timeout

    default = pytest_timeout.get_env_settings(config).timeout
    for item in items:
        marker = item.get_closest_marker("timeout")
        kwargs = dict(marker.kwargs) if marker else {}
        timeout = kwargs.pop("timeout", marker.args[0] if marker and marker.args else default)
        if timeout:
            item.add_marker(pytest.mark.timeout(float(timeout) * factor, **kwargs), append=False)


@pytest.fixture(autouse=True)
def _plain_static_storage(settings):
    """In-process tests need no collectstatic; the served stack uses the manifest storage."""
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }


@pytest.fixture(autouse=True)
def _no_shared_proxy(settings, tmp_path_factory):
    """Routes pushed by in-process tests go to no HAProxy (tests that want one start
    their own), never to a `make demo` HAProxy on this machine."""
    settings.PROXY_INSTANCES = [f"unix:{tmp_path_factory.getbasetemp()}/no-proxy.sock"]
    settings.PROXY_MAP_PATH = str(tmp_path_factory.getbasetemp() / "no-proxy.map")


@pytest.fixture(autouse=True)
def queued_notifications(request, monkeypatch):
    """Jobs that end in this process queue notification tasks (notifications/
    receivers.py): record them instead of leaving them in the broker for some later worker
    (a `make demo` worker on the same Redis would look the ids up in its own database).
    Tests marked ``mail`` send for real."""
    from notifications import tasks as notification_tasks

    calls: list[tuple] = []
    if request.node.get_closest_marker("mail") is None:
        for task in (notification_tasks.notify_job, notification_tasks.notify_experiment):
            monkeypatch.setattr(task, "delay", lambda *a, **k: calls.append((a, k)))
        monkeypatch.setattr(
            notification_tasks.deliver_email, "apply_async", lambda *a, **k: calls.append((a, k))
        )
    return calls


@pytest.fixture(autouse=True)
def queued_syncs(monkeypatch) -> list:
    """One job's sync queued by a web request (jobs.tasks.sync_soon), recorded: no worker
    runs in this process (tests that want one start a tests.livestack stack)."""
    from jobs import tasks

    calls: list = []
    monkeypatch.setattr(tasks.sync_job, "delay", lambda *a, **k: calls.append(a))
    return calls


@pytest.fixture(autouse=True)
def outbox_dues(request, monkeypatch) -> list:
    """What jobs' changes in this process owe (jobs/outbox.py), recorded instead of queued
    for some later worker: a list of outbox.Due. Tests marked ``mail`` queue for real."""
    from jobs import outbox

    dues: list = []
    if request.node.get_closest_marker("mail") is None:
        for consumer in list(outbox.CONSUMERS):
            monkeypatch.setitem(outbox.CONSUMERS, consumer, dues.extend)
    return dues


@pytest.fixture
def notify_now(monkeypatch, outbox_dues) -> None:
    """The outbox's ``notify`` consumer runs each owed notification at once, in this
    process (the other consumers still only record)."""
    from jobs import outbox
    from notifications import tasks as notification_tasks

    def run(dues: list) -> None:
        outbox_dues.extend(dues)
        for due in dues:
            notification_tasks.notify_job.apply(
                args=(due.job_id, due.argument), kwargs={"outbox_event": due.event_id}
            )

    monkeypatch.setitem(outbox.CONSUMERS, "notify", run)


@pytest.fixture
def owner(db):
    return factories.user("owner", "owner-pass-123")


@pytest.fixture
def outsider(db):
    return factories.user("outsider", "outsider-pass-123")


@pytest.fixture
def staff(db):
    return factories.user("staff", "staff-pass-123", superuser=True)


@pytest.fixture
def cluster(db):
    """testcluster: partition gpu (the default; v100 and a100) and a smaller cpu one."""
    cluster = factories.cluster("testcluster", scratch_root="/scratch/{user}")
    factories.partition(
        cluster,
        "gpu",
        gpu_types="v100,a100",
        max_gpus_per_job=4,
        max_cpus_per_job=32,
        max_memory_gb=128,
        max_time_minutes=1440,
        default_time_minutes=60,
        is_default=True,
    )
    factories.partition(
        cluster,
        "cpu",
        max_cpus_per_job=8,
        max_memory_gb=16,
        max_time_minutes=30,
        default_time_minutes=10,
    )
    return cluster


@pytest.fixture
def catalog(cluster, owner):
    """An API-ready portal: a launchable image (with its own command), a deprecated one
    (still offered), a disabled one (not offered), and the owner's account on the cluster.
    Returns the cluster."""
    factories.image("python", "Python", sort_order=1, default_command="python train.py")
    factories.image(
        "legacy", "Legacy", sort_order=0, deprecated=True, deprecation_note="Use Python."
    )
    factories.image("old", "Old", enabled=False)
    factories.account(cluster, owner, "alice")
    return cluster


@pytest.fixture
def image(db):
    return factories.image(
        "pytorch",
        "PyTorch",
        version="2.5",
        runtime="apptainer",
        location="/shared/images/pytorch.sif",
    )


@pytest.fixture
def running_notebook(owner, cluster):
    """A notebook job the scheduler reports running (no real Slurm job behind it)."""
    return factories.job(
        owner,
        cluster,
        "",
        partition=None,
        image=factories.image("host-notebook"),
        kind=Job.Kind.NOTEBOOK,
        memory_gb=4,
        time_limit_minutes=60,
        state="running",
        node="127.0.0.1",  # where the tests' stand-in notebooks listen
    )


# --- the real dev cluster ------------------------------------------------------


def _devcluster_required() -> bool:
    return os.environ.get("PORTAL_REQUIRE_DEVCLUSTER") == "1"


@pytest.fixture(scope="session")
def devcluster_info() -> dict:
    """cluster.json written by `make devcluster`; skips (or fails, when required) without it."""
    try:
        return devcluster_mod.read_info(Path(settings.DEVCLUSTER_DIR))
    except devcluster_mod.DevclusterMissing as exc:
        if _devcluster_required():
            pytest.fail(f"PORTAL_REQUIRE_DEVCLUSTER=1 but {exc}")
        pytest.skip(str(exc))


@pytest.fixture
def devcluster(db, devcluster_info, owner, cancel_leftover_slurm_jobs):
    """The dev cluster registered in the test database, ``owner`` mapped to its first user."""
    return devcluster_mod.register(devcluster_info, {"owner": devcluster_info["default_user"]})


@pytest.fixture
def filecluster(db, devcluster_info, owner):
    """The dev cluster as the file manager sees it: registered through its data-transfer
    node's sshd (``dtn_ssh_port``), ``owner`` mapped to its second user. Tests that use
    only files (no Slurm) run beside the Slurm part this way: the Slurm part restarts the
    login node's sshd and ends the first user's sessions, never these."""
    info = {**devcluster_info, "ssh_port": devcluster_info.get("dtn_ssh_port")}
    if not info["ssh_port"]:
        pytest.fail("cluster.json has no dtn_ssh_port: run `make devcluster` again")
    second = next(u for u in devcluster_info["users"] if u != devcluster_info["default_user"])
    return devcluster_mod.register(info, {"owner": second})


@pytest.fixture
def cancel_leftover_slurm_jobs(db, devcluster_info):
    """Even when a test fails, its Slurm jobs must not hold resources for the next one.

    Torn down before the database is flushed, so it still sees the test's jobs.
    """
    yield
    info = devcluster_info
    # Only Slurm's ids: an HTCondor job's "12.0" would name step 0 of Slurm job 12. Each
    # cluster user's own (hpcuser2's too: a job of theirs left running held a node for the
    # next tests).
    by_user: dict[str, list[str]] = {}
    for user, sid in (
        Job.objects.filter(cluster__scheduler="slurm")
        .exclude(scheduler_job_id="")
        .values_list("cluster_account__username", "scheduler_job_id")
    ):
        by_user.setdefault(user or info["default_user"], []).append(sid)
    for user, ids in by_user.items():
        subprocess.run(["scancel", "-u", user, *ids], capture_output=True, timeout=30)


# --- the real HTCondor pool ----------------------------------------------------------


def _required() -> bool:
    return os.environ.get("PORTAL_REQUIRE_CONDORPOOL") == "1"


@pytest.fixture(scope="session")
def condorpool_info() -> dict:
    """pool.json written by `make condorpool`; skips (or fails, when required) without it."""
    try:
        return devcluster_mod.read_info(Path(settings.CONDORPOOL_DIR), "pool.json", "condorpool")
    except devcluster_mod.DevclusterMissing as exc:
        if _required():
            pytest.fail(f"PORTAL_REQUIRE_CONDORPOOL=1 but {exc}")
        pytest.skip(str(exc))


def as_pool_root(*argv: str, check: bool = True) -> subprocess.CompletedProcess:
    """An HTCondor command as root inside the pool's root (what an admin would run)."""
    root = Path(settings.CONDORPOOL_DIR) / "root"
    return subprocess.run(
        ["chroot", str(root), *argv],
        capture_output=True,
        text=True,
        timeout=60,
        check=check,
        env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"},
    )


@pytest.fixture
def condorpool(db, condorpool_info, owner):
    """The pool registered in the test database, ``owner`` mapped to its first user; the
    user's jobs are removed afterwards, even when the test failed."""
    cluster = devcluster_mod.register(condorpool_info, {"owner": condorpool_info["default_user"]})
    yield cluster
    as_pool_root("condor_rm", condorpool_info["default_user"], check=False)


# --- either real scheduler ---------------------------------------------------------------

# The fixtures each real cluster is registered and described by, per Cluster.scheduler.
REAL_CLUSTERS = {
    "slurm": ("devcluster", "devcluster_info"),
    "htcondor": ("condorpool", "condorpool_info"),
}


@pytest.fixture(
    params=[
        pytest.param("slurm", marks=pytest.mark.devcluster),
        pytest.param("htcondor", marks=pytest.mark.condorpool),
    ]
)
def scheduler_cluster(request):
    """The real cluster of each scheduler in turn (tests/scheduling/: one test of a behaviour
    both have): the dev cluster (Slurm), then the pool (HTCondor), registered by their own
    fixtures (``owner`` mapped to its first user, its jobs cancelled afterwards).

    Each item asks for its own cluster's fixtures only, by name when it runs, never
    through its signature: part_of() reads the param's marker and puts the Slurm item in
    the "slurm" part, the HTCondor one in "other". (A signature naming condorpool_info
    would put the Slurm item in "other" too, beside the tests that stop the pool's schedd,
    while the "slurm" part kills slurmctld under it.)"""
    return request.getfixturevalue(REAL_CLUSTERS[request.param][0])


@pytest.fixture
def scheduler_info(request, scheduler_cluster) -> dict:
    """cluster.json or pool.json: what `make devcluster` or `make condorpool` says of the
    cluster under test (scheduler_cluster)."""
    return request.getfixturevalue(REAL_CLUSTERS[scheduler_cluster.scheduler][1])


# --- the real OpenID Connect provider ------------------------------------------------


@pytest.fixture(scope="session")
def idp_provider() -> idp_mod.Provider:
    """The provider `make idp` started (tests/idp.py); skips (or fails, when required)
    without it."""
    return idp_mod.provider()


@pytest.fixture(scope="module")
def oidc_test_provider():
    """An in-test OpenID Connect provider (tests/oidcprovider.py: HTTP in a thread, real
    keys) for the unit tests of sign-in and API tokens; the real one is idp_provider."""
    from tests.oidcprovider import Provider

    running = Provider()
    yield running
    running.close()


# --- the real mail server ---------------------------------------------------------------


@pytest.fixture
def mailbox(settings) -> mailbox_mod.Mailbox:
    """The mail server `make mail` started (tests/mailbox.py), and Django's email sent to it;
    skips (or fails, when required) without it."""
    box = mailbox_mod.mailbox()
    for name, value in box.settings().items():
        setattr(settings, name, value)
    return box


# --- SSH certificates (clusters in certificate mode) -----------------------------------------


def _edit_trusted_ca_keys(path: str, *, add: str = "", remove: str = "") -> None:
    """Add or remove one line of an sshd's TrustedUserCAKeys file, in place under flock on
    the file (deploy/*/up.sh takes the same lock; both test parts share the sshd)."""
    import fcntl

    with open(path, "r+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        lines = [line for line in fh.read().splitlines() if line and line != remove]
        if add and add not in lines:
            lines.append(add)
        fh.seek(0)
        fh.write("".join(f"{line}\n" for line in lines))
        fh.truncate()


@pytest.fixture
def trusted_ca(tmp_path, settings):
    """``trust(info, name)``: a CA of the test's own (a key file in tmp_path), its public key
    added to the trusted CA file of the cluster ``info`` describes (cluster.json, pool.json)
    and removed afterwards. The portal signs with the CAs trusted so far, the newest first
    (as after a rotation); returns the CA's key file."""
    from clusters import certs

    added: list[tuple[str, str]] = []
    signing: list[str] = []

    def trust(info: dict, name: str = "ca") -> Path:
        path = tmp_path / f"{info['name']}-{name}"
        certs.new_ca_file(path)
        line = Path(f"{path}.pub").read_text().strip()
        _edit_trusted_ca_keys(info["trusted_user_ca_keys"], add=line)
        added.append((info["trusted_user_ca_keys"], line))
        signing.insert(0, str(path))
        settings.PORTAL_SSH_CA_KEY_FILES = list(signing)
        return path

    yield trust
    for file, line in added:
        _edit_trusted_ca_keys(file, remove=line)


@pytest.fixture
def provider_mapped_devcluster(devcluster, devcluster_info, trusted_ca):
    """``(cluster, ca)``: the dev cluster in certificate mode (a CA of the test's own),
    mapping a person signed in through the provider by their provider user name, for the
    group portal-users; nobody has an account there yet."""
    from clusters.models import ClusterAccount

    ca = trusted_ca(devcluster_info)
    ClusterAccount.objects.filter(cluster=devcluster).delete()
    devcluster.ssh_auth = "certificate"
    devcluster.user_map = "{preferred_username}"
    devcluster.allowed_groups = "portal-users"
    devcluster.save()
    return devcluster, ca


@pytest.fixture
def signing_ca(tmp_path, settings) -> Path:
    """A CA of the test's own that signs this process's certificates (no cluster trusts it)."""
    from clusters import certs

    path = tmp_path / "signing-ca"
    assert certs.new_ca_file(path)
    settings.PORTAL_SSH_CA_KEY_FILES = [str(path)]
    return path


# --- a remote for transfers ---------------------------------------------------------------


@pytest.fixture
def webdav(tmp_path):
    """A real remote: Debian's ``rclone serve webdav`` on 127.0.0.1 with a user and a
    password, serving an empty folder of its own (``root``)."""
    import secrets
    import shutil
    import socket
    import subprocess
    from types import SimpleNamespace

    from tests.livestack import free_port
    from tests.polling import until

    if shutil.which("rclone") is None:
        pytest.fail("rclone is missing: `make devcluster` installs Debian's")
    root = tmp_path / "webdav-root"
    root.mkdir()
    port = free_port()
    password = secrets.token_urlsafe(12)
    server = subprocess.Popen(
        ["rclone", "serve", "webdav", str(root), "--addr", f"127.0.0.1:{port}"]
        + ["--user", "dav", "--pass", password],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )

    def listening() -> bool:
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", port)) == 0

    try:
        until(listening, 20, "rclone serve webdav listening")
        yield SimpleNamespace(
            url=f"http://127.0.0.1:{port}", user="dav", password=password, root=root
        )
    finally:
        server.terminate()
        server.wait(timeout=10)


@pytest.fixture(autouse=True)
def _fresh_listings():
    """Each test starts with no cached listing (jobs/listing.py): database ids repeat from
    one test to the next, cache entries would outlive the rows they were built from."""
    from jobs import listing

    listing._set_new([listing.EVERYTHING])  # now, not on a commit a test may never make
