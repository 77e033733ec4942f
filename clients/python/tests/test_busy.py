"""Backpressure: a lease runs at most --max-per-lease requests at once, and the server turns the
next away as busy, with a hint of how long to wait. The clients wait and send it again, up to
busy_timeout, so that a burst never fails for it; past the bound they raise Busy."""

import asyncio
import threading
import time

import pytest

import composebox
from composebox import AsyncClient, Client
from composebox.errors import Busy

from . import e2e

KEEP = """
services:
  default:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["tail", "-f", "/dev/null"]
    network_mode: none
"""


class hold:
    """A streamed exec that holds one of the lease's slots until closed. (Its event iterator
    is kept: dropping it closes the stream.)"""

    def __init__(self, client, sample):
        self.stream = client.exec_stream(sample, ["sh", "-c", "echo held; exec sleep 300"])
        self.events = iter(self.stream)
        assert next(self.events).data == b"held\n"

    def close(self):
        self.stream.close()


def test_sync_client_waits_out_busy(bin_path, task_name):
    with Client.spawn(bin_path, args=["--max-per-lease", "2"]) as client:
        sample = client.sample_init(client.task_init(name=task_name, compose_yaml=KEEP))
        a, b = hold(client, sample), hold(client, sample)
        out = {}
        t = threading.Thread(target=lambda: out.update(r=client.exec(sample, ["echo", "through"])))
        t.start()
        deadline = time.monotonic() + 60
        while client.busy_retries == 0 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert client.busy_retries > 0 and t.is_alive(), "the exec was not turned away"
        a.close()
        t.join(60)
        assert out["r"].stdout == b"through\n"
        # Bounded: with every slot held, a short busy_timeout gives up with Busy.
        a = hold(client, sample)
        client.busy_timeout = 0.5
        t0 = time.monotonic()
        with pytest.raises(Busy) as e:
            client.exec(sample, ["true"])
        assert 0.4 < time.monotonic() - t0 < 10
        assert e.value.detail["max_per_lease"] == 2 and e.value.detail["retry_after_seconds"] > 0
        a.close()
        b.close()


@pytest.mark.asyncio
async def test_async_client_burst_all_succeed(bin_path, task_name):
    async with AsyncClient.spawn(bin_path, args=["--max-per-lease", "3"]) as client:
        sample = await client.sample_init(await client.task_init(name=task_name, compose_yaml=KEEP))
        results = await asyncio.gather(*[client.exec(sample, ["echo", str(i)]) for i in range(40)])
        assert [r.stdout for r in results] == [f"{i}\n".encode() for i in range(40)]
        assert client.busy_retries > 0
        # A streamed exec whose stdin can be sent again is retried too.
        streams = await asyncio.gather(*[client.exec_stream(sample, ["cat"], input=f"s{i}") for i in range(12)])
        outs = await asyncio.gather(*[s.wait() for s in streams])
        assert [o.stdout for o in outs] == [f"s{i}".encode() for i in range(12)]
        # So is a process talked to both ways (exec_process).
        procs = await asyncio.gather(*[client.exec_process(sample, ["cat"], input=f"p{i}") for i in range(8)])
        for i, p in enumerate(procs):
            assert [ev.data async for ev in p if ev.type == "stdout"] == [f"p{i}".encode()]
            assert p.result is not None and p.result.exit_code == 0
        client.busy_timeout = 0.3
        held = [await client.exec_process(sample, ["sh", "-c", "echo up; exec sleep 300"])
                for _ in range(3)]
        try:
            for p in held:  # each holds a slot once it has written
                assert (await p.__anext__()).data == b"up\n"
            with pytest.raises(composebox.errors.Busy):
                await client.exec(sample, ["true"])
        finally:
            for p in held:
                await p.kill()


@pytest.mark.asyncio
async def test_heartbeat_never_waits_behind_the_leases_requests(bin_path, task_name):
    # More execs at once than httpx's pool has connections (100), each longer than the lease's
    # TTL: a heartbeat queued behind them would come too late, the lease would lapse and its
    # sample with it. The TTL leaves a loaded machine's stalls (seconds, with the cluster's
    # tests beside) room: what is tested is the queueing, not how fast the host is.
    async with AsyncClient.spawn(bin_path, args=["--max-per-lease", "200"], lease_ttl=5) as client:
        sample = await client.sample_init(await client.task_init(name=task_name, compose_yaml=KEEP))
        results = await asyncio.gather(*[client.exec(sample, ["sleep", "6"]) for _ in range(110)])
        assert all(r.exit_code == 0 for r in results)
        assert (await client.exec(sample, ["echo", "alive"])).stdout == b"alive\n"
        assert client.heartbeat_error is None and client.heartbeats > 0


def test_sync_heartbeat_never_waits_behind_the_leases_requests(bin_path, task_name):
    from concurrent.futures import ThreadPoolExecutor

    with Client.spawn(bin_path, args=["--max-per-lease", "200"], lease_ttl=5) as client:
        sample = client.sample_init(client.task_init(name=task_name, compose_yaml=KEEP))
        with ThreadPoolExecutor(110) as pool:
            results = list(pool.map(lambda _: client.exec(sample, ["sleep", "6"]), range(110)))
        assert all(r.exit_code == 0 for r in results)
        assert client.exec(sample, ["echo", "alive"]).stdout == b"alive\n"
