"""The dev cluster folder the file manager's real-path tests work in."""

import secrets

import pytest
from django.test import Client

from clusters import bulk
from clusters.models import ClusterAccount
from tests.devcluster.helpers import remote


@pytest.fixture(autouse=True)
def _no_openssh_masters_left():
    """An upload's OpenSSH master (clusters/bulk.py) is closed with its test."""
    yield
    bulk.close_all()


@pytest.fixture
def place(filecluster, owner):
    """(client signed in as owner, base URL of their home, the test folder's name, account)."""
    account = ClusterAccount.for_user(filecluster, owner)
    home = filecluster.work_dir_root("home", account.username)
    folder = f"portal-files-{secrets.token_hex(3)}"
    base = f"{home}/{folder}"
    script = (
        f"set -e; mkdir -p {base}/sub/deeper; cd {base}; "
        "printf 'hello\\nworld\\n' > notes.txt; "
        "head -c 3000000 /dev/urandom > big.bin; "
        "printf '\\211PNG\\r\\n\\032\\n0000' > pic.png; "
        "printf x > sub/a; printf yy > sub/deeper/b; "
        "ln -s /etc etc-link; mkfifo pipe; "
        "touch \"$(printf 'evil\\nname\\033[31m')\""
    )
    remote(account, ["sh", "-c", script])
    client = Client()
    client.force_login(owner)
    yield client, f"/files/{filecluster.name}/home/", folder, account
    remote(account, ["rm", "-rf", "--", base])


@pytest.fixture
def eager(monkeypatch, settings):
    """Celery's tasks run in this process (a transfer's start, a notification's mail: its
    links need the portal's address)."""
    from portal.celery import app as celery_app

    monkeypatch.setitem(celery_app.conf, "task_always_eager", True)
    monkeypatch.setitem(celery_app.conf, "task_eager_propagates", True)
    settings.PORTAL_URL = "https://portal.example.org"
