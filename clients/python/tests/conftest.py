import os
import sys

# Tests run against the source tree, installed or not.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


import pytest  # noqa: E402

from . import e2e  # noqa: E402


# The end-to-end tests' shared fixtures: the binary under test (skipping without an engine), and
# a task name whose resources must all be gone when the test ends.
@pytest.fixture(scope="module")
def bin_path():
    e2e.require_engine()
    return e2e.binary()


@pytest.fixture
def task_name():
    name = e2e.task_name()
    yield name
    left = e2e.resources(name)
    e2e.force_remove(name)
    assert left == [], f"resources left behind: {left}"
