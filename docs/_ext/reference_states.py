"""The job states page: the portal's states (common/choices.py: ``State``, which are active,
final, asked at the scheduler) and how each scheduler's states map onto them: Slurm's
table (schedulers/slurm/status.py) and HTCondor's JobStatus numbers, found by asking
schedulers/htcondor/status.py's own ``to_status`` what each becomes."""

from __future__ import annotations

import ast
import inspect
from dataclasses import replace

from reference_text import ROOT, cell, code, django_ready, first_paragraph, member_comments, table


def condor_probes() -> list[tuple[str, dict]]:
    """The job ad's attributes that decide its portal state besides JobStatus, each tried
    on every JobStatus: (in words, what the ad says). The first is the plain case (ExitCode
    0, no RemoveReason)."""
    from schedulers.htcondor.status import TIME_LIMIT_ATTRIBUTE

    limit = f"{TIME_LIMIT_ATTRIBUTE} < time()"
    return [
        ("", {}),
        ("ExitCode is not 0", {"exit_code": 1}),
        ("killed by a signal (ExitBySignal)", {"exit_by_signal": True, "exit_signal": 9}),
        (
            "removed by the portal's time limit (RemoveReason)",
            {
                "remove_reason": f"The job attribute PeriodicRemove expression '{limit}' "
                "evaluated to TRUE"
            },
        ),
    ]


def condor_statuses() -> list[tuple[str, int]]:
    """(name, number) of HTCondor's JobStatus values, as schedulers/htcondor/parsers.py
    names them (its ``NAME, ... = range(...)`` statement), in order."""
    from schedulers.htcondor import parsers

    tree = ast.parse((ROOT / "schedulers" / "htcondor" / "parsers.py").read_text())
    for statement in tree.body:
        if (
            isinstance(statement, ast.Assign)
            and isinstance(statement.targets[0], ast.Tuple)
            and isinstance(statement.value, ast.Call)
            and getattr(statement.value.func, "id", "") == "range"
        ):
            names = [target.id for target in statement.targets[0].elts]
            return [(name, getattr(parsers, name)) for name in names]
    raise LookupError("no JobStatus numbers in schedulers/htcondor/parsers.py")


def condor_states(number: int) -> list[tuple[str, str, bool]]:
    """(portal state, when, held) a job of JobStatus ``number`` becomes, by to_status: the
    plain case's state ("when": "" if it is the only one, else "otherwise"), then each
    other state a probe gives, with the probes that give it. ValueError for an unknown
    number."""
    from schedulers.htcondor import parsers, status

    plain = parsers.CondorJob(
        scheduler_id="1.0", owner="someone", name="job", status=number, exit_code=0
    )
    found: dict[str, list[str]] = {}
    held: dict[str, bool] = {}
    for words, fields in condor_probes():
        told = status.to_status(replace(plain, **fields))
        found.setdefault(str(told.state), []).append(words)
        held.setdefault(str(told.state), told.held)
    rows = []
    for state, probes in found.items():
        if "" in probes:
            rows.insert(0, (state, "otherwise" if len(found) > 1 else "", held[state]))
        else:
            rows.append((state, "; ".join(probes), held[state]))
    return rows


def portal_states_rows() -> list[list[str]]:
    from common.choices import ACTIVE_STATES, FINAL_STATES, SCHEDULED_STATES, State

    notes = member_comments(State)
    rows = []
    for state in State:
        kind = "active" if state in ACTIVE_STATES else "final" if state in FINAL_STATES else ""
        asked = "yes" if state in SCHEDULED_STATES else ""
        above, beside = notes.get(state.name, ("", ""))
        note = " ".join(part for part in (above, beside) if part)
        rows.append([code(state.value), cell(state.label), kind, asked, cell(note)])
    return rows


def states_page() -> str:
    django_ready()
    from schedulers.htcondor import status as condor
    from schedulers.slurm import status as slurm

    out = [
        "# Job states",
        "",
        "The states a job goes through in the portal, and how each scheduler's own states",
        "map onto them, generated at each build from `common/choices.py` (`State`),",
        "`schedulers/slurm/status.py` and `schedulers/htcondor/status.py`.",
        "",
        "## The portal's states",
        "",
        "A job is *active* until it reaches a *final* state (the API sends `is_active` and",
        "`is_final` with every job); the sync asks the scheduler about the jobs in the",
        "states marked *asked*.",
        "",
        *table(["State", "Label", "Active or final", "Asked", "Note"], portal_states_rows()),
        "",
        "## Slurm",
        "",
        "Each Slurm state, as `STATE_MAP` maps it; the message is what the job's page adds",
        "to say why (`STATE_MESSAGES`).",
        f"`map_state`: {cell(first_paragraph(slurm.map_state.__doc__))}",
        "",
        *table(
            ["Slurm state", "Portal state", "Message"],
            [
                [code(name), code(state), cell(slurm.STATE_MESSAGES.get(name, ""))]
                for name, state in slurm.STATE_MAP.items()
            ],
        ),
        "",
        "### Pending reasons",
        "",
        "A pending job's reason in plain words (`REASON_TEXT`); a reason not in this table",
        "is still shown as a reason. A *held* job waits until it is released.",
        "",
        *table(
            ["Slurm reason", "Shown as", "Held"],
            [
                [code(reason), cell(text), "held" if reason in slurm.HELD_REASONS else ""]
                for reason, text in slurm.REASON_TEXT.items()
            ],
        ),
        "",
        "## HTCondor",
        "",
        "Each JobStatus number and the portal state `to_status` gives it; a *held* job",
        "waits until it is released.",
        f"`to_status`: {cell(first_paragraph(condor.to_status.__doc__))}",
        "",
        *table(
            ["JobStatus", "Name", "Portal state", "When", "Held"],
            [
                [str(number), code(name), code(state), cell(when), "held" if held else ""]
                for name, number in condor_statuses()
                for state, when, held in condor_states(number)
            ],
        ),
        "",
        "### Hold codes",
        "",
        cell(first_paragraph(_comment_above(condor, "HOLD_CODES"))),
        "",
        *table(
            ["HoldReasonCode", "Shown as"],
            [[str(number), cell(text)] for number, text in sorted(condor.HOLD_CODES.items())],
        ),
    ]
    return "\n".join(out) + "\n"


def _comment_above(module, name: str) -> str:
    """The ``#`` block right above ``name = ...`` in ``module``'s source."""
    lines = inspect.getsource(module).splitlines()
    number = next(n for n, line in enumerate(lines) if line.startswith(f"{name} ="))
    above = []
    while number > 0 and lines[number - 1].startswith("#"):
        number -= 1
        above.insert(0, lines[number].lstrip("# ").rstrip())
    return " ".join(above)
