"""Both real schedulers, one test per behaviour they share: each test takes the
``scheduler_cluster`` fixture (tests/conftest.py), the dev cluster's Slurm and the pool's
HTCondor in turn, and runs in the part of the suite of its scheduler (part_of). What only
one scheduler does is tested in tests/devcluster/ or tests/condorpool/."""

import pytest

from clusters import pool


@pytest.fixture(autouse=True)
def _fresh_pool():
    pool.close_all()
    yield
    pool.close_all()
