"""scripts/setup-python.sh, which `make test-python` runs first so that a fresh Debian machine
can run these tests: it installs with apt exactly the Debian packages of the modules that do
not import (updating the package lists when an install fails), and elsewhere says what to
install. apt-get is a fake on PATH that records its calls; a module is made missing by a
shadow module that fails to import, which the fake "install" removes."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from . import e2e

SCRIPT = os.path.join(e2e.REPO, "scripts", "setup-python.sh")


def debian_root() -> bool:
    return os.path.exists("/etc/debian_version") and os.geteuid() == 0


@pytest.fixture
def box(tmp_path):
    """tmp/bin/apt-get (the fake), tmp/python3 (the system python with tmp/shadow first on
    its path while tmp/hidden exists), and what the fake was asked, line by line."""
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (tmp_path / "bin").mkdir()
    log = tmp_path / "apt.log"
    apt = tmp_path / "bin" / "apt-get"
    # scripts/apt-get.sh puts apt's own options (-o KEY=VALUE) first: the fake records the rest.
    apt.write_text(f"""#!/bin/sh
while [ "$1" = -o ]; do shift 2; done
echo "$*" >> {log}
if [ "$1" = install ] && [ -e {tmp_path}/fail-until-update ]; then exit 100; fi
if [ "$1" = update ]; then rm -f {tmp_path}/fail-until-update; fi
if [ "$1" = install ]; then rm -f {tmp_path}/hidden; fi
""")
    apt.chmod(0o755)
    python = tmp_path / "python3"
    python.write_text(f"""#!/bin/sh
if [ -e {tmp_path}/hidden ]; then PYTHONPATH={shadow}${{PYTHONPATH:+:$PYTHONPATH}}; export PYTHONPATH; fi
exec {sys.executable} "$@"
""")
    python.chmod(0o755)

    class Box:
        path = tmp_path

        @staticmethod
        def hide(*modules: str) -> None:
            for m in modules:
                (shadow / f"{m}.py").write_text(f"raise ImportError('{m} hidden by the test')\n")
            (tmp_path / "hidden").touch()

        @staticmethod
        def run(python: str = str(python)) -> subprocess.CompletedProcess:
            env = dict(os.environ, PATH=f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
            if python != str(tmp_path / "python3"):
                env.pop("PYTHONPATH", None)  # another interpreter: nothing of this run's stack
            return subprocess.run([SCRIPT, python], capture_output=True, text=True, env=env)

        @staticmethod
        def calls() -> list:
            return log.read_text().splitlines() if log.exists() else []

    return Box


def test_nothing_missing_installs_nothing(box):
    r = box.run()
    assert r.returncode == 0, r.stderr
    assert box.calls() == []


@pytest.mark.skipif(not debian_root(), reason="installs with apt only on Debian as root")
def test_missing_test_modules_are_installed_with_apt(box):
    box.hide("pytest", "pytest_asyncio", "build")
    r = box.run()
    assert r.returncode == 0, r.stderr
    assert box.calls() == ["install -y -qq python3-build python3-pytest python3-pytest-asyncio"]
    assert "installing python3-build python3-pytest python3-pytest-asyncio" in r.stderr


@pytest.mark.skipif(not debian_root(), reason="installs with apt only on Debian as root")
def test_a_fresh_machine_updates_its_package_lists_first(box):
    box.hide("httpx")
    (box.path / "fail-until-update").touch()
    r = box.run()
    assert r.returncode == 0, r.stderr
    assert box.calls() == ["install -y -qq python3-httpx", "update -qq",
                           "install -y -qq python3-httpx"]


@pytest.mark.skipif(not debian_root(), reason="installs with apt only on Debian as root")
def test_an_install_that_does_not_help_fails(box):
    box.hide("pytest")
    (box.path / "shadow" / "keep").touch()
    # The fake install "works" but the module stays missing.
    (box.path / "bin" / "apt-get").write_text(
        f"#!/bin/sh\nwhile [ \"$1\" = -o ]; do shift 2; done\necho \"$*\" >> {box.path}/apt.log\n")
    r = box.run()
    assert r.returncode == 1
    assert "still missing after apt-get install: python3-pytest" in r.stderr


def test_a_venv_is_told_what_to_install(box, tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    r = box.run(str(venv / "bin" / "python"))
    assert r.returncode == 1
    assert "Install by hand" in r.stderr and "python3-httpx" in r.stderr
    assert box.calls() == []
