"""Fork, snapshot and reset through the sync and async clients, against the real server and
engine: a two-service sample with a named volume, branched three ways."""

import pytest

import composebox
from composebox import AsyncClient, Client

TWO_SERVICES = """
services:
  default:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["tail", "-f", "/dev/null"]
    volumes: ["data:/data"]
  side:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["tail", "-f", "/dev/null"]
volumes:
  data: {}
"""


def test_fork_three_ways_and_reset(bin_path, task_name):
    with Client.spawn(bin_path) as client:
        task = client.task_init(name=task_name, compose_yaml=TWO_SERVICES)
        try:
            s = client.sample_init(task)
            client.exec(s, ["sh", "-c", "echo vol > /data/v; echo layer > /tmp/l"])
            client.exec(s, ["sh", "-c", "echo side > /tmp/s"], service="side")
            forks = client.sample_fork(s, 3)
            assert len({f.project for f in forks} | {s.project}) == 4
            for f in forks:
                r = client.exec(f, ["sh", "-c", "cat /data/v /tmp/l; ping -c1 -W2 side >/dev/null && echo side-ok"])
                assert r.stdout_text == "vol\nlayer\nside-ok\n", f.project
                assert client.exec(f, ["cat", "/tmp/s"], service="side").stdout_text == "side\n"

            assert client.sample_snapshot(s, "s1") == "s1"
            client.exec(s, ["sh", "-c", "echo changed > /data/v"])
            reset = client.sample_reset(s, "s1")
            assert reset.project == s.project
            assert client.exec(s, ["cat", "/data/v"]).stdout_text == "vol\n"
            with pytest.raises(composebox.NotFound):
                client.sample_reset(s, "nonesuch")
            for f in forks:
                client.sample_cleanup(f)
        finally:
            client.task_cleanup(task)


@pytest.mark.asyncio
async def test_async_fork_snapshot_reset(bin_path, task_name):
    async with AsyncClient.spawn(bin_path) as client:
        task = await client.task_init(name=task_name, compose_yaml=TWO_SERVICES)
        try:
            s = await client.sample_init(task)
            await client.exec(s, ["sh", "-c", "echo vol > /data/v"])
            forks = await client.sample_fork(s, 2)
            assert len(forks) == 2
            for f in forks:
                assert (await client.exec(f, ["cat", "/data/v"])).stdout_text == "vol\n"
            await client.sample_snapshot(s, "a")
            await client.exec(s, ["sh", "-c", "rm /data/v"])
            await client.sample_reset(s, "a")
            assert (await client.exec(s, ["cat", "/data/v"])).stdout_text == "vol\n"
        finally:
            await client.task_cleanup(task)
