"""A trial's command: its parameters as ``--name=value`` arguments, and the command that runs
a trial's configuration again as an ordinary job (docs/use/experiments.md). What a trial's job
is told on the node is jobs/models/job.py's ``member``."""

from __future__ import annotations

import json
import shlex

from jobs.models.annotations import PARAMS_FILE, param_env_name
from jobs.models.annotations import format_param as format_value

__all__ = ["PARAMS_FILE", "param_env_name", "format_value"]


def arguments(params: dict) -> str:
    """``--name=value`` for each parameter, each one shell word."""
    return " ".join(shlex.quote(f"--{k}={format_value(v)}") for k, v in params.items())


def trial_command(command: str, params: dict, pass_arguments: bool) -> str:
    """The command a trial's jobs run: the experiment's, with ``--name=value`` appended to
    its last line when the experiment passes arguments."""
    if not pass_arguments or not params:
        return command
    return f"{command.rstrip()} {arguments(params)}"


def again_command(experiment, params: dict) -> str:
    """The command that runs a trial's configuration once more as an ordinary job (no fold:
    the whole data): its parameters in the environment as in the trial (PORTAL_PARAMS_JSON
    stands in for params.json) and on the command line if the experiment passes them."""
    exports = [f"PORTAL_PARAMS_JSON={shlex.quote(json.dumps(params, sort_keys=True))}"]
    exports += [f"{param_env_name(k)}={shlex.quote(format_value(v))}" for k, v in params.items()]
    command = trial_command(experiment.launch["command"], params, experiment.pass_arguments)
    return f"export {' '.join(exports)}\n{command}"


def again_name(trial) -> str:
    experiment = trial.experiment
    return f"{experiment.name or f'experiment {experiment.pk}'}: trial {trial.number} again"[:100]
