"""A correct write path for the async client's Unix socket connections.

anyio before 3.7.1 (Debian 12 ships 3.6.2) resends its buffer from the start after a partial
write on a Unix socket (agronholm/anyio#579), so any request body larger than the socket's
buffer (a file write, an exec's input) reaches the server corrupted and longer than its
Content-Length; the bytes past it then break the next request on the connection. httpx's async
transport writes through that code, so the async client gives its connection pool a network
backend whose Unix socket streams write with asyncio's own ``sock_sendall`` instead. Reads,
TCP connections and everything else stay httpcore's.
"""

from __future__ import annotations

import asyncio
import typing

import anyio
import httpcore
from httpcore.backends.auto import AutoBackend
from httpcore.backends.base import AsyncNetworkBackend, AsyncNetworkStream


class _SendallStream(AsyncNetworkStream):
    """httpcore's stream with ``write`` done by ``loop.sock_sendall`` on the raw socket."""

    def __init__(self, inner: AsyncNetworkStream) -> None:
        self._inner = inner
        self._sock = inner.get_extra_info("socket")

    async def read(self, max_bytes: int, timeout: typing.Optional[float] = None) -> bytes:
        return await self._inner.read(max_bytes, timeout)

    async def write(self, buffer: bytes, timeout: typing.Optional[float] = None) -> None:
        if not buffer:
            return
        try:
            with anyio.fail_after(timeout):
                await asyncio.get_running_loop().sock_sendall(self._sock, buffer)
        except TimeoutError as e:
            raise httpcore.WriteTimeout(e) from e
        except OSError as e:
            raise httpcore.WriteError(e) from e

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def start_tls(self, *args: typing.Any, **kwargs: typing.Any) -> AsyncNetworkStream:
        return await self._inner.start_tls(*args, **kwargs)

    def get_extra_info(self, info: str) -> typing.Any:
        return self._inner.get_extra_info(info)


class _Backend(AsyncNetworkBackend):
    def __init__(self) -> None:
        self._inner = AutoBackend()

    async def connect_tcp(self, *args: typing.Any, **kwargs: typing.Any) -> AsyncNetworkStream:
        return await self._inner.connect_tcp(*args, **kwargs)

    async def connect_unix_socket(self, path: str,
                                  timeout: typing.Optional[float] = None) -> AsyncNetworkStream:
        stream = await self._inner.connect_unix_socket(path, timeout)
        if stream.get_extra_info("socket") is None:
            return stream
        return _SendallStream(stream)

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


def fix_unix_writes(transport: typing.Any) -> bool:
    """Give a fresh httpx.AsyncHTTPTransport (before its first request) the backend above.
    False when this httpx/httpcore keeps its pool elsewhere (then nothing changes)."""
    pool = getattr(transport, "_pool", None)
    if pool is None or not hasattr(pool, "_network_backend"):
        return False
    pool._network_backend = _Backend()
    return True
