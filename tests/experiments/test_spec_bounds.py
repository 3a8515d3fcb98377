"""A spec is bounded before it is read (issue #30): no YAML anchors or aliases (each level
multiplied the document by ten), bounded depth, values and numbers, and a refused value
is quoted cut, never echoed whole."""

import time

import pytest

from common import documents
from common.text import quoted
from experiments import spec


def alias_bomb(levels: int) -> str:
    """A few hundred bytes that safe_load expands to 10**levels values."""
    lines = ["name: bomb", "parameters:", "  a0: &a0 [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]"]
    for n in range(1, levels):
        lines.append(f"  a{n}: &a{n} [" + ", ".join([f"*a{n - 1}"] * 10) + "]")
    return "\n".join(lines) + "\n"


def refusal(text: str) -> str:
    with pytest.raises(spec.SpecError) as caught:
        spec.load(text)
    return caught.value.errors["spec"]


def test_aliases_are_refused_at_once_whatever_they_would_expand_to():
    started = time.monotonic()
    message = refusal(alias_bomb(9))  # 10**9 values, had it been expanded
    assert time.monotonic() - started < 1
    assert "aliases" in message and len(message) < 200


@pytest.mark.parametrize(
    "text, needle",
    [
        ("a: &x 1\nb: 2\n", "anchors and aliases"),  # an anchor alone too
        ("a: " + "[" * 30 + "]" * 30 + "\n", "levels deep"),
        ("a: " + "1" * 5000 + "\n", "number longer than"),  # int() of it raised: a 500
        ("a: " + "1" * 60 + ".5\n", "number longer than"),
        ("a: [" + ",".join(["1"] * 25_000) + "]\n", "more than"),
    ],
)
def test_what_would_make_a_small_text_large_or_slow_is_refused(text, needle):
    message = refusal(text)
    assert needle in message and len(message) < 200


def test_a_mapping_sent_as_json_is_bounded_too():
    for data in (
        {"name": "x", "parameters": {"lr": {"type": "float", "low": 10**4000, "high": 1}}},
        {"name": "x", "parameters": {"lr": [float("inf"), 1]}},
        {"name": "x", "parameters": {"lr": [[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]}},
        {"name": "x" * 100_000},
    ):
        with pytest.raises(spec.SpecError) as caught:
            spec.validate(data)
        assert len(str(caught.value)) < 300


def test_a_refused_value_is_quoted_cut():
    with pytest.raises(spec.SpecError) as caught:
        spec.validate({"parameters": {"lr": [list(range(5000))]}, "z" * 10_000: 1, "objective": {}})
    errors = caught.value.errors
    assert len(errors["parameters.lr"]) < 200 and "[0, 1, 2, 3, ...]" in errors["parameters.lr"]
    assert len(errors["spec"]) < 200 and "zzz...zzz" in errors["spec"]


def test_quoted():
    assert quoted("abc") == "'abc'"
    assert len(quoted("x" * 10_000)) <= 60
    assert quoted(10**5000) == "<a number of about 5000 digits>"
    assert len(quoted([[list(range(10**5))]] * 1000, 80)) <= 80


def test_documents_check_counts_without_recursion():
    deep: list = []
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(documents.DocumentError, match="levels deep"):
        documents.check(deep)
    with pytest.raises(documents.DocumentError, match="values"):
        documents.check(list(range(documents.MAX_NODES + 1)))
    documents.check({"a": [1, 2.5, "x", None, True, {"b": -(2**63) + 1}]})
