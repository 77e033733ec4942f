"""A running command talked to both ways (``AsyncClient.exec_process``): its stdout and stderr
arrive as they are written, while stdin stays open for ``write_stdin`` until ``close_stdin``,
and ``kill`` stops it.

It is the server's streamed exec (``POST .../exec/stream``), whose request body is the
command's stdin and whose answer streams its output at the same time. httpx sends a whole
request body before it reads the answer, so the process opens a connection of its own to the
same server (the Unix socket, or the loopback URL with its bearer token), sends the body in
chunks as stdin comes, and reads the answer as it comes. Ending the connection before the
command has ended kills the command and every process it started.

The server answers once the command writes its first byte (or ends). Until then what was sent
is kept: a ``busy`` answer, which the server gives before it runs anything, is waited out and
the same request sent again, as the client does for its other requests.
"""

from __future__ import annotations

import asyncio
import socket
import time
from typing import Any, Dict, List, Optional, Union
from urllib.parse import urlsplit

from . import _common as c
from . import tty
from .errors import Busy, ComposeboxError, SandboxUnavailable
from .types import ExecEvent, ExecResult

_END = object()
_LAST_CHUNK = b"0\r\n\r\n"


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n" % len(data) + data + b"\r\n"


def _request_head(endpoint: c.Endpoint, path: str, lease: Optional[str]) -> bytes:
    host = urlsplit(endpoint.url).netloc if endpoint.url else "composebox"
    headers = dict(endpoint.headers())
    headers.update({"Host": host, "Content-Type": "application/octet-stream",
                    "Transfer-Encoding": "chunked"})
    if lease:
        headers[c.LEASE_HEADER] = lease
    head = f"POST {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
    return head.encode("latin-1")


class AsyncExecProcess:
    """A command started by :meth:`composebox.AsyncClient.exec_process`.

    ``async for ev in proc`` yields :class:`~composebox.types.ExecEvent` chunks (``stdout``,
    ``stderr``) as the command writes them, then ``exit``, after which ``result`` holds the exit
    code and counters; a failure (timeout, lost container) raises its error from the iteration.
    ``write_stdin`` and ``close_stdin`` feed stdin (with ``stdin_open=True``); ``kill`` stops
    the command (and what it started) and ends the iteration."""

    def __init__(self, endpoint: c.Endpoint, path: str, lease: Optional[str], what: str,
                 connect_timeout: float, busy_timeout: float) -> None:
        self._endpoint = endpoint
        self._path = path
        self._lease = lease
        self._what = what
        self._connect_timeout = connect_timeout
        self._busy_timeout = busy_timeout
        self._writer: Optional[asyncio.StreamWriter] = None
        self._wlock = asyncio.Lock()
        # Everything sent, until the server answers: a busy answer sends it all again.
        self._sent: Optional[List[bytes]] = []
        self._stdin_closed = False
        self._events: "asyncio.Queue[Any]" = asyncio.Queue()
        self._reader_task: Optional["asyncio.Task[None]"] = None
        self._killed = False
        self._ended = False
        self.result: Optional[ExecResult] = None
        self.busy_retries = 0

    # -- start ---------------------------------------------------------------------------------

    @classmethod
    async def _start(cls, endpoint: c.Endpoint, path: str, lease: Optional[str],
                     body: Dict[str, Any], input: Optional[Union[bytes, str]], stdin_open: bool,
                     what: str, connect_timeout: float, busy_timeout: float) -> "AsyncExecProcess":
        p = cls(endpoint, path, lease, what, connect_timeout, busy_timeout)
        reader = await p._connect()
        try:
            await p._send(_chunk(c.stream_request_head(body)))
            if input:
                await p._send(_chunk(c.to_bytes(input)))
            if not stdin_open:
                await p._send(_LAST_CHUNK)
                p._stdin_closed = True
        except BaseException:
            p._abort()
            raise
        p._reader_task = asyncio.get_running_loop().create_task(p._read(reader))
        return p

    async def _connect(self) -> asyncio.StreamReader:
        family, addr = tty.address(self._endpoint)
        try:
            if family == socket.AF_UNIX:
                opening = asyncio.open_unix_connection(addr, limit=1 << 20)
            else:
                opening = asyncio.open_connection(addr[0], addr[1], limit=1 << 20)
            reader, self._writer = await asyncio.wait_for(opening, self._connect_timeout)
        except (OSError, asyncio.TimeoutError) as e:
            raise SandboxUnavailable(f"{self._what}: cannot reach composebox serve at "
                                     f"{self._endpoint.describe()}: {e!r}") from e
        self._writer.write(_request_head(self._endpoint, self._path, self._lease))
        return reader

    async def _send(self, data: bytes) -> None:
        async with self._wlock:
            if self._sent is not None:
                self._sent.append(data)
            assert self._writer is not None
            try:
                self._writer.write(data)
                await self._writer.drain()
            except OSError as e:
                if self._sent is None:
                    raise SandboxUnavailable(f"{self._what}: send: {e}") from e
                # Not answered yet: the reader finds out why, and may send it all again.

    # -- the answer ----------------------------------------------------------------------------

    async def _read(self, reader: asyncio.StreamReader) -> None:
        deadline = time.monotonic() + self._busy_timeout
        attempt = 0
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, OSError) as e:
                    raise SandboxUnavailable(f"{self._what}: the server closed the connection "
                                             f"before it answered: {e!r}") from e
                got = tty.parse_head(head)
                assert got is not None
                status, headers, _ = got
                if status == 200:
                    self._sent = None
                    break
                body = await _read_body(reader, headers)
                err = c.decode_error_response(status, body, self._what)
                delay = c.busy_delay(err, headers.get("retry-after"), attempt, deadline)
                if delay is None:
                    raise err
                # Busy: nothing ran. Wait, then send everything again on a new connection.
                await asyncio.sleep(delay)
                attempt += 1
                self.busy_retries += 1
                async with self._wlock:
                    self._close_writer()
                    reader = await self._connect()
                    assert self._writer is not None and self._sent is not None
                    self._writer.write(b"".join(self._sent))
                    await self._writer.drain()
            chunked = headers.get("transfer-encoding", "").lower() == "chunked"
            buf = b""
            async for data in _body_chunks(reader, headers, chunked):
                buf += data
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    if line.strip():
                        ev = c.parse_exec_event(line)
                        await self._events.put(ev)
                        if ev.type == "exit":
                            self.result = ev.result
                            return
            raise ComposeboxError(f"{self._what}: the server ended the stream without an exit event")
        except asyncio.CancelledError:
            raise
        except BaseException as e:
            await self._events.put(e)
        finally:
            await self._events.put(_END)
            async with self._wlock:
                self._close_writer()

    # -- the caller's side ---------------------------------------------------------------------

    def __aiter__(self) -> "AsyncExecProcess":
        return self

    async def __anext__(self) -> ExecEvent:
        if self._ended:
            raise StopAsyncIteration
        item = await self._events.get()
        if item is _END:
            self._ended = True
            raise StopAsyncIteration
        if isinstance(item, BaseException):
            self._ended = True
            raise item
        return item

    @property
    def running(self) -> bool:
        """Neither ended nor killed."""
        return not self._killed and self.result is None and \
            (self._reader_task is None or not self._reader_task.done())

    async def write_stdin(self, data: Union[bytes, str]) -> None:
        """Send bytes (or UTF-8 text) to the command's stdin."""
        if self._stdin_closed:
            raise ComposeboxError(f"{self._what}: stdin is closed")
        if not self.running:
            raise ComposeboxError(f"{self._what}: the command has ended")
        b = c.to_bytes(data)
        if b:
            await self._send(_chunk(b))

    async def close_stdin(self) -> None:
        """End the command's stdin (it reads EOF). Closing it twice is harmless."""
        if self._stdin_closed or not self.running:
            self._stdin_closed = True
            return
        self._stdin_closed = True
        await self._send(_LAST_CHUNK)

    async def kill(self) -> None:
        """Stop the command and every process it started; the iteration then ends, after the
        output that had already arrived. Harmless once it has ended."""
        if self._killed:
            return
        self._killed = True
        self._abort()
        if self._reader_task is not None and not self._reader_task.done():
            self._reader_task.cancel()
            try:
                await self._reader_task
            except (asyncio.CancelledError, Exception):
                pass
            await self._events.put(_END)

    def _close_writer(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def _abort(self) -> None:
        # A reset rather than an orderly close: the server stops the command at once.
        if self._writer is not None:
            transport = self._writer.transport
            self._writer = None
            transport.abort()


async def _read_body(reader: asyncio.StreamReader, headers: Dict[str, str]) -> bytes:
    chunked = headers.get("transfer-encoding", "").lower() == "chunked"
    out = b""
    try:
        async for data in _body_chunks(reader, headers, chunked):
            out += data
            if len(out) > 1 << 20:
                break
    except (asyncio.IncompleteReadError, OSError):
        pass
    return out


async def _body_chunks(reader: asyncio.StreamReader, headers: Dict[str, str], chunked: bool):
    """The body's bytes as they come: chunked, by Content-Length, or to the end."""
    try:
        if chunked:
            while True:
                line = await reader.readuntil(b"\r\n")
                size = int(line.split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    return
                data = await reader.readexactly(size)
                await reader.readexactly(2)
                yield data
        n = headers.get("content-length")
        if n is not None:
            if int(n):
                yield await reader.readexactly(int(n))
            return
        while True:
            data = await reader.read(c.CHUNK)
            if not data:
                return
            yield data
    except (asyncio.IncompleteReadError, OSError) as e:
        raise SandboxUnavailable("exec: the connection to the server ended before the command "
                                 f"did: {e!r}") from e
