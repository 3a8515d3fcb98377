"""The proxy's database calls run in pool threads; each gives its connection back."""

import asyncio

import pytest
from django.db import connections

from proxy import app

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_pool_threads_connection_is_closed_after_the_call():
    def query():
        wrapper = connections["default"]  # this thread's own
        with wrapper.cursor() as cursor:
            cursor.execute("SELECT 1")
        return wrapper

    used = asyncio.run(app._db(query))
    assert used is not connections["default"]  # it ran in another thread
    assert used.connection is None  # and did not keep its connection open
