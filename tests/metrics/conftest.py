import pytest

from tests import factories


@pytest.fixture
def job(owner, cluster):
    return factories.training_job(owner, cluster)
