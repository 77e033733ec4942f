"""The async client's Unix socket writes: a body larger than the socket's buffer arrives whole
and exact (anyio before 3.7.1 resends from the start after a partial write), and the workaround
applies only where that anyio is the one imported."""

import asyncio
import importlib.metadata
import os
import socket
import sys
import tempfile
import threading
import types

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


async def _put_large_body(transport: httpx.AsyncHTTPTransport, sock: socket.socket) -> dict:
    data = bytes(range(256)) * (8 << 10)  # 2 MiB, no two positions alike within 256
    got: dict = {"data": data}
    t = threading.Thread(target=_serve_once, args=(sock, len(data), got), daemon=True)
    t.start()
    async with httpx.AsyncClient(transport=transport, base_url="http://x") as h:
        r = await h.put("/f", content=data)
        assert r.status_code == 204
        await asyncio.get_running_loop().run_in_executor(None, t.join, 10)
    return got


@pytest.mark.asyncio
@pytest.mark.parametrize("backend", ["as-decided", "sendall"])
async def test_large_body_over_unix_socket_is_exact(backend, monkeypatch):
    """"as-decided" is what AsyncClient does with this stack's anyio; "sendall" forces the
    workaround's backend, so that it runs on every httpcore the tests see (the public network
    backend API of httpcore >= 0.17.3, httpcore.backends before)."""
    if backend == "sendall":
        monkeypatch.setattr(_uds, "anyio_breaks_unix_writes", lambda: True)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "s.sock")
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(path)
        sock.listen(1)
        transport = httpx.AsyncHTTPTransport(uds=path)
        assert _uds.fix_unix_writes(transport) == _uds.anyio_breaks_unix_writes()
        got = await _put_large_body(transport, sock)
        sock.close()
    assert got["body"] == got["data"]
    assert got["extra"] == b""


class _Dist:
    def __init__(self, version: str, root: str) -> None:
        self.version = version
        self._root = root

    def locate_file(self, path: str) -> str:
        return os.path.join(self._root, path)


def _fake_anyio(monkeypatch, tmp_path, *, version, where="installed", v4=False):
    """An anyio module imported from tmp_path/<where>/anyio, and metadata of ``version`` that
    describes tmp_path/installed/anyio (None: no metadata)."""
    for root in ("installed", "source"):
        (tmp_path / root / "anyio").mkdir(parents=True, exist_ok=True)
        (tmp_path / root / "anyio" / "__init__.py").write_text("")
    mod = types.ModuleType("anyio")
    mod.__file__ = str(tmp_path / where / "anyio" / "__init__.py")
    if v4:
        mod.create_unix_datagram_socket = lambda *a, **k: None
    monkeypatch.setitem(sys.modules, "anyio", mod)

    def distribution(name):
        assert name == "anyio"
        if version is None:
            raise importlib.metadata.PackageNotFoundError(name)
        return _Dist(version, str(tmp_path / "installed"))

    monkeypatch.setattr(importlib.metadata, "distribution", distribution)


@pytest.mark.parametrize("version,where,v4,breaks", [
    ("3.6.2", "installed", False, True),     # Debian 12's anyio
    ("3.7.0", "installed", False, True),
    ("3.7.1", "installed", False, False),    # the fix
    ("3.7.1rc1", "installed", False, False),
    ("4.4.0", "installed", True, False),
    ("3.6.2", "source", True, False),        # anyio 4 sources first on PYTHONPATH, Debian's metadata
    ("3.7.1", "source", False, True),        # a 3.x source tree that the metadata does not describe
    (None, "source", True, False),           # anyio 4 sources, no metadata at all
    (None, "source", False, True),
])
def test_the_workaround_applies_only_to_anyio_before_3_7_1(monkeypatch, tmp_path, version,
                                                           where, v4, breaks):
    _fake_anyio(monkeypatch, tmp_path, version=version, where=where, v4=v4)
    assert _uds.anyio_breaks_unix_writes() is breaks
    transport = httpx.AsyncHTTPTransport(uds=str(tmp_path / "s.sock"))
    before = transport._pool._network_backend
    assert _uds.fix_unix_writes(transport) is breaks
    assert (transport._pool._network_backend is not before) is breaks


def test_a_fixed_anyio_imports_no_network_backend_api(monkeypatch, tmp_path):
    _fake_anyio(monkeypatch, tmp_path, version="4.4.0", v4=True)
    monkeypatch.delitem(sys.modules, "composebox._uds_sendall", raising=False)
    _uds.fix_unix_writes(httpx.AsyncHTTPTransport(uds=str(tmp_path / "s.sock")))
    assert "composebox._uds_sendall" not in sys.modules
