"""composebox as a pip user gets it: the platform wheel (the client with the static binary
inside) installed with pip into a fresh venv, and nothing else. The venv sees the system's site
packages for httpx only; no composebox is on PATH and COMPOSEBOX_BIN is unset, so whatever runs
is the wheel's own binary: `Client.spawn()` with no argument, a two-service sample with exec and
files, the `composebox` console script and `python -m composebox`.

The wheel is the one $COMPOSEBOX_TEST_WHEEL names (make wheel's, say), else one built here the
way make wheel builds it (scripts/build-wheels.sh) around the binary under test, which must be
static (make build's is)."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import zipfile

import pytest

import composebox

from . import e2e

SCRIPT = os.path.join(e2e.REPO, "scripts", "build-wheels.sh")
ARCH = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}.get(
    platform.machine().lower(), platform.machine().lower())
WHEEL = f"composebox-{composebox.__version__}-py3-none-manylinux_2_17_{ARCH}.whl"

pytestmark = [
    pytest.mark.skipif(e2e.KUBERNETES, reason="the wheel is tested on the Docker engine"),
    pytest.mark.skipif(os.environ.get("COMPOSEBOX_TEST_STACK") == "modern",
                       reason="the venv runs on the system's httpx whatever PYTHONPATH says: "
                              "the run on the installed packages covers it"),
]


def run(cmd, **kw) -> subprocess.CompletedProcess:
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    assert r.returncode == 0, f"{' '.join(map(str, cmd))}: exit {r.returncode}\n{r.stdout}\n{r.stderr}"
    return r


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> str:
    given = os.environ.get("COMPOSEBOX_TEST_WHEEL")
    if given:
        assert os.path.basename(given) == WHEEL, f"$COMPOSEBOX_TEST_WHEEL={given}: want {WHEEL}"
        return given
    pytest.importorskip("build", reason="python3 -m build is missing (make test-python installs "
                        "python3-build)")
    out = tmp_path_factory.mktemp("dist")
    run([SCRIPT, str(out), e2e.binary()], env=dict(os.environ, PYTHON=sys.executable))
    path = out / WHEEL
    assert path.exists(), os.listdir(out)
    return str(path)


@pytest.fixture(scope="module")
def user(wheel, tmp_path_factory):
    """A fresh venv with the wheel installed, and the environment of a user who has nothing
    else: PATH is the venv's bin and the system's directories, less any that hold a composebox;
    no COMPOSEBOX_BIN; a state directory of the test's own."""
    e2e.require_engine()
    tmp = tmp_path_factory.mktemp("user")
    venv = tmp / "venv"
    run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)])
    python = str(venv / "bin" / "python")
    run([python, "-m", "pip", "install", "--no-deps", "--no-index", "--disable-pip-version-check",
         "-q", wheel])
    dirs = [str(venv / "bin")] + [d for d in ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin",
                                              "/usr/bin", "/sbin", "/bin")
                                  if not os.path.exists(os.path.join(d, "composebox"))]
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("COMPOSEBOX_") and k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(PATH=os.pathsep.join(dirs), COMPOSEBOX_STATE_DIR=str(tmp / "state"),
               COMPOSEBOX_BACKEND="docker")
    return venv, python, env, tmp


def test_the_platform_wheel_holds_the_static_binary_and_the_console_script(wheel):
    with zipfile.ZipFile(wheel) as z:
        info = z.getinfo("composebox/_bin/composebox")
        meta = f"composebox-{composebox.__version__}.dist-info"
        tags = z.read(f"{meta}/WHEEL").decode()
        entry_points = z.read(f"{meta}/entry_points.txt").decode()
        head = z.open(info).read(64)
    assert (info.external_attr >> 16) & 0o111, "the binary is not executable in the wheel"
    assert head[:4] == b"\x7fELF"
    assert f"Tag: py3-none-manylinux_2_17_{ARCH}" in tags and "Root-Is-Purelib: false" in tags
    assert "composebox = composebox.__main__:main" in entry_points
    assert "composebox = composebox._registry" in entry_points


def test_the_console_script_runs_the_bundled_binary(user):
    venv, python, env, tmp = user
    r = run(["composebox", "--version"], env=env, cwd=tmp)
    assert r.stdout.startswith(f"composebox {composebox.__version__} ("), r.stdout
    r = run(["composebox", "version", "--json"], env=env, cwd=tmp)
    assert f'"version": "{composebox.__version__}"' in r.stdout
    # The script hands over to the binary: its exit code and stderr are the binary's own.
    r = subprocess.run(["composebox", "no-such-verb"], env=env, cwd=tmp, capture_output=True, text=True)
    assert r.returncode == 2 and "composebox: usage: unknown command" in r.stderr, r
    # python -m composebox too; doctor checks the engine through the bundled binary.
    r = subprocess.run([python, "-m", "composebox", "--json", "doctor"], env=env, cwd=tmp,
                       capture_output=True, text=True)
    checks = {c["name"]: c["status"] for c in json.loads(r.stdout)["checks"]}
    assert checks.get("daemon") == "pass" and r.returncode in (0, 125), r


def test_client_spawn_runs_a_sample_on_the_bundled_binary(user, task_name):
    venv, python, env, tmp = user
    code = r'''
import os, sys, composebox
COMPOSE = """
services:
  default:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["tail", "-f", "/dev/null"]
  web:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["httpd", "-f", "-p", "80", "-h", "/etc"]
"""
with composebox.Client.spawn() as c:
    print(c._server.binary)
    task = c.task_init(name=sys.argv[1], compose_yaml=COMPOSE)
    s = c.sample_init(task)
    assert sorted(sb.service for sb in s.sandboxes) == ["default", "web"], s.sandboxes
    r = c.exec(s, ["wget", "-qO-", "http://web/hostname"], timeout=60)
    assert r.exit_code == 0 and r.stdout_text.strip(), r
    assert c.exec(s, ["hostname"], service="web").stdout_text == r.stdout_text
    c.write_file(s, "notes/a.bin", b"\xff\x00 from the wheel")
    assert c.read_file(s, "notes/a.bin") == b"\xff\x00 from the wheel"
    assert c.exec(s, ["cat", "notes/a.bin"]).stdout == b"\xff\x00 from the wheel"
    c.sample_cleanup(s)
    c.task_cleanup(task)
print("ok")
'''
    try:
        r = run([python, "-c", code, task_name], env=env, cwd=tmp, timeout=600)
    finally:
        leftovers = e2e.resources(task_name)
        e2e.force_remove(task_name)
    binary, ok = r.stdout.split()
    assert binary.startswith(str(venv)) and binary.endswith(os.path.join("composebox", "_bin", "composebox")), binary
    assert ok == "ok"
    assert leftovers == []
