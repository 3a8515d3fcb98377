"""The patterns of common/validators.py end at the end of the value: Python's ``$`` also
matches before a final newline, so "ada\\n" passed as a user name before (\\Z now)."""

import pytest
from django.core.exceptions import ValidationError

from common import validators


@pytest.mark.parametrize(
    ("check", "good"),
    [
        (validators.slurm_name, "gpu"),
        (validators.posix_username, "ada"),
        (validators.module_name, "cuda/12.2"),
        (validators.hostname, "login1.example.org"),
        (validators.hostname, "10.0.0.1"),
        (validators.relative_folder, "projects/run1"),
        (validators.absolute_path, "/opt/images/torch.sif"),
        (validators.work_dir_root, "/scratch/{user}"),
        (validators.node_scratch, "/local/scratch"),
        (validators.node_scratch, "$LOCAL_SCRATCH/jobs"),
    ],
)
def test_a_value_with_a_trailing_newline_is_refused(check, good):
    check(good)  # accepted as it is
    for bad in (good + "\n", good + "\r\n"):
        with pytest.raises(ValidationError):
            check(bad)


@pytest.mark.parametrize(
    "bad", ["", "relative", "/a b", "/x/../etc", "//x", "$(id)", "$X;id", "${X}", "$1/x", "/x;y"]
)
def test_the_node_scratch_is_a_folder_or_a_variable_and_nothing_else(bad):
    with pytest.raises(ValidationError):
        validators.node_scratch(bad)


def test_the_compiled_patterns_refuse_a_trailing_newline():
    token = "a" * 20
    assert validators.SESSION_TOKEN.match(token)
    assert not validators.SESSION_TOKEN.match(token + "\n")
    assert validators.JOB_FOLDER.match(".portal/jobs/12-0123456789")
    assert not validators.JOB_FOLDER.match(".portal/jobs/12-0123456789\n")


def _accepts(check, value) -> bool:
    """Whether ``check`` (a function that raises on a bad value) accepts ``value``."""
    try:
        check(value)
    except Exception:  # noqa: BLE001 - each check raises its own kind
        return False
    return True


def _directive(value):
    from schedulers.slurm.scripts import _directive

    return _directive("partition", value)


def _metric_key(value):
    from metrics.ingest import parse_record

    return parse_record({"seq": 0, "step": 1, "time": 1.0, "metrics": {value: 1.0}})


def _compare_option(name):
    def check(value):
        from metrics.compare.data import Options

        return Options.parse({name: value})

    return check


def _compare_term(value):
    from metrics.compare.query import parse_term

    return parse_term(value)


def _params(value):
    from jobs.models.annotations import clean_params

    return clean_params({value: 1})


def _tag(value):
    from jobs.models.annotations import clean_tag

    return clean_tag(value)


def _tag_validator(value):
    from jobs.models.annotations import tag_name

    return tag_name(value)


def _sentinels(value):
    from portal.redis_ha import parse_sentinels

    return parse_sentinels([value])


def _master(value):
    from portal.redis_ha import check_master

    return check_master(value)


def _route(value):
    from proxy.haproxy import Route

    return Route(value, "127.0.0.1", 8888, "t" * 20)


def _upstream(value):
    from proxy.haproxy import PORTAL_UPSTREAM

    if not PORTAL_UPSTREAM.match(value):
        raise ValueError(value)


def _on_node(name):
    def check(value):
        from schedulers.on_node import portal_metrics

        if not getattr(portal_metrics, name).match(value):
            raise ValueError(value)

    return check


def _metrics_file(value):
    from clusters.files import METRICS_FILE

    if not METRICS_FILE.match(value):
        raise ValueError(value)


@pytest.mark.parametrize(
    ("check", "good"),
    [
        pytest.param(_tag, "resnet", id="tag"),
        pytest.param(_tag_validator, "seed=3", id="tag-validator"),
        pytest.param(_params, "lr", id="param-name"),
        pytest.param(_directive, "gpu", id="sbatch-value"),
        pytest.param(_metric_key, "val/loss", id="ingest-key"),
        pytest.param(_compare_option("group"), "param.lr", id="compare-group"),
        pytest.param(_compare_option("sort"), "-metric.loss.best", id="compare-sort"),
        pytest.param(_compare_term, "tag:resnet", id="compare-tag-term"),
        pytest.param(_compare_term, "resnet", id="compare-word"),
        pytest.param(_sentinels, "10.0.0.5:26379", id="sentinel-address"),
        pytest.param(_master, "portal", id="sentinel-master"),
        pytest.param(_route, "0" * 32, id="session-id"),
        pytest.param(_upstream, "127.0.0.1:8000", id="proxy-upstream"),
        pytest.param(_on_node("_TAG"), "resnet", id="client-tag"),
        pytest.param(_on_node("_PARAM"), "lr", id="client-param-name"),
        pytest.param(_metrics_file, "rank-0.jsonl", id="metrics-file"),
    ],
)
def test_every_pattern_that_validates_refuses_a_trailing_newline(check, good):
    """Before: these ended with ``$`` and were used with match(), so "resnet\\n" was a tag,
    "gpu\\n" an #SBATCH value and "loss\\n" a metric name (#39)."""
    assert _accepts(check, good)
    assert not _accepts(check, good + "\n")
