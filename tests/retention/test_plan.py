"""Retention's pure parts (retention/plan.py, retention/listing.py) and its listing script
run by this machine's sh, find and du on a folder a job could leave (links, FIFOs, names
with newlines, a sparse file), with a hostile login's banner before the answer. The dev
cluster's test (tests/devcluster/test_retention.py) runs it over SSH as the person."""

from __future__ import annotations

import os
import subprocess

import pytest

from clusters import ssh
from retention import listing
from retention.plan import PlanError, Rule, plan, step_of, value_at


class HereConnection:
    """What listing.read/delete ask of an SSH connection, run by this machine's sh."""

    def __init__(self, banner: bytes = b""):
        self.banner = banner

    def run(self, argv, *, check, timeout, max_bytes):
        done = subprocess.run(argv, capture_output=True, timeout=timeout, check=False)
        out = self.banner + done.stdout
        assert len(out) <= max_bytes
        if check and done.returncode:
            raise ssh.CommandFailed(done.stderr.decode())
        return ssh.Result(out.decode(errors="replace"), done.stderr.decode(), done.returncode)


@pytest.mark.parametrize(
    ("name", "step"),
    [
        ("epoch=3-step=120.ckpt", 120),
        ("checkpoint-500", 500),
        ("ckpt_000120.pt", 120),
        ("model_step-7.safetensors", 7),
        ("run2/checkpoint_9/", 9),
        ("best.pt", None),
        ("model.keras", None),
        ("resnet50-e3.pth", 3),
    ],
)
def test_a_checkpoints_step_comes_from_its_name(name, step):
    assert step_of(name) == step


def test_the_value_at_a_step_is_the_last_logged_at_or_before_it():
    points = [(5, 0.9), (10, 0.5), (20, 0.4)]
    assert [value_at(points, s) for s in (1, 5, 12, 99)] == [None, 0.9, 0.5, 0.4]


def twelve() -> list[tuple[str, int]]:
    return [(f"ckpt/step-{s}.pt", s * 1000) for s in range(10, 130, 10)]


def test_twelve_checkpoints_keep_the_best_the_latest_and_the_registered_and_free_nine():
    values = {s: abs(s - 50) / 100 + 0.1 for s in range(10, 130, 10)}  # best at step 50
    rule = Rule(keep_best=1, metric="val_loss", mode="min", keep_latest=1)
    items = plan(twelve(), rule, values, {"ckpt/step-30.pt": "digits v1"})
    kept = {i.path: i.why for i in items if i.keep}
    assert kept == {
        "ckpt/step-30.pt": "registered: digits v1",
        "ckpt/step-50.pt": "one of the best 1 by val_loss",
        "ckpt/step-120.pt": "one of the latest 1",
    }
    gone = [i for i in items if not i.keep]
    assert len(gone) == 9 and sum(i.bytes for i in gone) == 1000 * sum(
        s for s in range(10, 130, 10) if s not in (30, 50, 120)
    )
    assert gone[0].why == "not among the best 1 by val_loss nor the latest 1"
    # Higher is better: the best is the one with the largest value.
    items = plan(twelve(), Rule(1, "acc", "max", 0), values, {})
    assert [i.path for i in items if i.keep] == ["ckpt/step-120.pt"]


def test_a_folder_holding_a_registered_version_and_names_without_steps_stay():
    found = [("checkpoint-100", 5), ("checkpoint-200", 5), ("final.pt", 5), ("m\ufffd-3.pt", 1)]
    items = plan(found, Rule(0, "", "min", 1), {}, {"checkpoint-100/model": "m v2"})
    assert {i.path: i.why for i in items} == {
        "checkpoint-100": "registered: m v2",
        "checkpoint-200": "one of the latest 1",
        "final.pt": "no step in its name",
        "m\ufffd-3.pt": "its name does not read as UTF-8",
    }


def test_ranking_by_a_metric_the_run_never_logged_deletes_nothing():
    with pytest.raises(PlanError, match="logged no val_loss"):
        plan(twelve(), Rule(1, "val_loss", "min", 1), {}, {})
    # NaN is no value either.
    with pytest.raises(PlanError):
        plan(twelve(), Rule(1, "val_loss", "min", 1), {s: float("nan") for s in range(200)}, {})


def test_the_script_lists_checkpoints_with_their_disk_cost_and_never_links_or_fifos(tmp_path):
    work = tmp_path / "work"
    (work / "ckpt" / "checkpoint-5").mkdir(parents=True)
    (work / "ckpt" / "checkpoint-5" / "weights.pt").write_bytes(b"x" * 10_000)
    (work / "epoch=1-step=20.ckpt").write_bytes(b"y" * 5000)
    with open(work / "sparse-step-9.pt", "wb") as sparse:  # 1 GiB that costs nothing
        sparse.truncate(1 << 30)
    (work / "odd\nname-3.pt").write_bytes(b"z")
    os.symlink("/etc/passwd", work / "link-7.pt")
    os.mkfifo(work / "fifo-8.pt")
    (work / "notes.txt").write_text("not a checkpoint")
    banner = b"\nfake-nonce list\n0\t./../../etc\0\nWelcome to the cluster\n"
    found = listing.read(HereConnection(banner), str(work), ["checkpoint-*", "*.ckpt", "*.pt"])
    by_path = {f.path: f.bytes for f in found}
    assert set(by_path) == {
        "ckpt/checkpoint-5",
        "epoch=1-step=20.ckpt",
        "sparse-step-9.pt",
        "odd\nname-3.pt",
    }
    assert by_path["ckpt/checkpoint-5"] >= 10_000 and by_path["sparse-step-9.pt"] < 1 << 20

    listing.delete(HereConnection(), str(work), ["ckpt/checkpoint-5", "odd\nname-3.pt"], timeout=10)
    assert not (work / "ckpt" / "checkpoint-5").exists()
    assert not (work / "odd\nname-3.pt").exists() and (work / "link-7.pt").is_symlink()
    for bad in ("../outside", "/etc", "a/../../b"):
        with pytest.raises(listing.ListingError):
            listing.delete(HereConnection(), str(work), [bad], timeout=10)


def test_a_missing_folder_and_a_cut_answer_are_said():
    with pytest.raises(listing.ListingError, match="cannot be read"):
        listing.read(HereConnection(), "/nonexistent/folder", ["*.pt"])
    with pytest.raises(listing.ListingError, match="cut short"):
        listing.parse(b"\nn0nce list\n12\t./a.pt\0", "n0nce")
    with pytest.raises(listing.ListingError, match="did not read"):
        listing.parse(b"\nn0nce list\n12 ./a.pt\0\nn0nce end\n", "n0nce")
    with pytest.raises(listing.ListingError, match="did not read"):
        listing.parse(b"\nn0nce list\n12\t./../a.pt\0\nn0nce end\n", "n0nce")
    many = b"".join(b"1\t./c-%d.pt\0" % i for i in range(4))
    with pytest.raises(listing.ListingError, match="more than 3"):
        listing.parse(b"\nn0nce list\n" + many + b"\nn0nce end\n", "n0nce", max_items=3)
