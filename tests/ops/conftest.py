"""The operations tests' fixtures."""

from __future__ import annotations

import secrets

import psycopg
import pytest
from django.db import connection


@pytest.fixture
def postgres_databases(db):
    """``new()``: the URL of a new empty PostgreSQL database (dropped afterwards)."""
    if connection.vendor != "postgresql":
        pytest.skip("the PostgreSQL part runs with the PostgreSQL test database")
    s = connection.settings_dict
    base = f"postgres://{s['USER']}:{s['PASSWORD']}@{s['HOST']}:{s['PORT']}"
    made: list[str] = []

    def new() -> str:
        name = f"portal_backup_{secrets.token_hex(4)}"
        with psycopg.connect(f"{base}/postgres", autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{name}"')
        made.append(name)
        return f"{base}/{name}"

    yield new
    with psycopg.connect(f"{base}/postgres", autocommit=True) as admin:
        for name in made:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
