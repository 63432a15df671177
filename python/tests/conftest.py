"""Every test starts from the same seed (mixrt.manual_seed, as the C++
tests' Generator(0))."""

import pytest

import mixrt


@pytest.fixture(autouse=True)
def seeded():
    mixrt.manual_seed(0)
    yield
