"""What reproduces a run, and what a job says about itself, on the real dev cluster: a dirty
git checkout in hpcuser's home as a notebook's folder is recorded (commit, "modified", the
diff when asked) and "Launch again" reproduces the same command and parameters; a job's
parameters reach it, and its pm.tag()/pm.params() end up on the job."""

import secrets

import pytest

from clusters import files
from clusters.models import ClusterAccount
from jobs import tasks
from jobs.models import Job
from tests import factories
from tests.devcluster.helpers import remote, run_until
from tracking.tail import tail_job

pytestmark = [pytest.mark.devcluster, pytest.mark.django_db]

MAKE_CHECKOUT = r"""
set -e
cd "$HOME"
mkdir -p "$1" && cd "$1"
git init -q -b main .
printf 'lr = 0.1\n' > train.py
git add train.py
git -c user.email=a@example.org -c user.name=A commit -qm first
printf 'lr = 0.01\n' > train.py
git rev-parse HEAD
"""


def test_a_dirty_checkout_is_recorded_and_launch_again_reproduces_the_run(
    devcluster, owner, client
):
    account = ClusterAccount.for_user(devcluster, owner)
    folder = f"portal-test-{secrets.token_hex(3)}/repo"
    head = remote(account, ["bash", "-c", MAKE_CHECKOUT, "make-checkout", folder]).strip()
    image = factories.image("nb-host", offers_notebook=True)
    try:
        job = factories.submitted_job(
            owner,
            devcluster,
            "",
            kind="notebook",
            image=image,
            notebook_dir=folder,
            params={"lr": 0.01, "seed": 3},
            keep_diff=True,
        )
        home = devcluster.work_dir_root("home", account.username)
        git = job.reproduce["git"]
        assert git["commit"] == head and len(head) == 40
        assert git["folder"] == f"{home}/{folder}" and git["branch"] == "main"
        assert git["modified"] is True and git["changed"] == 1
        assert "-lr = 0.1\n+lr = 0.01" in job.git_diff
        assert job.reproduce["image"] == {"runtime": "none", "location": "", "identity": "host"}

        client.force_login(owner)
        page = client.get(f"/jobs/{job.pk}/").content.decode()
        assert head in page and "data-modified>modified</strong>" in page

        # "Launch again": the form as the page fills it in, sent back unchanged.
        form = client.get(f"/launch/?from={job.pk}").context["form"]
        data = {name: form[name].value() for name in form.fields}
        data = {k: v for k, v in data.items() if v is not None and v is not False}
        response = client.post("/launch/", data)
        assert response.status_code == 302, response.context["form"].errors
        again = Job.objects.exclude(pk=job.pk).get()
        assert (again.command, again.params, again.notebook_dir, again.image_id) == (
            job.command,
            job.params,
            job.notebook_dir,
            job.image_id,
        )
        assert again.keep_diff and again.cpus == job.cpus and again.partition == job.partition
        tasks.submit_job.apply(args=[again.pk])
        again.refresh_from_db()
        assert again.reproduce["git"]["commit"] == head and again.reproduce["git"]["modified"]
    finally:
        remote(account, ["rm", "-rf", "--", folder.split("/")[0]])


def test_a_clean_folder_without_git_records_no_commit(devcluster, owner):
    image = factories.image("nb-host", offers_notebook=True)
    job = factories.submitted_job(
        owner, devcluster, "", kind="notebook", image=image, notebook_dir="portal-no-git"
    )
    assert "git" not in job.reproduce and job.git_diff == ""
    assert job.reproduce["image"]["identity"] == "host" and job.reproduce["read_at"]


HOSTILE_CHECKOUT = r"""
set -e
cd "$HOME"
mkdir -p "$1/repo/below" && cd "$1/repo"
git init -q -b main .
printf 'lr = 0.1\n' > train.py
printf '*.py filter=mark diff=mark\n' > .gitattributes
git add train.py .gitattributes
git -c user.email=a@example.org -c user.name=A commit -qm first
for key in clean smudge; do git config "filter.mark.$key" "touch $HOME/$1/ran; cat"; done
git config filter.mark.required true
git config diff.mark.textconv "touch $HOME/$1/ran; cat"
printf 'lr = 0.01\n' > train.py
"""


def test_a_checkouts_filter_driver_never_runs_and_no_checkout_above_the_folder_counts(
    devcluster, owner
):
    """hpcuser's checkout names a required filter driver (and a text conversion) that
    would touch a marker: the provenance read, as hpcuser over SSH, records the modified
    checkout and the marker is never written. A folder inside it that is no checkout
    itself records no git (discovery stops at the job's folder)."""
    account = ClusterAccount.for_user(devcluster, owner)
    top = f"portal-test-{secrets.token_hex(3)}"
    remote(account, ["bash", "-c", HOSTILE_CHECKOUT, "make-checkout", top])
    image = factories.image("nb-host", offers_notebook=True)
    try:
        job = factories.submitted_job(
            owner,
            devcluster,
            "",
            kind="notebook",
            image=image,
            notebook_dir=f"{top}/repo",
            keep_diff=True,
        )
        assert job.reproduce["git"]["modified"] is True, job.reproduce
        assert "+lr = 0.01" in job.git_diff
        assert remote(account, ["ls", "-a", top]).split() == [".", "..", "repo"]
        below = factories.submitted_job(
            owner, devcluster, "", kind="notebook", image=image, notebook_dir=f"{top}/repo/below"
        )
        assert "git" not in below.reproduce, below.reproduce
        # (the same checkout, as plain git runs it, writes the marker)
        remote(account, ["git", "-C", f"{top}/repo", "diff", "HEAD"])
        assert "ran" in remote(account, ["ls", top]).split()
    finally:
        remote(account, ["rm", "-rf", "--", top])


REPORTS = """python3 - <<'EOF'
import json, os, portal_metrics as pm
print("env", os.environ["PORTAL_PARAM_SEED"], os.environ["PORTAL_PARAM_OPT"])
print("file", json.dumps(pm.params(), sort_keys=True))
pm.params({"lr": 0.1, "layers": 4})
pm.tag("best")
pm.tag("not a tag")
pm.log(step=0, loss=1.0)
pm.close()
EOF"""


def test_params_reach_the_job_and_what_it_reports_ends_on_the_job(devcluster, owner):
    devcluster.metrics_over_ssh = True  # its files, read over SSH as on a closed cluster
    devcluster.save()
    job = factories.job(
        owner, devcluster, REPORTS, partition="gpu", params={"seed": 3, "opt": "a b'c"}
    )
    tasks.submit_job.apply(args=[job.pk])
    job = run_until(Job.objects.get(pk=job.pk), {"completed", "failed"}, timeout=90)
    assert job.state == "completed", files.read_job_log(job, "stderr").text
    out = files.read_job_log(job, "stdout").text
    assert "env 3 a b'c" in out
    assert 'file {"opt": "a b\'c", "seed": 3}' in out
    tail_job(job, max_passes=50)
    job.refresh_from_db()
    assert job.tag_names == ["best"]
    assert job.params == {"seed": 3, "opt": "a b'c", "lr": 0.1, "layers": 4}
