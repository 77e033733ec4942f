"""The inspect_ai provider class end to end, against the real server and engine. Where inspect_ai
is installed it runs on inspect_ai itself; elsewhere on a stand-in of the names the class
imports (tests/inspect_stub.py), so the thin shell is exercised on every machine."""

import asyncio
import importlib
import sys

import pytest

from . import e2e, inspect_stub


@pytest.fixture
def provider():
    e2e.require_engine()
    e2e.binary()
    try:
        import inspect_ai  # noqa: F401
        real = True
        added = []
    except ImportError:
        real = False
        added = inspect_stub.install()
    try:
        mod = importlib.import_module("composebox.inspect")
        yield mod, real
    finally:
        for name in added:
            sys.modules.pop(name, None)


@pytest.fixture
def compose_file(tmp_path):
    p = tmp_path / "compose.yaml"
    p.write_text(e2e.compose())
    return str(p)


@pytest.fixture
def binary_env(monkeypatch):
    monkeypatch.setenv("COMPOSEBOX_BIN", e2e.binary())
    monkeypatch.delenv("COMPOSEBOX_SOCKET", raising=False)
    monkeypatch.delenv("COMPOSEBOX_URL", raising=False)


@pytest.mark.asyncio
async def test_provider_lifecycle_exec_and_files(provider, compose_file, task_name, binary_env):
    mod, real = provider
    Env = mod.ComposeboxSandboxEnvironment
    assert Env.is_docker_compatible() and "compose.yaml" in Env.config_files()

    # The provider names its tasks "inspect-" and the config's name.
    task = "inspect-" + task_name
    compose_file = {"compose": compose_file, "name": task_name}
    await Env.task_init("startup", compose_file)
    envs = await Env.sample_init(task_name, compose_file, {"level": "9", "n": 3})
    assert list(envs) == ["default", "side"]
    sb = envs["default"]

    r = await sb.exec(["sh", "-c", "echo $LEVEL"])
    assert (r.success, r.returncode, r.stdout) == (True, 0, "9\n")
    r = await sb.exec(["sh", "-c", "pwd; cat; echo $K; id -u"], input="in\n", cwd="sub/..",
                      env={"K": "v"}, user="65534")
    assert r.stdout == "/work\nin\nv\n65534\n"
    r = await sb.exec(["no-such-command"])
    assert not r.success and r.returncode == 127
    r = await sb.exec(["sh", "-c", "printf '\\377'"])
    assert r.stdout == "\ufffd"
    with pytest.raises(TimeoutError) as e:
        await sb.exec(["sh", "-c", "echo partial; sleep 30"], timeout=5)
    assert type(e.value) is TimeoutError
    assert getattr(e.value, "truncated_output", "") == "partial\n"
    if not real:
        limits = sys.modules["inspect_ai.util"].SandboxEnvironmentLimits
        limits.MAX_EXEC_OUTPUT_SIZE = 1024
        try:
            with pytest.raises(sys.modules["inspect_ai.util"].OutputLimitExceededError) as e:
                await sb.exec(["sh", "-c", "yes | head -c 5000"])
            assert "limit of 1 KiB was exceeded" in str(e.value)
        finally:
            limits.MAX_EXEC_OUTPUT_SIZE = 10 * 1024 ** 2

    await sb.write_file("dir/text.txt", "héllo\r\n")
    assert await sb.read_file("dir/text.txt") == "héllo\r\n"
    await sb.write_file("/tmp/bin.dat", b"\xc3\x28\x00")
    assert await sb.read_file("/tmp/bin.dat", text=False) == b"\xc3\x28\x00"
    with pytest.raises(UnicodeDecodeError):
        await sb.read_file("/tmp/bin.dat")
    with pytest.raises(FileNotFoundError) as e:
        await sb.read_file("missing-file.txt")
    assert "missing-file.txt" in str(e.value)
    with pytest.raises(IsADirectoryError):
        await sb.read_file(".")
    with pytest.raises(IsADirectoryError) as e:
        await sb.read_file("/tmp")
    assert "directory" in str(e.value)
    with pytest.raises(IsADirectoryError):
        await sb.write_file("/tmp", "x")
    await envs["side"].write_file("/side.txt", "side")
    with pytest.raises(FileNotFoundError):
        await sb.read_file("/side.txt")

    conn = await sb.connection()
    assert conn.type == "composebox" and conn.container in conn.command
    conn = await sb.connection(user="65534")
    assert "--user 65534" in conn.command and conn.vscode_command is None

    await Env.sample_cleanup(task_name, compose_file, envs, interrupted=False)
    assert e2e.resources(task) == []

    # An interrupted sample is removed too; task cleanup removes what is left.
    envs2 = await Env.sample_init(task_name, compose_file, {})
    await Env.sample_cleanup(task_name, compose_file, envs2, interrupted=True)
    assert e2e.resources(task) == []
    await Env.sample_init(task_name, compose_file, {})
    assert e2e.resources(task)
    await Env.task_cleanup("shutdown", compose_file, cleanup=True)
    assert e2e.resources(task) == []
    assert mod._state.client is None, "the last task's cleanup stops the private server"


@pytest.mark.asyncio
async def test_provider_no_cleanup_leaves_samples_for_cli_cleanup(provider, task_name, binary_env):
    mod, _ = provider
    Env = mod.ComposeboxSandboxEnvironment
    config = {"compose_yaml": e2e.compose(), "name": task_name}
    task = "inspect-" + task_name
    # Without task_init the task is initialised on demand, once for concurrent samples.
    envs, other = await asyncio.gather(Env.sample_init(task_name, config, {}),
                                       Env.sample_init(task_name, config, {}))
    assert len({t.id for t in await mod._state.client.task_list()}) == 1
    await Env.sample_cleanup(task_name, config, other, interrupted=False)
    project = envs["default"]._project
    await Env.task_cleanup(task_name, config, cleanup=False)
    # The server is gone, the sample stays (detached) ...
    assert mod._state.client is None
    assert e2e.resources(task)
    # ... until `inspect sandbox cleanup composebox PROJECT`.
    await Env.cli_cleanup(project)
    assert e2e.resources(task) == []
