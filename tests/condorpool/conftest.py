"""The real HTCondor pool of `make condorpool`, reached over SSH like any access point
(fixtures condorpool_info, condorpool and as_pool_root: tests/conftest.py)."""

import pytest

from clusters import pool


@pytest.fixture(autouse=True)
def _fresh_pool():
    pool.close_all()
    yield
    pool.close_all()
