"""Helpers of the end-to-end tests: they spawn the real `composebox serve` binary against the
real engine, and skip (saying why) when either is missing."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def binary() -> str:
    """The server binary: $COMPOSEBOX_BIN, else the repo's bin/composebox."""
    candidates = [os.environ.get("COMPOSEBOX_BIN"), os.path.join(REPO, "bin", "composebox")]
    for c in candidates:
        if c and os.access(c, os.X_OK):
            return c
    pytest.skip("no composebox binary: set COMPOSEBOX_BIN or run `make build` "
                "(make test-python does both)")


def require_engine() -> None:
    if shutil.which("docker") is None:
        pytest.skip("no docker CLI to check the engine and the leftovers with")
    r = subprocess.run(["docker", "info", "--format", "{{.ServerVersion}}"], capture_output=True,
                       text=True)
    if r.returncode != 0:
        pytest.skip("no docker engine: " + r.stderr.strip()[:200])


def task_name() -> str:
    """A task name no other run uses: resources are found by it."""
    return "pyt" + secrets.token_hex(4)


def resources(task: str) -> list:
    """Every container, network and volume composebox labelled with this task."""
    label = f"label=dev.composebox.task={task}"
    out = []
    for cmd in (["docker", "ps", "-aq", "--filter", label],
                ["docker", "network", "ls", "-q", "--filter", label],
                ["docker", "volume", "ls", "-q", "--filter", label]):
        r = subprocess.run(cmd, capture_output=True, text=True, check=True)
        out += [f"{cmd[1]} {x}" for x in r.stdout.split()]
    return out


def force_remove(task: str) -> None:
    """Last-resort removal of what a failed test left (by its own task label only)."""
    label = f"label=dev.composebox.task={task}"
    ids = subprocess.run(["docker", "ps", "-aq", "--filter", label], capture_output=True,
                         text=True).stdout.split()
    if ids:
        subprocess.run(["docker", "rm", "-f", *ids], capture_output=True)
    for kind in ("network", "volume"):
        ids = subprocess.run(["docker", kind, "ls", "-q", "--filter", label], capture_output=True,
                             text=True).stdout.split()
        if ids:
            subprocess.run(["docker", kind, "rm", *ids], capture_output=True)


def compose(user: str = "") -> str:
    user_line = f"\n    user: \"{user}\"" if user else ""
    return f"""
services:
  default:
    image: ${{COMPOSEBOX_BASE_IMAGE}}
    command: ["tail", "-f", "/dev/null"]
    working_dir: /work
    network_mode: none{user_line}
    environment:
      LEVEL: ${{SAMPLE_METADATA_LEVEL-none}}
  side:
    image: ${{COMPOSEBOX_BASE_IMAGE}}
    command: ["tail", "-f", "/dev/null"]
    network_mode: none
"""
