"""inspect_ai's own sandbox self-check (util/_sandbox/self_check.py, 44 tests), driven as
inspect's tests drive it: task_init("startup", config), sample_init, self_check() on the default
environment, sample_cleanup, task_cleanup. On three configs:

- a non-root image built from a compose ``build:``;
- the default config (no compose file): composebox's base image, which runs as root, as
  inspect's Docker provider's default image does;
- a root image.

As root, the three tests that check that a file without read or write permission cannot be
read or written are the only exceptions: root ignores file mode bits, so no provider can fail
them for root (inspect's own Docker provider does not either). The test asserts that they, and
nothing else, fail.

Over several engines two samples run the check at once, one on each engine.
"""

from __future__ import annotations

import asyncio
import json
import os

import pytest

from inspect_ai.util._sandbox.registry import registry_find_sandboxenv
from inspect_ai.util._sandbox.self_check import self_check

from conftest import ENGINES, cli

ROOT_CANNOT_FAIL = {
    "test_read_file_not_allowed",
    "test_write_text_file_without_permissions",
    "test_write_binary_file_without_permissions",
}

BUILD_DOCKERFILE = """ARG COMPOSEBOX_BASE_IMAGE
FROM ${COMPOSEBOX_BASE_IMAGE}
RUN mkdir -p /home/sandbox/work && chown -R 1000:1000 /home/sandbox
USER sandbox
WORKDIR /home/sandbox/work
"""


def config_for(kind: str, name: str, tmp_path) -> object:
    if kind == "default":
        return None
    d = tmp_path / kind
    d.mkdir()
    if kind == "build":
        (d / "Dockerfile").write_text(BUILD_DOCKERFILE)
        service = """    build:
      context: .
      args:
        COMPOSEBOX_BASE_IMAGE: ${COMPOSEBOX_BASE_IMAGE}"""
    else:
        service = """    image: ${COMPOSEBOX_BASE_IMAGE}
    user: root
    working_dir: /root"""
    (d / "compose.yaml").write_text(f"""services:
  default:
{service}
    command: ["tail", "-f", "/dev/null"]
    network_mode: none
""")
    return {"compose": str(d / "compose.yaml"), "name": name}


def expected(kind: str) -> set:
    return set() if kind == "build" else ROOT_CANNOT_FAIL


@pytest.mark.backends
@pytest.mark.parametrize("kind", ["build", "default", "root"])
async def test_self_check(kind, name, tmp_path, standin_log, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Env = registry_find_sandboxenv("composebox")
    config = config_for(kind, name, tmp_path)
    await Env.task_init("startup", config)
    from composebox.inspect import _state

    made = []
    try:
        n = 2 if len(ENGINES) > 1 else 1
        samples = await asyncio.gather(*[Env.sample_init(name, config, {}) for _ in range(n)])
        made = [envs["default"]._project for envs in samples]
        if n > 1:
            engines = {(await _state.client.sample_get(p)).engine for p in made}
            assert engines == set(ENGINES), f"samples on {engines}, want one on each of {set(ENGINES)}"
        results = await asyncio.gather(*[self_check(envs["default"]) for envs in samples])
        for envs in samples:
            await Env.sample_cleanup(name, config, envs, interrupted=False)
    finally:
        await Env.task_cleanup("shutdown", config, True)
    for r in results:
        assert len(r) == 44
        failed = {k: v for k, v in r.items() if v is not True}
        # The exceptions must still fail as expected, and nothing else may.
        assert set(failed) == expected(kind), json.dumps(failed, indent=1)
    assert standin_log.read_text() == "", "a stand-in was called on a sandbox path"
    if config is None:
        listing = json.loads(cli("ls", "--json", "--all", "--task", "inspect-default", check=False).stdout or '{"projects": []}')
        assert not {p["name"] for p in listing["projects"]} & set(made)
