"""Logs of a sample's services through the server, sync and async, against the real engine."""

import datetime
import time

import pytest

import composebox
from composebox import AsyncClient, Client

from . import e2e

TALKATIVE = """
services:
  default:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["sh", "-c", "echo one; echo two; echo oops >&2; exec tail -f /dev/null"]
    network_mode: none
  side:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["sh", "-c", "echo a; echo b; echo c; exec tail -f /dev/null"]
    network_mode: none
"""


def _joined(events, typ):
    return b"".join(e.data for e in events if e.type == typ)


def _default_output(events) -> tuple:
    """The default service's stdout and stderr; on Kubernetes, which keeps one stream of a
    container's output (read from stdout's and stderr's pipes apart, so in no fixed order
    between them), stderr's line comes as stdout, put after stdout's own."""
    out, err = _joined(events, "stdout"), _joined(events, "stderr")
    if e2e.KUBERNETES and b"oops\n" in out.splitlines(keepends=True):
        out = out.replace(b"oops\n", b"", 1)
        err = b"oops\n" + err
    return out, err


def test_logs_sync(bin_path, task_name):
    with Client.spawn(bin_path) as client:
        task = client.task_init(name=task_name, compose_yaml=TALKATIVE)
        try:
            s = client.sample_init(task)
            deadline = time.monotonic() + 30
            events = []
            while time.monotonic() < deadline:
                events = list(client.logs(s))
                side = list(client.logs(s, service="side"))
                if _default_output(events)[1] == b"oops\n" and _joined(side, "stdout") == b"a\nb\nc\n":
                    break
            assert _default_output(events) == (b"one\ntwo\n", b"oops\n")
            assert _joined(client.logs(s, service="side", tail=1), "stdout") == b"c\n"
            assert list(client.logs(s, tail=0)) == []
            future = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(days=1)
            assert list(client.logs(s, since=future)) == []
            stamped = _joined(client.logs(s, timestamps=True), "stdout").decode()
            # (stderr's line, stdout's on Kubernetes, may come first there)
            own = [line for line in stamped.splitlines() if not line.endswith(" oops")]
            assert own[0].endswith("Z one") and stamped[:4].isdigit()

            # follow: a line written later arrives on the open stream.
            stream = client.logs(s, follow=True, tail=0)
            client.exec(s, ["sh", "-c", "echo later >/proc/1/fd/1"])
            ev = next(stream)
            assert ev.type == "stdout" and ev.data == b"later\n"
            stream.close()

            with pytest.raises(composebox.NotFound):
                list(client.logs(s, service="nosuch"))
            with pytest.raises(ValueError):
                client.logs(s, tail=-1)
        finally:
            client.task_cleanup(task)


@pytest.mark.asyncio
async def test_logs_async(bin_path, task_name):
    async with AsyncClient.spawn(bin_path) as client:
        task = await client.task_init(name=task_name, compose_yaml=TALKATIVE)
        try:
            s = await client.sample_init(task)
            deadline = time.monotonic() + 30
            events = []
            while time.monotonic() < deadline:
                events = [ev async for ev in await client.logs(s)]
                if _default_output(events)[1] == b"oops\n":
                    break
            assert _default_output(events) == (b"one\ntwo\n", b"oops\n")
            while time.monotonic() < deadline:
                side = [ev async for ev in await client.logs(s, service="side")]
                if _joined(side, "stdout") == b"a\nb\nc\n":
                    break
            last = [ev async for ev in await client.logs(s, service="side", tail=1)]
            assert _joined(last, "stdout") == b"c\n"
        finally:
            await client.task_cleanup(task)
