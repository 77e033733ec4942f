"""Terminal sessions (exec_tty) against the real server and engine, sync and async: the command
sees a /dev/pts terminal of the size asked, a resize reaches it, keystrokes reach it, and its
exit code comes back; another lease cannot open one; an old server is named."""

import re
import time

import pytest

import composebox
from composebox import AsyncClient, Client
from composebox import tty as ttymod

from . import e2e

SCRIPT = 'tty; while read x; do [ "$x" = q ] && exit 5; stty size; done'
PTS = re.compile(rb"/dev/pts/\d+\r\n")


def test_tty_session_sync(bin_path, task_name):
    with Client.spawn(bin_path) as client:
        task = client.task_init(name=task_name, compose_yaml=e2e.compose())
        s = client.sample_init(task)
        with client.exec_tty(s, ["sh", "-c", SCRIPT], rows=30, cols=90) as sess:
            assert PTS.search(sess.read_until(b"\r\n", timeout=30))
            # The shell waits for a line: nothing more comes.
            with pytest.raises(TimeoutError):
                sess.recv(timeout=0.3)
            sess.send("\n")
            assert sess.read_until(b"30 90\r\n", timeout=30).endswith(b"30 90\r\n")
            sess.resize(41, 133)
            # The engine passes the size on in its own time: ask until it shows.
            seen = b""
            deadline = time.monotonic() + 30
            while b"41 133" not in seen:
                assert time.monotonic() < deadline, seen
                sess.send("\n")
                try:
                    seen += sess.read_until(b"\r\n", timeout=5)
                except TimeoutError:
                    pass
            sess.send("q\n")
            assert sess.wait(timeout=30) == 5
        assert sess.exit_code == 5 and sess.ended
        assert sess.recv() == b""

        # Closing a session under a running command kills it, and keeps what the server says.
        sess = client.exec_tty(s, ["sh", "-c", "echo up; exec sleep 3600"])
        assert sess.read_until("up", timeout=30) == b"up"
        sess.close()
        r = client.exec(s, ["sh", "-c", "cat /proc/[0-9]*/comm 2>/dev/null | grep -c '^sleep$'"])
        assert r.stdout_text == "0\n"

        # A sample of another lease is not found.
        with Client(socket=client._endpoint.socket) as other:
            other.lease()
            with pytest.raises(composebox.NotFound):
                other.exec_tty(s, ["sh"])


@pytest.mark.asyncio
async def test_tty_session_async(bin_path, task_name):
    async with AsyncClient.spawn(bin_path) as client:
        task = await client.task_init(name=task_name, compose_yaml=e2e.compose())
        s = await client.sample_init(task)
        async with await client.exec_tty(s, ["sh", "-c", SCRIPT], rows=25, cols=70) as sess:
            assert PTS.search(await sess.read_until(b"\r\n", timeout=30))
            with pytest.raises(TimeoutError):
                await sess.recv(timeout=0.3)
            await sess.send(b"\n")
            await sess.read_until(b"25 70\r\n", timeout=30)
            await sess.resize(33, 111)
            seen = b""
            deadline = time.monotonic() + 30
            while b"33 111" not in seen:
                assert time.monotonic() < deadline, seen
                await sess.send(b"\n")
                try:
                    seen += await sess.read_until(b"\r\n", timeout=5)
                except TimeoutError:
                    pass
            await sess.send(b"q\n")
            assert await sess.wait(timeout=30) == 5
        assert sess.exit_code == 5


def test_old_server_is_named():
    old = composebox.Version(version="0.1", go="go", compose="c", api="v1", api_revision=2)
    with pytest.raises(composebox.IncompatibleServer) as e:
        ttymod.check_revision(old, "the server at unix:/x")
    assert "revision 2" in str(e.value) and "revision 3" in str(e.value)
    assert e.value.min_api_revision == 3 and e.value.server is old


def test_frames_and_head_parsing():
    assert ttymod.frame(ttymod.FRAME_STDIN, b"ab") == b"\x00\x00\x00\x00\x00\x00\x00\x02ab"
    big = ttymod.stdin_frames(b"x" * (ttymod.MAX_FRAME + 1))
    assert len(big) == 2 * ttymod.HEADER + ttymod.MAX_FRAME + 1
    with pytest.raises(ValueError):
        ttymod.resize_frame(0, 80)
    st = ttymod._State("t")
    wire = ttymod.frame(ttymod.FRAME_OUTPUT, b"hi") + ttymod.frame(ttymod.FRAME_END, b'{"type":"exit","exit_code":3}')
    # A frame split across reads waits for its rest.
    st.frames.buf = wire[:20]
    assert not st.take() and st.pending == b"hi" and st.exit_code is None
    st.frames.buf += wire[20:]
    assert st.take() and st.exit_code == 3
    assert ttymod.parse_head(b"HTTP/1.1 101 Switching\r\nUpgrade: x\r\n\r\nrest") == (101, {"upgrade": "x"}, b"rest")
    assert ttymod.parse_head(b"HTTP/1.1 101") is None
