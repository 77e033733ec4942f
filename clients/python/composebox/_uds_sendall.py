"""httpcore's asyncio network backend with Unix socket writes done by ``loop.sock_sendall``.

Imported only where anyio is older than 3.7.1 (see :mod:`composebox._uds`). Reads, TCP
connections and everything else stay httpcore's.
"""

from __future__ import annotations

import asyncio
import typing

import anyio
import httpcore

try:  # httpcore >= 0.17.3: the network backend API is public
    from httpcore import AnyIOBackend as _InnerBackend  # type: ignore[attr-defined]
    from httpcore import AsyncNetworkBackend  # type: ignore[attr-defined]
    from httpcore import AsyncNetworkStream  # type: ignore[attr-defined]
except ImportError:  # older httpcore (Debian 12's 0.16.3) has it only here
    from httpcore.backends.asyncio import AsyncIOBackend as _InnerBackend  # type: ignore
    from httpcore.backends.base import AsyncNetworkBackend, AsyncNetworkStream  # type: ignore


class SendallStream(AsyncNetworkStream):  # type: ignore[misc]
    """httpcore's stream with ``write`` done by ``loop.sock_sendall`` on the raw socket."""

    def __init__(self, inner: typing.Any) -> None:
        self._inner = inner
        self._sock = inner.get_extra_info("socket")

    async def read(self, max_bytes: int, timeout: typing.Optional[float] = None) -> bytes:
        return typing.cast(bytes, await self._inner.read(max_bytes, timeout))

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

    async def start_tls(self, *args: typing.Any, **kwargs: typing.Any) -> typing.Any:
        return await self._inner.start_tls(*args, **kwargs)

    def get_extra_info(self, info: str) -> typing.Any:
        return self._inner.get_extra_info(info)


class Backend(AsyncNetworkBackend):  # type: ignore[misc]
    """httpcore's anyio backend; its Unix socket streams are :class:`SendallStream`."""

    def __init__(self) -> None:
        self._inner = _InnerBackend()

    async def connect_tcp(self, *args: typing.Any, **kwargs: typing.Any) -> typing.Any:
        return await self._inner.connect_tcp(*args, **kwargs)

    async def connect_unix_socket(self, *args: typing.Any, **kwargs: typing.Any) -> typing.Any:
        stream = await self._inner.connect_unix_socket(*args, **kwargs)
        if stream.get_extra_info("socket") is None:
            return stream
        return SendallStream(stream)

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)
