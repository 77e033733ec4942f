"""The real inspect_ai against the composebox provider (scripts/inspect/run.sh runs these in a
Debian trixie root, with inspect_ai from its source and composebox from its wheel).

The provider is the installed wheel's, found through its entry point: nothing here puts the
checkout's clients/python on sys.path (the shared end-to-end helpers, tests/e2e.py, are loaded
by file). The backend is $COMPOSEBOX_TEST_BACKEND's (docker or kubernetes, as for the client's
suite); with $COMPOSEBOX_TEST_ENGINES (NAME=ENDPOINT,...) the provider's servers spread samples
over those Docker engines, through $COMPOSEBOX_ARGS as an operator would set it.
"""

from __future__ import annotations

import importlib.util
import os
import secrets
import shlex
import subprocess
import sys
from typing import Dict, List

import pytest

REPO = os.environ.get("COMPOSEBOX_REPO") or os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__)))))
HERE = os.path.dirname(os.path.abspath(__file__))


def _load(name: str, path: str):
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


e2e = _load("cbx_e2e", os.path.join(REPO, "clients", "python", "tests", "e2e.py"))

ENGINES: Dict[str, str] = dict(
    e.split("=", 1) for e in (os.environ.get("COMPOSEBOX_TEST_ENGINES") or "").split(",") if e)


def engine_args() -> List[str]:
    return [a for name, ep in ENGINES.items() for a in ("--engine", f"{name}={ep}")]


def cli(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    """The composebox CLI against the backend (and engines) under test."""
    r = subprocess.run([e2e.binary(), *e2e.backend_flags(), *engine_args(), *args],
                       capture_output=True, text=True)
    if check:
        assert r.returncode == 0, f"composebox {' '.join(args)}: exit {r.returncode}: {r.stderr}"
    return r


def projects(task: str) -> List[dict]:
    """The projects of a task, of any owner, as `composebox ls --json --all --task` lists them."""
    import json

    r = cli("ls", "--json", "--all", "--task", task, check=False)
    if r.returncode != 0 and "no such task" in r.stderr.lower():
        return []
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["projects"]


def left(task: str) -> List[str]:
    """What a task left anywhere: projects on the backend (and every engine), and on Docker
    the containers, networks and volumes labelled with it."""
    out = [f"project {p['name']} ({p.get('status')})" for p in projects(task)]
    if not e2e.KUBERNETES and not ENGINES:
        out += e2e.resources(task)
    return out


def force_remove(task: str) -> None:
    cli("cleanup", "--all", "--task", task, check=False)
    # The images built for the task too: every run's task has a name of its own.
    cli("cleanup", "--images", "--task", task, check=False)
    if not e2e.KUBERNETES:
        e2e.force_remove(task)


@pytest.fixture(scope="session", autouse=True)
def environment():
    """The provider's servers: the binary under test, spawned (no running server named), with
    the backend's settings and the engines' flags in the operator's variables."""
    e2e.require_engine()
    os.environ["COMPOSEBOX_BIN"] = e2e.binary()
    for v in ("COMPOSEBOX_SOCKET", "COMPOSEBOX_URL", "COMPOSEBOX_TOKEN_FILE", "COMPOSEBOX_TOKEN"):
        os.environ.pop(v, None)
    # On Kubernetes the backend's settings are already in the environment (require_engine).
    os.environ["COMPOSEBOX_ARGS"] = shlex.join(engine_args())
    yield


@pytest.fixture
def name():
    """A task name no other run uses ("inspect-" + it is the composebox task); whatever it
    left is removed, and must have been nothing."""
    n = "pyi" + secrets.token_hex(4)
    yield n
    task = "inspect-" + n
    remaining = left(task)
    force_remove(task)
    assert remaining == [], f"resources left behind: {remaining}"


@pytest.fixture
def standin_log(tmp_path, monkeypatch):
    """A log of every stand-in called (standins/README.md); tests of sandbox paths assert it
    stays empty."""
    path = tmp_path / "standins.log"
    path.write_text("")
    monkeypatch.setenv("COMPOSEBOX_STANDIN_LOG", str(path))
    return path
