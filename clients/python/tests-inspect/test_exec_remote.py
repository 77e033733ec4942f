"""inspect's exec_remote (a streaming exec with a process handle), natively over composebox's
streamed exec: no helper binary goes into the container and nothing polls. On three images
built here FROM scratch (nothing can be pulled; scripts/inspect/images.sh): composebox's
busybox base image, a Debian-like one (Debian's dash and coreutils on glibc) and a musl one
(as Alpine's are; it has no shell at all, only the probe program)."""

from __future__ import annotations

import os
import shutil

import anyio
import pytest

from inspect_ai.util import (ExecCompleted, ExecRemoteAwaitableOptions, ExecRemoteStreamingOptions,
                             ExecStderr, ExecStdout)
from inspect_ai.util._sandbox.registry import registry_find_sandboxenv

from conftest import e2e

IMAGES = os.environ.get("INSPECT_TEST_IMAGES", "")

# Per image: how to cat stdin, write to stdout and to stderr, sleep, and list processes.
COMMANDS = {
    "busybox": {"cat": ["cat"], "out": ["sh", "-c", "printf out"], "err": ["sh", "-c", "printf err >&2"],
                "sleep": ["sleep", "300"], "ps": ["ps", "-o", "args"]},
    "glibc": {"cat": ["/bin/cat"], "out": ["/bin/sh", "-c", "printf out"],
              "err": ["/bin/sh", "-c", "printf err >&2"], "sleep": ["/bin/sleep", "300"],
              "ps": ["/bin/probe", "ps"]},
    "musl": {"cat": ["/bin/probe", "cat"], "out": ["/bin/probe", "out", "out"],
             "err": ["/bin/probe", "err", "err"], "sleep": ["/bin/probe", "sleep", "300"],
             "ps": ["/bin/probe", "ps"]},
}


@pytest.fixture(params=list(COMMANDS))
async def box(request, name, tmp_path, monkeypatch):
    """One sample of the image, its commands, and the inspect environment of its service."""
    kind = request.param
    if kind == "musl" and e2e.KUBERNETES:
        pytest.skip("the Kubernetes backend runs every exec through the image's sh and env, and "
                    "this image has no shell")
    d = tmp_path / kind
    if kind == "busybox":
        d.mkdir()
        service = "    image: ${COMPOSEBOX_BASE_IMAGE}\n    command: [\"tail\", \"-f\", \"/dev/null\"]\n"
    else:
        if not IMAGES:
            pytest.fail("no $INSPECT_TEST_IMAGES: scripts/inspect/run.sh makes the images' contexts")
        shutil.copytree(os.path.join(IMAGES, kind), d, symlinks=True)
        service = "    build: .\n"
    (d / "compose.yaml").write_text("services:\n  default:\n" + service + "    network_mode: none\n")
    monkeypatch.chdir(d)
    Env = registry_find_sandboxenv("composebox")
    config = {"compose": str(d / "compose.yaml"), "name": name}
    await Env.task_init("startup", config)
    try:
        envs = await Env.sample_init(name, config, {})
        yield kind, COMMANDS[kind], envs["default"]
    finally:
        await Env.task_cleanup("shutdown", config, True)


@pytest.fixture(autouse=True)
def no_injected_tools(monkeypatch):
    """inspect's own exec_remote injects its sandbox-tools binary first; composebox's must not."""
    import inspect_ai.tool._sandbox_tools_utils.sandbox as tools

    def refuse(*a, **kw):
        raise AssertionError("exec_remote tried to inject inspect's sandbox-tools binary")

    monkeypatch.setattr(tools, "sandbox_with_injected_tools", refuse)


def needs_kill_tools(kind: str) -> None:
    """The Kubernetes backend kills a command from inside the container with a script that needs
    grep and tr (the Docker backend falls back to the host); this cut-down Debian-like image has
    neither, on purpose, so that the Docker backend's fallback is tested."""
    if kind == "glibc" and e2e.KUBERNETES:
        pytest.skip("the Kubernetes backend's kill needs grep and tr in the image; this one has neither")


async def running(env, cmds, needle: str) -> bool:
    r = await env.exec(cmds["ps"])
    assert r.success, r.stderr
    return any(needle in line for line in r.stdout.splitlines())


async def gone(env, cmds, needle: str) -> None:
    """The command is gone: a killed exec's processes go once the server sees the end of the
    connection, which takes a moment; bounded."""
    with anyio.fail_after(30):
        while await running(env, cmds, needle):
            await anyio.sleep(0.1)


@pytest.mark.backends
async def test_streamed_stdout_and_stderr(box):
    kind, cmds, env = box
    events = [ev async for ev in await env.exec_remote(cmds["out"])]
    assert events == [ExecStdout(data="out"), ExecCompleted(exit_code=0)]
    events = [ev async for ev in await env.exec_remote(cmds["err"])]
    assert events == [ExecStderr(data="err"), ExecCompleted(exit_code=0)]
    assert not env._tools_injected
    if kind == "musl":
        r = await env.exec(["/bin/probe", "libc"])
        assert r.stdout == "musl\n"


@pytest.mark.backends
async def test_write_stdin_streams_both_ways_then_close_stdin(box):
    _, cmds, env = box
    proc = await env.exec_remote(cmds["cat"], ExecRemoteStreamingOptions(stdin_open=True, input="hello\n"))
    it = proc.__aiter__()
    with anyio.fail_after(60):
        assert await it.__anext__() == ExecStdout(data="hello\n")
        # Each write comes back while the command runs: nothing waits for the end, or polls.
        for word in ("ping\n", "pong\n", "é\n"):
            await proc.write_stdin(word)
            assert await it.__anext__() == ExecStdout(data=word)
        await proc.close_stdin()
        await proc.close_stdin()  # harmless twice
        assert await it.__anext__() == ExecCompleted(exit_code=0)
    with pytest.raises(StopAsyncIteration):
        await it.__anext__()
    with pytest.raises(RuntimeError):
        await proc.write_stdin("late")


async def test_stdin_needs_stdin_open(box):
    _, cmds, env = box
    proc = await env.exec_remote(cmds["cat"], ExecRemoteStreamingOptions(input="once"))
    with pytest.raises(RuntimeError, match="stdin_open"):
        await proc.write_stdin("more")
    assert [ev async for ev in proc] == [ExecStdout(data="once"), ExecCompleted(exit_code=0)]


@pytest.mark.backends
async def test_kill(box):
    kind, cmds, env = box
    needs_kill_tools(kind)
    proc = await env.exec_remote(cmds["sleep"])
    with anyio.fail_after(60):
        while not await running(env, cmds, "300"):
            await anyio.sleep(0.1)
    await proc.kill()
    await proc.kill()  # harmless twice
    # A killed process ends its events without ExecCompleted, as inspect's does.
    assert [ev async for ev in proc] == []
    await gone(env, cmds, "300")


async def test_kill_on_cancellation(box):
    kind, cmds, env = box
    needs_kill_tools(kind)
    started = anyio.Event()

    async def consume():
        proc = await env.exec_remote(cmds["sleep"])
        started.set()
        async for _ in proc:
            pass

    async with anyio.create_task_group() as tg:
        tg.start_soon(consume)
        await started.wait()
        with anyio.fail_after(60):
            while not await running(env, cmds, "300"):
                await anyio.sleep(0.1)
        tg.cancel_scope.cancel()
    await gone(env, cmds, "300")


async def test_awaitable_mode_and_its_timeout(box):
    kind, cmds, env = box
    needs_kill_tools(kind)
    r = await env.exec_remote(cmds["cat"], ExecRemoteAwaitableOptions(input="abc"), stream=False)
    assert (r.success, r.returncode, r.stdout, r.stderr) == (True, 0, "abc", "")
    with pytest.raises(TimeoutError):
        await env.exec_remote(cmds["sleep"], ExecRemoteAwaitableOptions(timeout=2), stream=False)
    await gone(env, cmds, "300")
