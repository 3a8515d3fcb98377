"""The tests' one polling helper (tests/polling.py)."""

import itertools
import types

import pytest

from tests import polling


class Clock:
    """time.monotonic and time.sleep for polling, without waiting."""

    def __init__(self, monkeypatch):
        self.now = 1000.0
        self.sleeps: list[float] = []
        fake = types.SimpleNamespace(monotonic=lambda: self.now, sleep=self.sleep)
        monkeypatch.setattr(polling, "time", fake)

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


@pytest.fixture
def clock(monkeypatch):
    monkeypatch.delenv(polling.SCALE_VARIABLE, raising=False)
    return Clock(monkeypatch)


def test_returns_the_first_truthy_value(clock):
    values = iter([None, 0, "", {"state": "done"}])
    assert polling.until(lambda: next(values), 10, "the job") == {"state": "done"}
    assert clock.sleeps == [0.5, 0.5, 0.5]


def test_times_out_naming_what_and_the_last_value(clock):
    counter = itertools.count()
    with pytest.raises(AssertionError) as raised:
        polling.until(lambda: next(counter) and [], 3, "the job to end", interval=1)
    message = str(raised.value)
    assert "the job to end" in message and "after 3s" in message and "[]" in message
    # Called at the start, each second, and once more at the deadline itself.
    assert next(counter) == 4 and clock.now == 1003.0


def test_what_may_be_a_function_read_at_the_end(clock):
    state = {"job": "pending"}

    def check():
        state["job"] = "running"
        return False

    with pytest.raises(AssertionError, match="job is running"):
        polling.until(check, 1, lambda: f"job is {state['job']}")


def test_the_timeout_scales_with_the_environment(clock, monkeypatch):
    monkeypatch.setenv(polling.SCALE_VARIABLE, "2.5")
    with pytest.raises(AssertionError, match="after 25s"):
        polling.until(lambda: False, 10, "nothing", interval=1)
    assert clock.now == 1025.0
    assert polling.scaled(4) == 10.0


def test_sleeps_no_further_than_the_deadline(clock):
    with pytest.raises(AssertionError):
        polling.until(lambda: False, 1.2, "nothing", interval=1)
    assert clock.sleeps == [1, pytest.approx(0.2)]


def test_ignored_exceptions_count_as_not_yet(clock):
    attempts = iter([ConnectionRefusedError("no"), ConnectionRefusedError("no"), "up"])

    def connect():
        value = next(attempts)
        if isinstance(value, Exception):
            raise value
        return value

    assert polling.until(connect, 5, "the port", ignoring=(OSError,)) == "up"
    with pytest.raises(AssertionError, match="ConnectionRefusedError"):
        polling.until(
            lambda: (_ for _ in ()).throw(ConnectionRefusedError()),
            1,
            "the port",
            ignoring=(OSError,),
        )
    with pytest.raises(KeyError):  # not ignored: at once
        polling.until(lambda: {}["x"], 5, "a key", ignoring=(OSError,))


@pytest.mark.parametrize("raw", ["zero", "0", "-1"])
def test_a_scale_that_is_no_positive_number_is_refused(monkeypatch, raw):
    monkeypatch.setenv(polling.SCALE_VARIABLE, raw)
    with pytest.raises(ValueError, match=polling.SCALE_VARIABLE):
        polling.scale()


def test_the_scale_defaults_to_one(monkeypatch):
    monkeypatch.delenv(polling.SCALE_VARIABLE, raising=False)
    assert polling.scale() == 1.0
    monkeypatch.setenv(polling.SCALE_VARIABLE, "")
    assert polling.scale() == 1.0
