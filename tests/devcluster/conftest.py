import pytest

from clusters import pool


@pytest.fixture(autouse=True)
def _fresh_pool():
    pool.close_all()
    yield
    pool.close_all()
