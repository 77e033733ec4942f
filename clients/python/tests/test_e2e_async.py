"""The async client against the real server and engine."""

import asyncio
import hashlib
import os
import time

import pytest

import composebox
from composebox import AsyncClient

from . import e2e


@pytest.mark.asyncio
async def test_async_sample_exec_stream_files_and_cleanup(bin_path, task_name):
    async with AsyncClient.spawn(bin_path) as client:
        assert (await client.version()).api == "v1"
        task = await client.task_init(name=task_name, compose_yaml=e2e.compose())
        s = await client.sample_init(task, metadata={"level": "async"})
        assert s.default_service == "default"

        r = await client.exec(s, ["sh", "-c", "echo $LEVEL; exit 2"])
        assert r.exit_code == 2 and r.stdout_text == "async\n"

        # Concurrent execs on one sample.
        results = await asyncio.gather(*[client.exec(s, ["echo", str(i)]) for i in range(8)])
        assert [x.stdout_text for x in results] == [f"{i}\n" for i in range(8)]

        stream = await client.exec_stream(s, ["sh", "-c", "echo a; echo b >&2; exit 5"])
        events = [ev async for ev in stream]
        assert events[-1].type == "exit" and stream.result.exit_code == 5
        assert b"".join(e.data for e in events if e.type == "stdout") == b"a\n"
        assert b"".join(e.data for e in events if e.type == "stderr") == b"b\n"

        async def gen():
            for _ in range(100):
                yield b"y" * 1000

        r = await (await client.exec_stream(s, ["wc", "-c"], input=gen())).wait()
        assert r.stdout_text.strip() == "100000"

        with pytest.raises(TimeoutError):
            await client.exec(s, ["sleep", "30"], timeout=1)

        data = b"\xff\xfe\x00non-utf8" * 5000
        await client.write_file(s, "/tmp/a/b.bin", data)
        assert await client.read_file(s, "/tmp/a/b.bin") == data
        chunks = [c async for c in await client.read_file_stream(s, "/tmp/a/b.bin", chunk_size=4096)]
        assert b"".join(chunks) == data and len(chunks) > 1

        async def agen():
            yield "text "
            yield b"bytes"

        await client.write_file(s, "mixed.txt", agen())
        assert await client.read_text(s, "mixed.txt") == "text bytes"

        with pytest.raises(FileNotFoundError) as e:
            await client.read_file(s, "/nope.txt")
        assert isinstance(e.value, composebox.NotFound)
        with pytest.raises(composebox.OutputLimitExceeded):
            await client.read_file(s, "/tmp/a/b.bin", limit=10)

        conn = await client.connection(s, service="side")
        assert conn.container_name == s.sandbox("side").container_name

        await client.sample_cleanup(s)
        assert e2e.resources(task_name) == []
        await client.task_cleanup(task)


@pytest.mark.asyncio
async def test_async_session_end_to_end(bin_path, task_name):
    """A whole session on whichever HTTP stack this run has (make test-python runs it on
    Debian's and on the current releases'): a spawned server, exec, 10 MiB files both ways, a
    streamed exec, and 8 execs at once."""
    size = 10 * 1024 * 1024
    async with AsyncClient.spawn(bin_path) as client:
        v = await client.check_server()
        assert v.api == composebox.API_VERSION and v.api_revision >= composebox.MIN_API_REVISION
        task = await client.task_init(name=task_name, compose_yaml=e2e.compose())
        s = await client.sample_init(task)

        r = await client.exec(s, ["sh", "-c", "echo out; echo err >&2; exit 3"])
        assert (r.exit_code, r.stdout, r.stderr) == (3, b"out\n", b"err\n")

        # 10 MiB up: what the sandbox hashes is what was sent (larger than any socket buffer,
        # so a write that resent or dropped bytes would show).
        up = os.urandom(size)
        await client.write_file(s, "/tmp/up.bin", up)
        r = await client.exec(s, ["sha256sum", "/tmp/up.bin"])
        assert r.stdout_text.split()[0] == hashlib.sha256(up).hexdigest()

        # 10 MiB down: a file made in the sandbox arrives whole.
        r = await client.exec(s, ["sh", "-c", f"head -c {size} /dev/urandom > /tmp/down.bin && "
                                  "sha256sum /tmp/down.bin"])
        assert r.success, r.stderr_text
        down = await client.read_file(s, "/tmp/down.bin")
        assert len(down) == size
        assert hashlib.sha256(down).hexdigest() == r.stdout_text.split()[0]

        # A streamed exec: stdin streamed in, output events out, then the exit.
        async def stdin():
            for i in range(64):
                yield bytes([i]) * 16384

        stream = await client.exec_stream(s, ["sh", "-c", "sha256sum; echo done >&2; exit 4"],
                                          input=stdin())
        events = [ev async for ev in stream]
        assert events[-1].type == "exit" and stream.result.exit_code == 4
        out = b"".join(e.data for e in events if e.type == "stdout")
        want = hashlib.sha256(b"".join(bytes([i]) * 16384 for i in range(64))).hexdigest()
        assert out.split()[0].decode() == want
        assert b"".join(e.data for e in events if e.type == "stderr") == b"done\n"

        # 8 execs at once, each with its own input and output.
        results = await asyncio.gather(*[
            client.exec(s, ["sh", "-c", "read x; echo $x-$(id -u)"], input=f"n{i}\n")
            for i in range(8)])
        assert [x.stdout_text for x in results] == [f"n{i}-0\n" for i in range(8)]

        await client.sample_cleanup(s)
        await client.task_cleanup(task)
    assert e2e.resources(task_name) == []


@pytest.mark.asyncio
async def test_async_close_removes_samples_and_heartbeat_runs(bin_path, task_name):
    async with AsyncClient.spawn(bin_path, lease_ttl=3) as client:
        task = await client.task_init(name=task_name, compose_yaml=e2e.compose())
        s = await client.sample_init(task)
        deadline = time.monotonic() + 60
        while client.heartbeats < 5 and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        assert client.heartbeats >= 5, client.heartbeat_error
        # Several TTLs have passed: the lease, and so the sample, are alive.
        assert (await client.exec(s, ["true"])).success
        assert e2e.resources(task_name)
    assert e2e.resources(task_name) == []
    assert client._heartbeat.done()
