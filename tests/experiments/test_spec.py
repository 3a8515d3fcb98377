"""Experiment specs: read as data, every wrong field named with why."""

import pytest

from experiments import spec


def valid(**overrides) -> dict:
    data = {
        "launch": {"command": "train"},
        "parameters": {
            "lr": {"type": "float", "low": 1e-4, "high": 0.1, "log": True},
            "hidden": {"type": "int", "low": 16, "high": 64, "step": 16},
            "act": ["relu", "tanh"],
        },
        "objective": {"metric": "val_accuracy"},
    }
    data.update(overrides)
    return data


def test_defaults_and_normalised_parameters():
    fields = spec.validate(valid())
    assert fields["method"] == "bayesian" and fields["goal"] == "maximize"
    assert (fields["max_trials"], fields["max_concurrent"], fields["folds"]) == (20, 4, 1)
    assert fields["parameters"]["act"] == {"type": "choice", "values": ["relu", "tanh"]}
    assert fields["parameters"]["hidden"] == {
        "type": "int",
        "low": 16,
        "high": 64,
        "log": False,
        "step": 16,
    }


def test_yaml_and_json_text_both_load():
    text = "launch: {command: train}\nparameters:\n  lr: [0.1, 0.01]\nobjective: {metric: loss}\n"
    assert spec.validate(spec.load(text))["parameters"]["lr"]["values"] == [0.1, 0.01]
    assert spec.load('{"a": 1}') == {"a": 1}


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("launch: [", "Not valid YAML or JSON (line"),
        ("- a\n- b\n", "must be a mapping"),
        ("!!python/object:os.system {}", "Not valid YAML"),  # safe loading: no tags
    ],
)
def test_unreadable_specs_say_why(text, needle):
    with pytest.raises(spec.SpecError) as caught:
        spec.load(text)
    assert needle in caught.value.errors["spec"]


@pytest.mark.parametrize(
    ("overrides", "field", "needle"),
    [
        ({"parameters": {}}, "parameters", "At least one"),
        ({"parameters": {"LR": [1, 2]}}, "parameters.LR", "lower-case"),
        ({"parameters": {"lr": {"type": "float", "low": 1, "high": 1}}}, "parameters.lr", "below"),
        (
            {"parameters": {"lr": {"type": "float", "low": 0, "high": 1, "log": True}}},
            "parameters.lr",
            "low > 0",
        ),
        ({"parameters": {"n": {"type": "int", "low": 1.5, "high": 3}}}, "parameters.n", "whole"),
        ({"parameters": {"a": [1, 1]}}, "parameters.a", "differ"),
        ({"parameters": {"a": ["x\ny"]}}, "parameters.a", "short text"),
        ({"parameters": {"a": {"type": "normal"}}}, "parameters.a", "float, int or choice"),
        ({"method": "hyperband"}, "method", "grid, random or bayesian"),
        ({"objective": {"metric": "val acc"}}, "objective.metric", "metric"),
        ({"objective": {"metric": "x", "goal": "up"}}, "objective.goal", "maximize"),
        ({"budget": {"max_trials": 0}}, "budget.max_trials", "from 1"),
        ({"budget": {"max_concurrent": True}}, "budget.max_concurrent", "whole number"),
        ({"folds": 50}, "folds", "to 20"),
        ({"early_stopping": {"method": "patience"}}, "early_stopping.method", "median"),
        ({"launch": "train"}, "launch", "POST /api/v1/jobs/"),
        ({"extra": 1}, "spec", "Unknown key(s): extra"),
        ({"method": "grid"}, "parameters", "give lr as a list"),
    ],
)
def test_each_wrong_field_is_named(overrides, field, needle):
    with pytest.raises(spec.SpecError) as caught:
        spec.validate(valid(**overrides))
    assert needle in caught.value.errors[field], caught.value.errors


def test_a_grid_budget_is_its_size_and_a_huge_grid_is_refused():
    grid = valid(
        method="grid", parameters={"a": [1, 2, 3], "b": {"type": "int", "low": 1, "high": 2}}
    )
    assert spec.validate(grid)["max_trials"] == 6
    assert spec.grid(spec.validate(grid)["parameters"])[4] == {"a": 3, "b": 1}
    huge = valid(method="grid", parameters={f"p{i}": list(range(10)) for i in range(5)})
    with pytest.raises(spec.SpecError, match="100000 combinations"):
        spec.validate(huge)


def test_a_spec_larger_than_its_bound_is_refused_before_parsing():
    with pytest.raises(spec.SpecError, match="larger than"):
        spec.load("a: " + "x" * (spec.MAX_SPEC_BYTES + 1))
