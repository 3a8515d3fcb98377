"""Launching a job, owned here: the fields a launch sets, their defaults and checks.

- form.py: the launch form (the page's, and the checks behind every way in), the field
  list (LAUNCH_FIELDS), the defaults and copies the page starts from, the limits it shows;
- request.py: a request as the API, the CLI and experiments send it, checked by
  ``validate_request(user, data)`` through that form.
"""

from jobs.launch.form import (
    LAUNCH_FIELDS,
    TRIAL_FIELDS,
    LaunchForm,
    image_layout,
    last_notebook_dir,
    launch_initial,
    partition_limits,
    tensorboard_initial,
    trial_fields,
)
from jobs.launch.request import API_FIELDS, API_NAMES, Checked, as_request, validate_request

__all__ = [
    "API_FIELDS",
    "API_NAMES",
    "LAUNCH_FIELDS",
    "TRIAL_FIELDS",
    "Checked",
    "as_request",
    "LaunchForm",
    "image_layout",
    "last_notebook_dir",
    "launch_initial",
    "partition_limits",
    "tensorboard_initial",
    "trial_fields",
    "validate_request",
]
