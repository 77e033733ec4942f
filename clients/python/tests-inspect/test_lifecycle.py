"""The task lifecycle as inspect calls it: task_init("startup", config) and
task_cleanup("shutdown", config, cleanup) around a whole eval (inspect_ai/_eval/run.py), and
sample_init with the task's own name in between."""

from __future__ import annotations

import asyncio
import json
import subprocess

import pytest

from inspect_ai.util._sandbox.registry import registry_find_sandboxenv

from conftest import cli, projects

COMPOSE = """services:
  default:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["tail", "-f", "/dev/null"]
    network_mode: none
  side:
    build:
      context: .
      args:
        COMPOSEBOX_BASE_IMAGE: ${COMPOSEBOX_BASE_IMAGE}
    command: ["tail", "-f", "/dev/null"]
    network_mode: none
"""


def task_dir(tmp_path, name: str):
    d = tmp_path / name
    d.mkdir()
    (d / "compose.yaml").write_text(COMPOSE)
    (d / "Dockerfile").write_text("ARG COMPOSEBOX_BASE_IMAGE\nFROM ${COMPOSEBOX_BASE_IMAGE}\n"
                                  f"RUN echo {name} > /built\n")
    return d


@pytest.fixture
def Env():
    return registry_find_sandboxenv("composebox")


async def test_one_task_per_config_whatever_the_name(Env, name, tmp_path, monkeypatch):
    from composebox.inspect import _state

    monkeypatch.chdir(task_dir(tmp_path, name))
    config = {"compose": "compose.yaml", "name": name}
    other = {"compose": "compose.yaml", "name": name, "env": {"X": "1"}}
    await Env.task_init("startup", config)
    await Env.task_init("startup", other)
    try:
        client = _state.client
        tasks = await client.task_list()
        assert sorted(t.name for t in tasks) == ["inspect-" + name] * 2, tasks
        images = sorted(str(t.images) for t in tasks)
        # Samples name the task inspect runs, under any name: they land in the tasks made at
        # startup, and nothing is built again.
        samples = await asyncio.gather(Env.sample_init("my_eval_task", config, {}),
                                       Env.sample_init("another/name", config, {}),
                                       Env.sample_init("my_eval_task", other, {}))
        assert sorted(str(t.images) for t in await client.task_list()) == images
        by_task = {}
        for envs in samples:
            s = await client.sample_get(envs["default"]._project)
            by_task.setdefault(s.task, []).append(s.project)
            assert (await envs["side"].read_file("/built")) == name + "\n"
        assert sorted(len(v) for v in by_task.values()) == [1, 2]
        for envs, cfg in zip(samples, (config, config, other)):
            await Env.sample_cleanup("x", cfg, envs, interrupted=False)
        # Nothing was named after "startup".
        assert not [p for p in projects("inspect-startup")]
    finally:
        await Env.task_cleanup("shutdown", config, True)
        # The other config's task is still held: the client stays.
        assert _state.client is not None
        await Env.task_cleanup("shutdown", other, True)
    assert _state.client is None, "the last task_cleanup releases the client and its server"


async def test_task_cleanup_removes_the_samples(Env, name, tmp_path, monkeypatch):
    from composebox.inspect import _state

    monkeypatch.chdir(task_dir(tmp_path, name))
    config = {"compose": "compose.yaml", "name": name}
    await Env.task_init("startup", config)
    await Env.sample_init(name, config, {"__sample_id__": 1})
    await Env.sample_init(name, config, {"__sample_id__": 2})
    assert len(projects("inspect-" + name)) == 2
    # A second eval of this process (inspect's eval_set) holds the same task until it ends.
    await Env.task_init("startup", config)
    await Env.task_cleanup("shutdown", config, True)
    assert len(projects("inspect-" + name)) == 2
    await Env.task_cleanup("shutdown", config, True)
    assert projects("inspect-" + name) == []
    assert _state.client is None


async def test_no_sandbox_cleanup_keeps_samples_and_says_how_to_remove_them(
        Env, name, tmp_path, monkeypatch, capsys):
    from composebox import AsyncClient
    from composebox.inspect import _state

    monkeypatch.chdir(task_dir(tmp_path, name))
    config = {"compose": "compose.yaml", "name": name}
    await Env.task_init("startup", config)
    kept = [(await Env.sample_init(name, config, {}))["default"]._project for _ in range(2)]
    # --no-sandbox-cleanup: inspect calls no sample_cleanup, then task_cleanup(cleanup=False).
    await Env.task_cleanup("shutdown", config, False)
    assert _state.client is None
    out = capsys.readouterr().out
    for p in kept:
        assert p in out
    assert "inspect sandbox cleanup composebox" in out
    # The samples outlive the provider's server.
    left = {p["name"]: p["status"] for p in projects("inspect-" + name)}
    assert left == {p: "detached" for p in kept}

    # `inspect sandbox cleanup composebox` removes what inspect left, and nothing else: not a
    # detached sample of another runner's task, nor the live sample of a running eval.
    outsider = name + "-other"
    async with AsyncClient.spawn() as other_client:
        t = await other_client.task_init(name=outsider, compose_yaml=COMPOSE.split("  side:")[0])
        s = await other_client.sample_init(t)
        await other_client.sample_detach(s)
        live_cfg = {"compose": "compose.yaml", "name": name + "-live"}
        live = (await Env.sample_init(name, live_cfg, {}))["default"]._project
        try:
            r = subprocess.run(["inspect", "sandbox", "cleanup", "composebox"],
                               capture_output=True, text=True)
            assert r.returncode == 0, r.stderr
            assert projects("inspect-" + name) == []
            assert [p["name"] for p in projects(outsider)] == [s.project]
            assert [p["name"] for p in projects("inspect-" + name + "-live")] == [live]
        finally:
            cli("cleanup", s.project)
            await Env.task_cleanup("shutdown", live_cfg, True)


async def test_cli_cleanup_of_one_project(Env, name, tmp_path, monkeypatch):
    monkeypatch.chdir(task_dir(tmp_path, name))
    config = {"compose": "compose.yaml", "name": name}
    await Env.task_init("startup", config)
    a = (await Env.sample_init(name, config, {}))["default"]._project
    b = (await Env.sample_init(name, config, {}))["default"]._project
    await Env.task_cleanup("shutdown", config, False)
    r = subprocess.run(["inspect", "sandbox", "cleanup", "composebox", a], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert [p["name"] for p in projects("inspect-" + name)] == [b]
    await Env.cli_cleanup(b)
    assert projects("inspect-" + name) == []
