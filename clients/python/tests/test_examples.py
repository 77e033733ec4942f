"""The programs in clients/python/examples, run as a user runs them: a fresh interpreter, the
package on PYTHONPATH and the freshly built composebox found through $COMPOSEBOX_BIN."""

import os
import subprocess
import sys

import pytest

from . import e2e

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")
PACKAGE = os.path.dirname(EXAMPLES)

# Each example, the task name it uses, and lines its output must hold.
CASES = {
    "quickstart.py": ("example-py-quickstart",
                      ["0 level 3", "web answered: 0", "stdout b'1", "streamed exit 0",
                       "not found: "]),
    "async_gather.py": ("example-py-async",
                        ["gathered: 0 1 2 3 4 5 6 7", "stdout b'a\\n'", "stderr b'b\\n'",
                         "read back 1048576 bytes"]),
}


def test_every_example_is_run():
    assert sorted(f for f in os.listdir(EXAMPLES) if f.endswith(".py")) == sorted(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_examples(name):
    e2e.require_engine()
    binary = e2e.binary()
    task, wants = CASES[name]
    env = dict(os.environ, COMPOSEBOX_BIN=binary)
    # The package first, before whatever the stack under test put on PYTHONPATH.
    env["PYTHONPATH"] = os.pathsep.join(p for p in (PACKAGE, os.environ.get("PYTHONPATH")) if p)
    try:
        r = subprocess.run([sys.executable, os.path.join(EXAMPLES, name)], env=env,
                           capture_output=True, text=True, timeout=240)
        assert r.returncode == 0, f"{name}: exit {r.returncode}\n{r.stdout}\n{r.stderr}"
        for want in wants:
            assert want in r.stdout, f"{name}: no {want!r} in its output:\n{r.stdout}"
    finally:
        left = e2e.resources(task)
        e2e.force_remove(task)
    assert left == [], f"{name} left resources behind: {left}"
