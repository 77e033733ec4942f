"""Which composebox binary the client, the inspect provider and the console script run: an
explicit one, else the package's own, else $COMPOSEBOX_BIN, else PATH's, never the console
script itself; and importing the package for the console script loads neither httpx nor the
client."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from composebox import PrerequisiteError, _binary

SOURCE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def executable(path) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(0o755)
    return str(path)


@pytest.fixture
def places(tmp_path, monkeypatch):
    """A bundled binary, one named by $COMPOSEBOX_BIN and one on PATH, all present."""
    bundled = executable(tmp_path / "pkg" / "_bin" / "composebox")
    env_bin = executable(tmp_path / "env" / "composebox")
    on_path = executable(tmp_path / "path" / "composebox")
    monkeypatch.setattr(_binary, "BUNDLED", bundled)
    monkeypatch.setenv("COMPOSEBOX_BIN", env_bin)
    monkeypatch.setenv("PATH", str(tmp_path / "path"))
    return bundled, env_bin, on_path


def test_the_bundled_binary_comes_first_then_the_environment_then_path(places, monkeypatch, tmp_path):
    bundled, env_bin, on_path = places
    explicit = executable(tmp_path / "mine" / "composebox")
    assert _binary.find_binary(explicit) == explicit
    assert _binary.find_binary() == bundled
    os.remove(bundled)
    assert _binary.find_binary() == env_bin
    monkeypatch.delenv("COMPOSEBOX_BIN")
    assert _binary.find_binary() == on_path


def test_the_console_script_is_never_its_own_binary(places, monkeypatch, tmp_path):
    bundled, _, on_path = places
    os.remove(bundled)
    monkeypatch.delenv("COMPOSEBOX_BIN")
    # The console script is the first composebox on PATH, as in a venv's bin.
    script = executable(tmp_path / "venv" / "bin" / "composebox")
    monkeypatch.setenv("PATH", os.pathsep.join([str(tmp_path / "venv" / "bin"), str(tmp_path / "path")]))
    monkeypatch.setattr(sys, "argv", [script, "doctor"])
    assert _binary.find_binary() == on_path
    os.remove(on_path)
    with pytest.raises(PrerequisiteError) as e:
        _binary.find_binary(what="composebox")
    msg = str(e.value)
    assert msg.startswith("composebox: no composebox binary") and "COMPOSEBOX_BIN" in msg and "PATH" in msg


def test_a_named_binary_that_is_missing_is_a_prerequisite_error(places, monkeypatch):
    os.remove(places[0])
    monkeypatch.setenv("COMPOSEBOX_BIN", "/nonexistent/composebox")
    with pytest.raises(PrerequisiteError, match="/nonexistent/composebox is not an executable file"):
        _binary.find_binary()


def test_python_m_composebox_runs_the_binary_without_loading_the_client(tmp_path):
    # A stand-in binary that reports what it was given; the run must not import httpx or the
    # client modules, whose import costs more than the rest of the handover.
    fake = tmp_path / "composebox"
    fake.write_text("#!/bin/sh\necho \"args: $*\"\nexit 7\n")
    fake.chmod(0o755)
    code = ("import runpy, sys\n"
            "sys.argv = ['composebox', 'version', '--json']\n"
            "runpy.run_module('composebox', run_name='__main__')\n")
    env = dict(os.environ, COMPOSEBOX_BIN=str(fake), PYTHONPATH=SOURCE)
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert r.returncode == 7 and r.stdout == "args: version --json\n", r
    probe = ("import sys, composebox.__main__ as m\n"
             "print(sorted(n for n in sys.modules if n == 'httpx' or n.startswith('composebox.')))\n")
    r = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r
    assert r.stdout.strip() == "['composebox.__main__', 'composebox._binary', 'composebox._version']", r.stdout
