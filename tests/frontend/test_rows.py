"""A job's dashboard row (frontend/rows.py): every value from a user or the cluster
escaped, the row the same through the dashboard and the live update's /jobs/<id>/row/."""

import re

import pytest

from jobs.models import Job
from proxy.models import SessionLink
from tests import factories

pytestmark = pytest.mark.django_db

HOSTILE = '<img src=x onerror=alert(1)>"&'


def row_of(html: str, pk: int) -> str:
    found = re.search(rf'<tr data-job-id="{pk}".*?</tr>', html, re.S)
    assert found, html[:2000]
    return found.group(0)


def test_names_nodes_and_reasons_are_escaped_and_the_row_is_one_everywhere(client, owner, cluster):
    factories.partition(cluster, "gpu")
    job = factories.job(
        owner,
        cluster,
        name=HOSTILE,
        state=Job.State.PENDING,
        pending_reason=HOSTILE,
        gpus=2,
        gpu_type="a100",
        nodes=2,
        tasks_per_node=2,
        launcher=Job.Launcher.TORCHRUN,
        node="gpu[01-02]",
    )
    client.force_login(owner)
    dashboard = row_of(client.get("/").content.decode(), job.pk)
    alone = client.get(f"/jobs/{job.pk}/row/")
    assert alone["Content-Type"].startswith("text/html")
    token = re.compile(r'name="csrfmiddlewaretoken" value="[^"]+"')
    assert token.sub("", alone.content.decode()).strip() == token.sub("", dashboard).strip()
    assert "<img" not in dashboard and HOSTILE not in dashboard
    assert 'title="&lt;img src=x onerror=alert(1)&gt;&quot;&amp;"' in dashboard
    assert "&lt;img src=x onerror=alert(1)&gt;&quot;&amp;" in row_of(dashboard, job.pk)
    assert "<span data-shape>2×2</span> torchrun" in dashboard
    assert "2× a100/node" in dashboard
    assert "<span data-nodes>gpu01, gpu02</span>" in dashboard
    assert 'data-active="true"' in dashboard and 'class="inline cancel-form">' in dashboard
    assert (
        f'href="/jobs/{job.pk}/#logs"' in dashboard
        and f'href="/launch/?from={job.pk}"' in dashboard
    )
    assert f'action="/jobs/{job.pk}/cancel/"' in dashboard


def test_a_ready_notebook_opens_and_a_finished_job_has_no_cancel(client, owner, cluster):
    notebook = factories.job(
        owner, cluster, kind=Job.Kind.NOTEBOOK, state=Job.State.RUNNING, node="node1"
    )
    link = SessionLink.objects.create(
        job=notebook, state=SessionLink.State.READY, host="node1", port=8888
    )
    board = factories.job(owner, cluster, kind=Job.Kind.TENSORBOARD, state=Job.State.PENDING)
    done = factories.job(owner, cluster, state=Job.State.COMPLETED)
    client.force_login(owner)
    page = client.get("/").content.decode()
    opened = row_of(page, notebook.pk)
    assert link.display_state == "ready"
    assert re.search(rf'href="/[a-z/]*{link.public_id}/open/">Open notebook</a>', opened), opened
    waiting = row_of(page, board.pk)  # no session yet: the button is there, hidden
    assert 'href="" hidden>Open TensorBoard</a>' in waiting
    finished = row_of(page, done.pk)
    assert 'class="inline cancel-form" hidden>' in finished and "data-open-session" not in finished
    assert 'data-active="false"' in finished
