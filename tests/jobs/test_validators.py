"""The patterns of jobs/validators.py end at the end of the value: Python's ``$`` also
matches before a final newline, so "ada\\n" passed as a user name before (\\Z now)."""

import pytest
from django.core.exceptions import ValidationError

from jobs import validators


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
    ],
)
def test_a_value_with_a_trailing_newline_is_refused(check, good):
    check(good)  # accepted as it is
    for bad in (good + "\n", good + "\r\n"):
        with pytest.raises(ValidationError):
            check(bad)


def test_the_compiled_patterns_refuse_a_trailing_newline():
    token = "a" * 20
    assert validators.SESSION_TOKEN.match(token)
    assert not validators.SESSION_TOKEN.match(token + "\n")
    assert validators.JOB_FOLDER.match(".portal/jobs/12-0123456789")
    assert not validators.JOB_FOLDER.match(".portal/jobs/12-0123456789\n")
