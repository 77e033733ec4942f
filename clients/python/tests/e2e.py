"""Helpers of the end-to-end tests: they spawn the real `composebox serve` binary against the
real engine, or a Kubernetes cluster, and skip (saying why) when either is missing.

$COMPOSEBOX_TEST_BACKEND chooses what the spawned servers run samples on: docker (the default)
or kubernetes. On Kubernetes the cluster is $KUBECONFIG's with $COMPOSEBOX_REGISTRY when both
are set, else the local one that `make k8s` describes in bin/k8s/env; without either the tests
skip, or fail when $COMPOSEBOX_K8S_REQUIRED is set. Leftovers are then found and removed
through the binary's own `ls` and `cleanup` on the cluster, never kubectl."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import time
from typing import List, Optional, Tuple

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

BACKEND = os.environ.get("COMPOSEBOX_TEST_BACKEND") or "docker"
if BACKEND not in ("docker", "kubernetes"):
    raise RuntimeError(f"COMPOSEBOX_TEST_BACKEND={BACKEND!r}: want docker or kubernetes")
KUBERNETES = BACKEND == "kubernetes"

def binary() -> str:
    """The server binary: $COMPOSEBOX_BIN, else the repo's bin/composebox."""
    candidates = [os.environ.get("COMPOSEBOX_BIN"), os.path.join(REPO, "bin", "composebox")]
    for c in candidates:
        if c and os.access(c, os.X_OK):
            return c
    pytest.skip("no composebox binary: set COMPOSEBOX_BIN or run `make build` "
                "(make test-python does both)")


def require_engine() -> None:
    """Skips without the local engine (both backends build and push images with it); on
    Kubernetes, also without the cluster's settings, which every server and CLI this process
    starts then inherits: the client and the inspect provider spawn `composebox serve`
    unchanged, and $COMPOSEBOX_BACKEND points it at the cluster as it would a user's."""
    if KUBERNETES:
        kubeconfig, registry = cluster()
        os.environ.update(COMPOSEBOX_BACKEND="kubernetes", KUBECONFIG=kubeconfig,
                          COMPOSEBOX_REGISTRY=registry)
    else:
        # A COMPOSEBOX_BACKEND of the caller's would put the servers elsewhere than the
        # leftovers are looked for.
        os.environ["COMPOSEBOX_BACKEND"] = "docker"
    if shutil.which("docker") is None:
        pytest.skip("no docker CLI to check the engine and the leftovers with")
    r = subprocess.run(["docker", "info", "--format", "{{.ServerVersion}}"], capture_output=True,
                       text=True)
    if r.returncode != 0:
        pytest.skip("no docker engine: " + r.stderr.strip()[:200])


_cluster: Optional[Tuple[str, str]] = None


def cluster() -> Tuple[str, str]:
    """The cluster's kubeconfig and registry: the environment's, else bin/k8s/env's."""
    global _cluster
    if _cluster is not None:
        return _cluster
    kubeconfig, registry = os.environ.get("KUBECONFIG"), os.environ.get("COMPOSEBOX_REGISTRY")
    if not (kubeconfig and registry):
        path = os.path.join(REPO, "bin", "k8s", "env")
        try:
            with open(path) as f:
                env = dict(line.strip().split("=", 1) for line in f
                           if "=" in line and not line.lstrip().startswith("#"))
        except FileNotFoundError:
            why = (f"no Kubernetes cluster for COMPOSEBOX_TEST_BACKEND=kubernetes: set KUBECONFIG "
                   f"and COMPOSEBOX_REGISTRY, or run `make k8s` ({path} is absent)")
            if os.environ.get("COMPOSEBOX_K8S_REQUIRED"):
                pytest.fail(why + " and $COMPOSEBOX_K8S_REQUIRED is set")
            pytest.skip(why)
        kubeconfig, registry = env.get("KUBECONFIG"), env.get("COMPOSEBOX_REGISTRY")
        if not (kubeconfig and registry):
            pytest.fail(f"{path} lacks KUBECONFIG or COMPOSEBOX_REGISTRY: rerun `make k8s`")
    _cluster = (kubeconfig, registry)
    return _cluster


def cluster_dns() -> str:
    """The resolver the local cluster's pods use (bin/k8s/env's COMPOSEBOX_K8S_DNS), "" when it
    does not say: the upstream of a sample's egress gateway on a cluster without kube-dns."""
    dns = os.environ.get("COMPOSEBOX_K8S_DNS", "")
    if dns:
        return dns
    try:
        with open(os.path.join(REPO, "bin", "k8s", "env")) as f:
            for line in f:
                if line.startswith("COMPOSEBOX_K8S_DNS="):
                    return line.strip().split("=", 1)[1]
    except FileNotFoundError:
        pass
    return ""


def backend_flags() -> List[str]:
    """The flags that point a composebox command at the backend under test."""
    if not KUBERNETES:
        return []
    kubeconfig, registry = cluster()
    return ["--backend", "kubernetes", "--kubeconfig", kubeconfig, "--registry", registry]


def task_name() -> str:
    """A task name no other run uses: resources are found by it."""
    return "pyt" + secrets.token_hex(4)


def resources(task: str) -> list:
    """Every container, network and volume composebox labelled with this task; on Kubernetes,
    every namespace of the task, as `composebox ls` lists it."""
    if KUBERNETES:
        r = subprocess.run([binary(), *backend_flags(), "ls", "--json", "--all", "--task", task],
                           capture_output=True, text=True)
        assert r.returncode == 0, f"composebox ls: exit {r.returncode}: {r.stderr.strip()}"
        return [f"namespace {p['name']} ({p['containers']} pods, {p['running']} running)"
                for p in json.loads(r.stdout)["projects"]]
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
    if KUBERNETES:
        subprocess.run([binary(), *backend_flags(), "cleanup", "--all", "--task", task],
                       capture_output=True)
        return
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


def remove_containers(containers: List[str]) -> None:
    """Removes a sample's containers under it, as an eviction or a person would: `docker rm -f`
    on Docker; on Kubernetes, the pods (namespace/pod) deleted through the API as the cluster's
    admin (its kubeconfig's certificate files), waiting until they are gone."""
    if not KUBERNETES:
        subprocess.run(["docker", "rm", "-f", *containers], capture_output=True, check=True)
        return
    import re
    import ssl
    import urllib.error
    import urllib.request

    with open(cluster()[0]) as f:
        conf = f.read()

    def field(name: str) -> str:
        m = re.search(r"^\s*" + name + r":\s*(\S+)\s*$", conf, re.M)
        if not m:
            pytest.skip(f"the kubeconfig gives no {name} file: cannot delete pods as its admin")
        return m.group(1)

    server = field("server")
    ctx = ssl.create_default_context(cafile=field("certificate-authority"))
    ctx.load_cert_chain(field("client-certificate"), field("client-key"))
    for c in containers:
        ns, pod = c.split("/", 1)
        url = f"{server}/api/v1/namespaces/{ns}/pods/{pod}"
        urllib.request.urlopen(urllib.request.Request(url + "?gracePeriodSeconds=0", method="DELETE"),
                               context=ctx, timeout=30).close()
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(url, context=ctx, timeout=30).close()
            except urllib.error.HTTPError as e:
                if e.code == 404:
                    break
                raise
            assert time.monotonic() < deadline, f"pod {c} still there a minute after its deletion"
            time.sleep(0.2)


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
