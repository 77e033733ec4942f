"""The async client's Unix socket writes: a body larger than the socket's buffer arrives whole
and exact (anyio before 3.7.1 resends from the start after a partial write)."""

import asyncio
import os
import socket
import tempfile
import threading

import httpx
import pytest

from composebox import _uds


def _serve_once(sock: socket.socket, n: int, got: dict) -> None:
    conn, _ = sock.accept()
    conn.settimeout(10)
    buf = b""
    with conn:
        while True:
            head, sep, body = buf.partition(b"\r\n\r\n")
            if sep and len(body) >= n:
                break
            d = conn.recv(1 << 20)
            if not d:
                break
            buf += d
        got["body"] = body[:n]
        conn.sendall(b"HTTP/1.1 204 No Content\r\n\r\n")
        # Anything after the body is bytes the client should not have sent.
        conn.settimeout(0.5)
        extra = body[n:]
        try:
            while True:
                d = conn.recv(1 << 20)
                if not d:
                    break
                extra += d
        except socket.timeout:
            pass
        got["extra"] = extra


@pytest.mark.asyncio
async def test_large_body_over_unix_socket_is_exact():
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "s.sock")
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(path)
        sock.listen(1)
        data = bytes(range(256)) * (8 << 10)  # 2 MiB, no two positions alike within 256
        got: dict = {}
        t = threading.Thread(target=_serve_once, args=(sock, len(data), got), daemon=True)
        t.start()
        transport = httpx.AsyncHTTPTransport(uds=path)
        assert _uds.fix_unix_writes(transport)
        async with httpx.AsyncClient(transport=transport, base_url="http://x") as h:
            r = await h.put("/f", content=data)
            assert r.status_code == 204
            await asyncio.get_running_loop().run_in_executor(None, t.join, 10)
        sock.close()
        assert got["body"] == data
        assert got["extra"] == b""
