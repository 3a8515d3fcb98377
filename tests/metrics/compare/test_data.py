"""The comparison's data: what differs, best and its step, groups' mean ± std from the
summaries, the baseline, and that it shows only the person's own runs."""

import math

import pytest

from metrics.compare.data import Options, compare, goal
from metrics.compare.query import BadQuery
from tests import factories

pytestmark = pytest.mark.django_db


def run(owner, cluster, lr, seed, loss, **extra):
    return factories.compared_run(
        owner,
        cluster,
        tags=("digits", f"seed={seed}"),
        params={"lr": lr, "seed": seed},
        curves={"loss": loss, "val_accuracy": [1 - v for v in loss]},
        command=f"python train.py --lr {lr} --seed {seed}",
        **extra,
    )


def ids_of(result):
    return [r["id"] for r in result.runs]


def test_only_differing_fields_are_columns_and_equal_ones_are_folded(owner, cluster):
    a = run(owner, cluster, 0.01, 1, [0.9, 0.5, 0.7])
    b = run(owner, cluster, 0.1, 2, [0.8, 0.4, 0.3])
    result = compare(owner, Options(ids=(a.pk, b.pk)))
    assert result.columns == ["command", "tags", "param.lr", "param.seed"]
    same = {s["field"]: s["value"] for s in result.same}
    assert same["image"] == "host-batch" and same["cluster"] == "testcluster"
    assert "resources" in same and "partition" in same
    row = {r["id"]: r for r in result.runs}
    # only the words and tags not shared by every run
    assert row[a.pk]["fields"]["command"] == "0.01 1"
    assert row[b.pk]["fields"]["tags"] == ["seed=2"]
    assert row[b.pk]["fields"]["param.lr"] == 0.1


def test_last_best_and_step_of_best_follow_the_metrics_direction(owner, cluster):
    a = run(owner, cluster, 0.01, 1, [0.9, 0.2, 0.7])
    result = compare(owner, Options(ids=(a.pk,)))
    m = result.runs[0]["metrics"]
    assert m["loss"] == {"last": 0.7, "best": 0.2, "best_step": 1}  # loss: lowest
    assert m["val_accuracy"]["best"] == pytest.approx(0.8)  # accuracy: highest
    assert m["val_accuracy"]["best_step"] == 1
    assert goal("val_loss") == "min" and goal("error_rate") == "min"
    assert goal("val_accuracy") == "max" and goal("reward") == "max"


def test_rows_sort_by_any_column_with_missing_values_last(owner, cluster):
    a = run(owner, cluster, 0.01, 1, [0.9, 0.2])
    b = run(owner, cluster, 0.1, 2, [0.5, 0.4])
    c = factories.compared_run(owner, cluster)  # no loss at all
    opts = dict(ids=(a.pk, b.pk, c.pk))
    assert ids_of(compare(owner, Options(**opts, sort="metric.loss.last"))) == [a.pk, b.pk, c.pk]
    assert ids_of(compare(owner, Options(**opts, sort="-param.lr"))) == [b.pk, a.pk, c.pk]


def test_groups_are_the_mean_and_std_of_their_runs_bucket_means(owner, cluster):
    # lr 0.01: three seeds; lr 0.1: one seed. Four steps: one bucket per step.
    low = [
        run(owner, cluster, 0.01, s, loss)
        for s, loss in enumerate(([1.0, 0.5, 0.2, 0.1], [2.0, 1.0, 0.4, 0.2], [3.0, 1.5, 0.6]))
    ]
    high = run(owner, cluster, 0.1, 0, [4.0, 4.0, 4.0, 4.0])
    ids = tuple(j.pk for j in [*low, high])
    result = compare(owner, Options(ids=ids, group="param.lr", baseline=f"{high.pk}"))
    assert result.groups == ["0.01", "0.1"]
    chart = next(c for c in result.charts if c["metric"] == "loss")
    assert chart["x"] == [0, 1, 2, 3]
    g = {x["name"]: x for x in chart["groups"]}
    assert g["0.01"]["runs"] == [j.pk for j in low]
    assert g["0.01"]["y"][:3] == pytest.approx([2.0, 1.0, 0.4])
    assert g["0.01"]["y"][3] == pytest.approx(0.15)  # the third seed stopped at step 2
    std0 = math.sqrt(2 / 3)  # population std of 1, 2, 3
    assert g["0.01"]["lower"][0] == pytest.approx(2 - std0)
    assert g["0.01"]["upper"][0] == pytest.approx(2 + std0)
    assert g["0.1"]["lower"] == g["0.1"]["y"] == [4.0] * 4  # one run: no spread
    # the faded single runs beneath, and the baseline run on every chart
    assert {r["id"] for r in chart["runs"]} == set(ids)
    for c in result.charts:
        assert c["baseline"]["name"] == f"run {high.pk}"
    assert chart["baseline"]["y"] == [4.0] * 4
    minmax = compare(owner, Options(ids=ids, group="param.lr", band="minmax"))
    g = {x["name"]: x for x in minmax.charts[0]["groups"]}
    assert g["0.01"]["lower"][0] == 1.0 and g["0.01"]["upper"][0] == 3.0


def test_a_group_can_be_the_baseline_and_tags_group_by_prefix(owner, cluster):
    a = run(owner, cluster, 0.01, 1, [1.0, 1.0])
    b = run(owner, cluster, 0.01, 2, [3.0, 3.0])
    result = compare(owner, Options(ids=(a.pk, b.pk), group="tag:seed", baseline="group:seed=2"))
    assert result.groups == ["seed=1", "seed=2"]
    assert "tag:seed" in result.group_choices and "param.lr" in result.group_choices
    for chart in result.charts:
        assert chart["baseline"]["name"] == "group seed=2"
    loss = next(c for c in result.charts if c["metric"] == "loss")
    assert loss["baseline"]["y"] == [3.0, 3.0]


def test_runs_of_different_lengths_share_one_grid(owner, cluster):
    short = run(owner, cluster, 0.01, 1, [1.0] * 10)
    long = run(owner, cluster, 0.01, 2, [2.0] * 1000)  # 1000 steps: 16-step buckets
    result = compare(owner, Options(ids=(short.pk, long.pk), group="param.lr"))
    chart = next(c for c in result.charts if c["metric"] == "loss")
    assert chart["width"] == 16 and len(chart["x"]) <= 64
    mean = chart["groups"][0]["y"]
    assert mean[0] == pytest.approx(1.5)  # both runs in the first bucket
    assert mean[-1] == pytest.approx(2.0)  # only the long one later


def test_another_users_runs_never_appear(owner, outsider, staff, cluster):
    mine = run(owner, cluster, 0.01, 1, [1.0])
    theirs = run(outsider, cluster, 0.01, 1, [1.0])
    result = compare(owner, Options(q="tag:digits", ids=(theirs.pk,), baseline=str(theirs.pk)))
    assert ids_of(result) == [mine.pk]
    assert all(r["id"] != theirs.pk for c in result.charts for r in c["runs"])
    assert all(c["baseline"] is None for c in result.charts)
    assert sorted(ids_of(compare(staff, Options(q="tag:digits")))) == [mine.pk, theirs.pk]


def test_options_are_checked():
    for bad in ({"group": "owner"}, {"x": "epoch"}, {"band": "iqr"}, {"baseline": "best"}):
        with pytest.raises(BadQuery):
            Options.parse(bad)
    opts = Options.parse({"q": "tag:a", "ids": "1,2", "group": "param.lr", "x": "time"})
    assert opts.ids == (1, 2) and opts.as_dict()["ids"] == "1,2"
