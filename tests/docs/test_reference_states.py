"""The generated job states page (docs/_ext/reference_states.py) lists every portal state
as active or final, every Slurm state with the portal state it maps to, every Slurm
pending reason and every HTCondor JobStatus the adapter accepts, compared with the code."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "docs" / "_ext"))

import reference_states  # noqa: E402

from common.choices import ACTIVE_STATES, FINAL_STATES, SCHEDULED_STATES, State  # noqa: E402
from schedulers.htcondor import parsers as condor_parsers  # noqa: E402
from schedulers.htcondor import status as condor  # noqa: E402
from schedulers.slurm import status as slurm  # noqa: E402


@pytest.fixture(scope="module")
def page() -> str:
    return reference_states.states_page()


def section(page: str, start: str, end: str | None = None) -> str:
    text = page.split(start, 1)[1]
    return text.split(end, 1)[0] if end else text


def test_every_portal_state_is_on_the_page_as_active_or_final(page):
    rows = re.findall(
        r"^\| `([a-z_]+)` \| [^|]+ \| (active|final|) \| (yes|) \|",
        section(page, "## The portal's states", "## Slurm"),
        re.M,
    )
    listed = {state: (kind, asked) for state, kind, asked in rows}
    assert set(listed) == set(State.values) and len(rows) == len(State)
    for state in State:
        kind = "active" if state in ACTIVE_STATES else "final" if state in FINAL_STATES else ""
        assert listed[state.value] == (kind, "yes" if state in SCHEDULED_STATES else ""), state
    assert set(ACTIVE_STATES) | set(FINAL_STATES) == set(State), "a state neither active nor final"


def test_every_slurm_state_is_on_the_page_with_its_portal_state(page):
    rows = re.findall(
        r"^\| `([A-Z_]+)` \| `([a-z_]+)` \| (.*) \|$",
        section(page, "## Slurm", "### Pending reasons"),
        re.M,
    )
    assert len(slurm.STATE_MAP) > 20 and len(rows) == len(slurm.STATE_MAP)
    for name, state, message in rows:
        assert slurm.map_state(name) == state and state in State.values, name
        assert message.strip() == slurm.STATE_MESSAGES.get(name, "").replace("|", "\\|"), name
    assert set(slurm.STATE_MESSAGES) <= {name for name, _, _ in rows}


def test_every_slurm_pending_reason_is_on_the_page(page):
    rows = re.findall(
        r"^\| `([^`]+)` \| .* \| (held|) \|$",
        section(page, "### Pending reasons", "## HTCondor"),
        re.M,
    )
    assert {reason for reason, _ in rows} == set(slurm.REASON_TEXT)
    assert {reason for reason, held in rows if held} == set(slurm.HELD_REASONS)


def test_every_htcondor_jobstatus_is_on_the_page_with_its_portal_state(page):
    rows = re.findall(
        r"^\| (\d+) \| `([A-Z_]+)` \| `([a-z_]+)` \| ([^|]*) \| (held|) \|$",
        section(page, "## HTCondor", "### Hold codes"),
        re.M,
    )
    listed = {int(number) for number, *_ in rows}
    accepted = set()
    for number in range(-2, 100):  # every JobStatus the adapter turns into a state
        job = condor_parsers.CondorJob(
            scheduler_id="1.0", owner="someone", name="job", status=number, exit_code=0
        )
        try:
            told = condor.to_status(job)
        except ValueError:
            continue
        accepted.add(number)
        plain = [(state, held) for n, _, state, when, held in rows if int(n) == number]
        assert (str(told.state), "held" if told.held else "") in plain, number
    assert len(accepted) >= 7 and listed == accepted
    for number, name, state, _, _ in rows:
        assert getattr(condor_parsers, name) == int(number) and state in State.values
    # Each state a JobStatus can become (an exit code, a signal, the time limit) is a row.
    assert ("3", "timeout") in {(n, s) for n, _, s, _, _ in rows}
    assert {("4", "completed"), ("4", "failed")} <= {(n, s) for n, _, s, _, _ in rows}


def test_every_hold_code_is_on_the_page(page):
    listed = re.findall(r"^\| (\d+) \| ", section(page, "### Hold codes"), re.M)
    assert {int(code) for code in listed} == set(condor.HOLD_CODES)
