"""The package stands alone: an sdist and a wheel build from the tree with the system's tools
(``python3 -m build --no-isolation``: no index needed), the wheel installs into a fresh venv that
uses the system's site packages, and there it imports, registers its inspect_ai entry point and
talks to a spawned server."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import zipfile

import pytest

import composebox

from . import e2e

SOURCE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(cmd, **kw) -> subprocess.CompletedProcess:
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    assert r.returncode == 0, f"{' '.join(map(str, cmd))}: exit {r.returncode}\n{r.stdout}\n{r.stderr}"
    return r


@pytest.fixture(scope="module")
def dist(tmp_path_factory):
    """The sdist and the wheel, built from a copy of the tree (the build writes egg-info into
    its source directory). The wheel is built from the sdist, so a file the sdist misses fails
    the wheel too."""
    pytest.importorskip("build", reason="python3 -m build is missing (make test-python installs "
                        "python3-build)")
    tmp = tmp_path_factory.mktemp("package")
    src = tmp / "src"
    shutil.copytree(SOURCE, src, ignore=shutil.ignore_patterns(
        "__pycache__", "*.egg-info", "build", "dist", ".pytest_cache"))
    out = tmp / "dist"
    run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(src)])
    wheels = list(out.glob("*.whl"))
    sdists = list(out.glob("*.tar.gz"))
    assert len(wheels) == 1 and len(sdists) == 1, os.listdir(out)
    return tmp, wheels[0], sdists[0]


@pytest.fixture(scope="module")
def venv(dist):
    """A fresh venv on the system's site packages (its httpx, and its pip to install with), with
    the wheel installed and nothing else."""
    tmp, wheel, _ = dist
    env_dir = tmp / "venv"
    run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(env_dir)])
    python = env_dir / "bin" / "python"
    run([str(python), "-m", "pip", "install", "--no-deps", "--no-index", "--disable-pip-version-check",
         "-q", str(wheel)])
    return python


def test_the_wheel_and_the_sdist_hold_the_package(dist):
    _, wheel, sdist = dist
    version = composebox.__version__
    assert wheel.name == f"composebox-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        info = f"composebox-{version}.dist-info"
        metadata = z.read(f"{info}/METADATA").decode()
        entry_points = z.read(f"{info}/entry_points.txt").decode()
    for module in ("__init__", "_common", "_uds", "_uds_sendall", "_version", "aio", "client",
                   "errors", "inspect", "inspect_mapping", "types", "_registry"):
        assert f"composebox/{module}.py" in names, module
    assert "composebox/py.typed" in names
    assert f"Version: {version}" in metadata
    # setuptools before 68 writes "httpx (>=0.23)", later ones "httpx>=0.23".
    requires = [line.split(":", 1)[1].replace(" ", "").replace("(", "").replace(")", "")
                for line in metadata.splitlines() if line.startswith("Requires-Dist:")]
    assert "httpx>=0.23" in requires, requires
    assert "Requires-Python: >=3.9" in metadata
    # The README is the project page: it says which server the client needs.
    assert "api_revision" in metadata
    assert "[inspect_ai]" in entry_points and "composebox = composebox._registry" in entry_points
    with tarfile.open(sdist) as t:
        members = {m.name.split("/", 1)[1] for m in t.getmembers() if "/" in m.name}
    for f in ("pyproject.toml", "README.md", "composebox/py.typed", "composebox/_version.py"):
        assert f in members, f


def test_the_wheel_imports_in_a_fresh_venv(venv, tmp_path):
    code = ("import importlib.metadata as md, composebox; "
            "print(composebox.__file__); print(md.version('composebox')); "
            "print([e.value for e in md.entry_points(group='inspect_ai') if e.name == 'composebox'])")
    # From an empty directory, so that nothing but the installed package can be imported.
    r = run([str(venv), "-c", code], cwd=tmp_path)
    path, version, entry = r.stdout.splitlines()
    venv_dir = os.path.dirname(os.path.dirname(str(venv)))
    assert path.startswith(os.path.join(venv_dir, "lib")), path
    assert version == composebox.__version__
    assert entry == "['composebox._registry']"


def test_the_installed_wheel_talks_to_a_spawned_server(venv, tmp_path):
    binary = e2e.binary()
    code = ("import composebox, sys\n"
            "with composebox.Client.spawn(sys.argv[1]) as c:\n"
            "    v = c.check_server()\n"
            "    print(composebox.__file__, v.api, v.api_revision, sep='\\n')\n"
            "    assert '/v1/tasks' in c.openapi()['paths']\n")
    r = run([str(venv), "-c", code, binary], cwd=tmp_path)
    path, api, revision = r.stdout.splitlines()
    assert path.startswith(os.path.dirname(os.path.dirname(str(venv))))
    assert api == "v1" and int(revision) >= composebox.MIN_API_REVISION
