"""Tags, notes and parameters of a run (their bounds, how parameters reach the job, what the
job reports) and what reproduces it (the provenance script on a real git checkout, its
parser on hostile output)."""

import json
import shutil
import subprocess

import pytest

from jobs import provenance
from jobs.models import Job, JobTag
from jobs.models import annotations as tagging
from metrics import ingest
from schedulers import jobscript
from schedulers.slurm import scripts
from tests import factories

WORK = "/home/alice/.portal/jobs/7-abc"


# -- bounds -----------------------------------------------------------------------------


def test_tags_are_words_without_repeats_and_bounded():
    assert tagging.clean_tags("resnet, seed=3 resnet lr:0.01") == ["resnet", "seed=3", "lr:0.01"]
    for bad in (["a b"], ["-x"], ["x" * 65], ["é"], [""], [3], "$(rm -rf)"):
        with pytest.raises(tagging.BadAnnotation):
            tagging.clean_tags(bad)
    with pytest.raises(tagging.BadAnnotation, match="at most 32"):
        tagging.clean_tags([f"t{i}" for i in range(33)])


def test_params_are_bounded_scalars_with_identifier_names():
    assert tagging.parse_params_text("lr=0.01\nseed=3 opt=adam flag=true") == {
        "lr": 0.01,
        "seed": 3,
        "opt": "adam",
        "flag": True,
    }
    bad = [
        {"a b": 1},
        {"1x": 1},
        {"x" * 49: 1},
        {"lr": [1]},
        {"lr": {"a": 1}},
        {"lr": float("nan")},
        {"lr": 2**60},
        {"lr": "x" * 201},
        {"lr": "two\nlines"},
        {"lr": 1, "LR": 2},  # one PORTAL_PARAM_LR
        {f"p{i}": i for i in range(101)},
        ["lr", 1],
    ]
    for params in bad:
        with pytest.raises(tagging.BadAnnotation):
            tagging.clean_params(params)
    with pytest.raises(tagging.BadAnnotation, match="name=value"):
        tagging.parse_params_text("lr")


def test_a_note_is_bounded_text():
    assert tagging.clean_note("tried a lower lr\n") == "tried a lower lr\n"
    for bad in ("x" * 10_001, "a\x00b", 3):
        with pytest.raises(tagging.BadAnnotation):
            tagging.clean_note(bad)


@pytest.mark.django_db
def test_tags_change_within_the_bound_and_params_merge(owner, cluster):
    job = factories.training_job(owner, cluster)
    job.set_tags(["a", "b"])
    assert job.change_tags(add=["c", "a"], remove=["b"]) == ["a", "c"]
    job.set_tags([f"t{i}" for i in range(32)])
    with pytest.raises(tagging.BadAnnotation, match="at most 32"):
        job.change_tags(add=["one-more"])
    assert JobTag.objects.filter(job=job).count() == 32
    job.report_params({"lr": 0.1})
    assert job.report_params({"seed": 2, "lr": 0.2}) == {"lr": 0.2, "seed": 2}
    with pytest.raises(tagging.BadAnnotation):
        job.report_params({"LR": 1})  # the same environment variable as lr
    assert Job.objects.get(pk=job.pk).params == {"lr": 0.2, "seed": 2}


# -- parameters reach the job ---------------------------------------------------------------


@pytest.mark.django_db
def test_params_reach_a_job_as_environment_and_params_json(owner, cluster, tmp_path):
    job = factories.training_job(owner, cluster)
    job.params = {"lr": 0.01, "opt": "it's $(touch pwned)", "seed": 3}
    script = scripts.render(job.describe(), WORK)
    lines = [
        line
        for line in script.splitlines()
        if line.startswith("export PORTAL_PARAM_")
        or (line.startswith("printf") and "params.json" in line)
    ]
    assert len(lines) == 4
    shell = (
        "\n".join(lines) + '\nenv | grep ^PORTAL_PARAM_ | sort; cat "$PORTAL_WORK_DIR/params.json"'
    )
    out = subprocess.run(
        ["bash", "-c", shell],
        cwd=tmp_path,
        env={"PORTAL_WORK_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert out[:3] == [
        "PORTAL_PARAM_LR=0.01",
        "PORTAL_PARAM_OPT=it's $(touch pwned)",
        "PORTAL_PARAM_SEED=3",
    ]
    assert json.loads(out[3]) == job.params
    assert not (tmp_path / "pwned").exists()


@pytest.mark.django_db
def test_a_job_without_params_is_told_none(owner, cluster):
    script = scripts.render(factories.training_job(owner, cluster).describe(), WORK)
    assert "export PORTAL_PARAM_" not in script and '/params.json"' not in script


@pytest.mark.django_db
def test_podman_passes_the_params_into_the_container(owner, cluster):
    image = factories.image("p", "P", runtime="podman", location="docker.io/library/python:3.12")
    job = factories.job(owner, cluster, "python t.py", image=image, params={"lr": 1})
    script = scripts.render(job.describe(), WORK)
    assert "--env 'PORTAL_PARAM_*'" in script


def test_a_parameter_name_that_is_not_an_identifier_is_never_rendered():
    with pytest.raises(jobscript.ScriptError):
        jobscript.told_lines({"PORTAL_PARAM_A;rm": "1"}, {})


# -- what the job reports (pm.tag(), pm.params()), over HTTP and from its files -----------


@pytest.mark.django_db
def test_annotation_records_tag_the_job_and_merge_params(owner, cluster):
    job = factories.training_job(owner, cluster)
    lines = [
        {"seq": 0, "time": 1.7e9, "annotate": {"params": {"lr": 0.1}}},
        {"seq": 1, "time": 1.7e9, "metrics": {"loss": 1.0}},
        {"seq": 2, "time": 1.7e9, "annotate": {"tags": ["best"], "params": {"lr": 0.2}}},
        {"seq": 3, "time": 1.7e9, "annotate": {"tags": ["bad tag"]}},
        {"seq": 4, "time": 1.7e9, "annotate": {"other": 1}},
    ]
    data = b"".join(json.dumps(line).encode() + b"\n" for line in lines)
    parsed, _ = ingest.parse_lines(data)
    assert len(parsed.records) == 3 and len(parsed.errors) == 2
    result = ingest.ingest(job, parsed.records)
    assert result.inserted == 1
    job.refresh_from_db()
    assert job.tag_names == ["best"] and job.params == {"lr": 0.2}
    ingest.ingest(job, ingest.parse_lines(data)[0].records)  # read again: nothing changes
    job.refresh_from_db()
    assert job.tag_names == ["best"] and job.params == {"lr": 0.2}


@pytest.mark.django_db
def test_a_jobs_token_tags_its_own_job_only(owner, cluster, client):
    job = factories.training_job(owner, cluster)
    other = factories.training_job(owner, cluster)
    token = ingest.issue_token(job)
    body = json.dumps([{"seq": 0, "time": 1.7e9, "annotate": {"tags": ["best"]}}])

    def post(pk):
        return client.post(
            f"/api/v1/jobs/{pk}/metrics/ingest/",
            body,
            content_type="application/json",
            HTTP_AUTHORIZATION=f"Bearer {token}",
        )

    assert post(job.pk).status_code == 200
    assert post(other.pk).status_code == 403
    assert job.tag_names == ["best"] and other.tag_names == []


# -- what reproduces a run ----------------------------------------------------------------


def run_script(folder: str, *, runtime: str = "", location: str = "", diff: bool = False):
    """The provenance script as the cluster runs it (bash, real git), and its parse."""
    nonce = "n0nce"
    argv = ["sh", "-c", provenance._SCRIPT, "x", nonce, runtime, location, folder]
    argv += ["1" if diff else "0", "2001"]
    out = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=60).stdout
    return provenance.parse(out, nonce, {"runtime": runtime}, folder, 2000)


def git(repo, *args):
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


@pytest.fixture
def checkout(tmp_path):
    if shutil.which("git") is None:
        pytest.skip("no git")
    repo = tmp_path / "proj"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "a@example.org")
    git(repo, "config", "user.name", "A")
    (repo / "train.py").write_text("print('lr=0.1')\n")
    git(repo, "add", "train.py")
    git(repo, "commit", "-qm", "first")
    return repo


def test_a_clean_checkout_gives_its_commit_and_branch(checkout):
    head = subprocess.run(
        ["git", "-C", str(checkout), "rev-parse", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    found = run_script(str(checkout))
    assert found.git == {
        "folder": str(checkout),
        "commit": head,
        "branch": "main",
        "changed": 0,
        "untracked": 0,
        "modified": False,
    }
    assert found.diff == ""


def test_a_modified_checkout_says_so_and_keeps_the_diff_only_when_asked(checkout, tmp_path):
    (checkout / "train.py").write_text("print('lr=0.2')\n")
    (checkout / "notes.txt").write_text("untracked\n")
    # A checkout's configuration that would run a program: git must run none of it.
    pwned = tmp_path / "pwned"
    git(checkout, "config", "core.fsmonitor", f"touch {pwned}; false")
    git(checkout, "config", "diff.external", f"touch {pwned}")
    found = run_script(str(checkout))
    assert found.git["modified"] and found.git["changed"] == 1 and found.git["untracked"] == 1
    assert found.diff == "" and "diff_bytes" not in found.git
    kept = run_script(str(checkout), diff=True)
    assert "-print('lr=0.1')" in kept.diff and "+print('lr=0.2')" in kept.diff
    assert kept.git["diff_bytes"] == len(kept.diff.encode()) and not kept.git["diff_truncated"]
    assert not pwned.exists()


def test_a_diff_past_the_bound_is_cut_and_marked(checkout):
    (checkout / "train.py").write_text("x = 1\n" * 2000)
    found = run_script(str(checkout), diff=True)
    assert found.git["diff_truncated"] and len(found.diff.encode()) <= 2000


def test_a_checkouts_filter_driver_never_runs(checkout, tmp_path):
    """.gitattributes and the checkout's config name a required filter driver (and a
    text conversion) that would write a marker: status and diff run with it emptied."""
    marker = tmp_path / "filter-ran"
    (checkout / ".gitattributes").write_text("*.py filter=evil diff=evil\n")
    git(checkout, "add", ".gitattributes")
    git(checkout, "commit", "-qm", "attributes")
    for key in ("clean", "smudge"):
        git(checkout, "config", f"filter.evil.{key}", f"touch {marker}; cat")
    git(checkout, "config", "filter.evil.required", "true")
    git(checkout, "config", "diff.evil.textconv", f"touch {marker}; cat")
    (checkout / "train.py").write_text("print('lr=0.3')\n")  # modified: git must compare
    found = run_script(str(checkout), diff=True)
    assert found.git["modified"] and "lr=0.3" in found.diff
    assert not marker.exists()
    git(checkout, "diff", "HEAD")  # (the same checkout runs it for plain git)
    assert marker.exists()


def test_repository_discovery_stops_at_the_jobs_folder(checkout):
    """A folder inside a checkout (but not one itself) has no git record: git never looks
    above the job's folder (GIT_CEILING_DIRECTORIES)."""
    inner = checkout / "notebooks"
    inner.mkdir()
    assert run_script(str(inner)).git == {}
    assert run_script(str(checkout)).git["commit"]


def test_no_checkout_no_git_record(tmp_path):
    assert run_script(str(tmp_path)).git == {}
    assert run_script(str(tmp_path / "missing")).git == {}


def test_an_apptainer_files_sha256_is_read_on_the_cluster(tmp_path):
    sif = tmp_path / "img.sif"
    sif.write_bytes(b"not really an image")
    found = run_script("", runtime="apptainer", location=str(sif))
    import hashlib

    assert found.image["sha256"] == hashlib.sha256(b"not really an image").hexdigest()
    assert "error" in run_script("", runtime="apptainer", location=str(tmp_path / "no")).image


def test_the_parser_takes_only_well_formed_lines_of_its_nonce():
    hostile = "\n".join(
        [
            "n0nce git-commit " + "a" * 40,  # a login banner imitating the answer, first
            "Welcome to the cluster",
            "other git-commit " + "b" * 40,
            "n0nce image-sha256 notahash",
            "n0nce image-digest evil; rm -rf /",
            "n0nce git-branch $(reboot)",
            "n0nce git-changes 3 1",
            "n0nce git-diff",
            "n0nce git-commit " + "c" * 40,  # inside the diff: data, not an answer
            "+added",
        ]
    )
    found = provenance.parse(hostile, "n0nce", {"runtime": "podman"}, "/f", 1000)
    assert found.image == {"runtime": "podman"}
    assert found.git["commit"] == "a" * 40 and "branch" not in found.git
    assert found.git["modified"] and found.git["changed"] == 3
    assert found.diff.startswith("n0nce git-commit") and found.diff.endswith("+added")


def test_a_commit_without_its_status_is_not_recorded():
    found = provenance.parse("n0nce git-commit " + "a" * 40 + "\n", "n0nce", {}, "/f", 100)
    assert found.git == {}


@pytest.mark.django_db
def test_what_is_asked_of_the_cluster_for_each_runtime(owner, cluster):
    class Recorder:
        def run(self, argv, **kwargs):
            self.argv = argv
            from clusters.ssh import Result

            return Result("", "", 0)

    cases = [
        ("none", "", "", {"identity": "host"}),
        ("apptainer", "/img/t.sif", "apptainer", {}),
        ("apptainer", "docker://python:3.12", "", {}),
        ("podman", "docker.io/library/python:3.12", "podman", {}),
        (
            "podman",
            "docker.io/library/python@sha256:" + "0" * 64,
            "",
            {"digest": "docker.io/library/python@sha256:" + "0" * 64},
        ),
    ]
    for runtime, location, asked, known in cases:
        image = factories.image(f"i-{runtime}-{len(location)}", runtime=runtime, location=location)
        job = factories.job(
            owner, cluster, "", image=image, kind="notebook", notebook_dir="proj x", save=False
        )
        job.keep_diff = True
        conn = Recorder()
        found = provenance.read(conn, job, WORK, max_diff=1000)  # type: ignore[arg-type]
        assert conn.argv[:6] == ["timeout", "-s", "KILL", "359", "sh", "-c"]
        assert conn.argv[8:] == [
            conn.argv[8],
            asked,
            location,
            "/home/alice/proj x",
            "1",
            "1001",
        ], runtime
        assert found.image == {"runtime": runtime, "location": location, **known}
    text = provenance._SCRIPT
    assert "image inspect --format '{{index .RepoDigests 0}}' -- \"$location\"" in text
    assert 'sha256sum -- "$location"' in text
