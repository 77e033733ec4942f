"""Interactive terminal sessions: a command on a pseudo-terminal in a sandbox, talked to as it
runs (``Client.exec_tty``, ``AsyncClient.exec_tty``).

The server switches the request's connection to its ``composebox-tty`` protocol (HTTP
101), after which both sides exchange frames: an 8-byte header (kind, three zero bytes, the
payload's length as a big-endian uint32) and the payload. httpx cannot hand over an upgraded
connection, so a session opens a socket of its own to the same server (the Unix socket, or
the loopback URL with its bearer token).
"""

from __future__ import annotations

import asyncio
import json
import select
import socket
import time
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union
from urllib.parse import urlsplit

from . import _common as c
from ._version import API_VERSION, __version__
from .errors import ComposeboxError, IncompatibleServer, InvalidConfig, SandboxUnavailable
from .types import ExecResult, Version

PROTOCOL = "composebox-tty"
# The server revision that has terminal sessions.
TTY_API_REVISION = 3

FRAME_STDIN = 0
FRAME_RESIZE = 1
FRAME_EOF = 2
FRAME_OUTPUT = 1
FRAME_END = 3
HEADER = 8
MAX_FRAME = 1 << 20
# How long close() waits for the server to report a command it killed.
CLOSE_WAIT = 5.0


def check_revision(v: Version, where: str) -> None:
    """IncompatibleServer when the server predates terminal sessions, naming both sides."""
    if v.api_revision < TTY_API_REVISION:
        raise IncompatibleServer(
            f"exec tty: {where} (composebox {v.version or '(no version)'}) serves API {v.api} "
            f"revision {v.api_revision}; terminal sessions need revision {TTY_API_REVISION} or "
            "later: upgrade composebox serve", server=v, client_version=__version__,
            client_api=API_VERSION, min_api_revision=TTY_API_REVISION)


def tty_request(cmd: Union[List[str], Tuple[str, ...]], *, cwd: Optional[str], env: Optional[Mapping[str, str]],
                user: Optional[str], timeout: Optional[float], rows: int, cols: int) -> Dict[str, Any]:
    body = c.exec_request(cmd, cwd=cwd, env=env, user=user, timeout=timeout)
    if rows < 0 or cols < 0:
        raise ValueError(f"exec tty: rows and cols must not be negative, got {rows}x{cols}")
    if rows:
        body["rows"] = int(rows)
    if cols:
        body["cols"] = int(cols)
    return body


def frame(kind: int, payload: bytes = b"") -> bytes:
    return bytes([kind, 0, 0, 0]) + len(payload).to_bytes(4, "big") + payload


def stdin_frames(data: Union[bytes, bytearray, memoryview, str]) -> bytes:
    b = c.to_bytes(data)
    return b"".join(frame(FRAME_STDIN, b[i:i + MAX_FRAME]) for i in range(0, len(b), MAX_FRAME))


def resize_frame(rows: int, cols: int) -> bytes:
    if rows <= 0 or cols <= 0:
        raise ValueError(f"exec tty: resize to {rows}x{cols}: rows and cols must be positive")
    return frame(FRAME_RESIZE, json.dumps({"rows": int(rows), "cols": int(cols)}).encode())


def request_bytes(endpoint: c.Endpoint, path: str, lease: Optional[str], body: Dict[str, Any]) -> bytes:
    data = json.dumps(body, separators=(",", ":")).encode("utf-8")
    host = urlsplit(endpoint.url).netloc if endpoint.url else "composebox"
    headers = dict(endpoint.headers())
    headers.update({"Host": host, "Connection": "Upgrade", "Upgrade": PROTOCOL,
                    "Content-Type": "application/json", "Content-Length": str(len(data))})
    if lease:
        headers[c.LEASE_HEADER] = lease
    head = f"POST {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
    return head.encode("latin-1") + data


def address(endpoint: c.Endpoint) -> Tuple[int, Any]:
    """The socket family and address of the server."""
    if endpoint.socket:
        return socket.AF_UNIX, endpoint.socket
    u = urlsplit(endpoint.url or "")
    if u.scheme != "http" or not u.hostname:
        raise InvalidConfig(f"exec tty: cannot open a terminal session over {endpoint.url!r}: want "
                            "http://HOST:PORT or a Unix socket")
    return socket.AF_INET6 if ":" in u.hostname else socket.AF_INET, (u.hostname, u.port or 80)


def parse_head(buf: bytes) -> Optional[Tuple[int, Dict[str, str], bytes]]:
    """(status, headers, bytes after the head) once ``buf`` holds a whole response head."""
    end = buf.find(b"\r\n\r\n")
    if end < 0:
        if len(buf) > 64 * 1024:
            raise ComposeboxError("exec tty: the server's answer has no end of headers")
        return None
    lines = buf[:end].decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[1].isdigit():
        raise ComposeboxError(f"exec tty: not an HTTP answer: {lines[0][:200]!r}")
    headers: Dict[str, str] = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    return int(parts[1]), headers, buf[end + 4:]


def refusal(status: int, headers: Dict[str, str], body: bytes, what: str) -> ComposeboxError:
    n = int(headers.get("content-length", len(body)) or 0)
    return c.decode_error_response(status, body[:n], what)


class _Frames:
    """Frames parsed from received bytes; what is not a whole frame yet stays for later."""

    def __init__(self) -> None:
        self.buf = b""

    def next(self) -> Optional[Tuple[int, bytes]]:
        if len(self.buf) < HEADER:
            return None
        n = int.from_bytes(self.buf[4:8], "big")
        if len(self.buf) < HEADER + n:
            return None
        kind, payload = self.buf[0], self.buf[HEADER:HEADER + n]
        self.buf = self.buf[HEADER + n:]
        return kind, payload


class _State:
    """What the sync and async sessions share: the end and the output not yet handed out."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.frames = _Frames()
        self.pending = b""
        self.result: Optional[ExecResult] = None
        self.error: Optional[ComposeboxError] = None
        self.ended = False

    def take(self) -> bool:
        """Move the whole frames received into ``pending``; True once the end frame is in."""
        while not self.ended:
            f = self.frames.next()
            if f is None:
                return False
            kind, payload = f
            if kind == FRAME_OUTPUT:
                self.pending += payload
            elif kind == FRAME_END:
                self.ended = True
                try:
                    ev = c.parse_exec_event(payload)
                    self.result = ev.result
                except ComposeboxError as e:
                    self.error = e
                    self.result = getattr(e, "result", None)
        return True

    def output(self, closed: bool) -> Optional[bytes]:
        """What ``recv`` returns now without waiting: the output not yet handed out, or ``b""``
        once the command has ended (raising its error, once) or the session is closed; None when
        it must wait for more."""
        self.take()
        if self.pending:
            out, self.pending = self.pending, b""
            return out
        if self.ended:
            if self.error is not None:
                err, self.error = self.error, None
                raise err
            return b""
        if closed:
            return b""
        return None

    def lost(self) -> SandboxUnavailable:
        return SandboxUnavailable(f"{self.what}: the connection to the server ended before the "
                                  "command did")

    @property
    def exit_code(self) -> Optional[int]:
        return self.result.exit_code if self.result is not None else None


class TTYSession:
    """A command on a terminal in a sandbox (from :meth:`Client.exec_tty`).

    ``send`` types into the terminal, ``recv`` returns what the command wrote since (stdout
    and stderr as one stream, with the terminal's ``\\r\\n``), ``resize`` changes the window
    (the command gets SIGWINCH). Once the command has ended ``recv`` returns ``b""`` and
    ``exit_code`` holds its status; a failure after the start (a timeout, a stopped
    container) is raised by ``recv``. ``close`` (or leaving a ``with`` block) ends the session:
    a command still running is killed, and its status is kept when the server reports it.
    Use it from one thread at a time per direction (one sender, one reader).
    """

    def __init__(self, sock: socket.socket, state: _State) -> None:
        self._sock = sock
        self._s = state
        self._closed = False

    @classmethod
    def _open(cls, endpoint: c.Endpoint, path: str, lease: Optional[str], body: Dict[str, Any],
              what: str, connect_timeout: float) -> "TTYSession":
        family, addr = address(endpoint)
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.settimeout(connect_timeout)
            try:
                sock.connect(addr)
            except OSError as e:
                raise SandboxUnavailable(f"{what}: cannot reach composebox serve at "
                                         f"{endpoint.describe()}: {e}") from e
            sock.settimeout(None)
            sock.sendall(request_bytes(endpoint, path, lease, body))
            buf = b""
            while True:
                got = parse_head(buf)
                if got is not None:
                    break
                chunk = sock.recv(c.CHUNK)
                if not chunk:
                    raise SandboxUnavailable(f"{what}: the server closed the connection before it answered")
                buf += chunk
            status, headers, rest = got
            if status != 101:
                n = int(headers.get("content-length", 0) or 0)
                while len(rest) < n:
                    chunk = sock.recv(c.CHUNK)
                    if not chunk:
                        break
                    rest += chunk
                raise refusal(status, headers, rest, what)
            state = _State(what)
            state.frames.buf = rest
            return cls(sock, state)
        except BaseException:
            sock.close()
            raise

    @property
    def exit_code(self) -> Optional[int]:
        """The command's exit status once it has ended (None before, or when it was killed
        without the server saying how it ended)."""
        return self._s.exit_code

    @property
    def result(self) -> Optional[ExecResult]:
        """The end of the command: exit code, bytes written, duration (output not kept)."""
        return self._s.result

    @property
    def ended(self) -> bool:
        return self._s.ended

    def send(self, data: Union[bytes, str]) -> None:
        """Type ``data`` (bytes, or str as UTF-8) into the terminal, e.g. ``"ls\\n"`` or
        ``b"\\x03"`` for Ctrl-C."""
        self._write(stdin_frames(data))

    def resize(self, rows: int, cols: int) -> None:
        self._write(resize_frame(rows, cols))

    def close_stdin(self) -> None:
        """Close the command's stdin (EOF)."""
        self._write(frame(FRAME_EOF))

    def _write(self, b: bytes) -> None:
        if self._closed or self._s.ended:
            raise ComposeboxError(f"{self._s.what}: the session has ended")
        try:
            self._sock.sendall(b)
        except OSError as e:
            raise SandboxUnavailable(f"{self._s.what}: send: {e}") from e

    def _fill(self, deadline: Optional[float]) -> bool:
        """Receive once; False when the deadline passed with nothing to read."""
        remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
        ready, _, _ = select.select([self._sock], [], [], remaining)
        if not ready:
            return False
        try:
            chunk = self._sock.recv(c.CHUNK)
        except OSError as e:
            raise SandboxUnavailable(f"{self._s.what}: receive: {e}") from e
        if not chunk:
            raise self._s.lost()
        self._s.frames.buf += chunk
        return True

    def recv(self, timeout: Optional[float] = None) -> bytes:
        """The output written since the last call, waiting for some up to ``timeout`` seconds
        (None: until there is some). ``b""`` once the command has ended and its output has all
        been returned; TimeoutError when nothing came in time."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            if self._s.take():
                self._finish()
            out = self._s.output(self._closed)
            if out is not None:
                return out
            if not self._fill(deadline):
                raise TimeoutError(f"{self._s.what}: no output within {timeout} s")

    def read_until(self, marker: Union[bytes, str], timeout: Optional[float] = None) -> bytes:
        """The output up to and including ``marker`` (the rest stays for the next read);
        TimeoutError when it did not come in time, EOFError when the command ended first."""
        m = c.to_bytes(marker)
        deadline = None if timeout is None else time.monotonic() + timeout
        got = b""
        while m not in got:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                self._s.pending = got + self._s.pending
                raise TimeoutError(f"{self._s.what}: {m!r} did not come within {timeout} s")
            try:
                chunk = self.recv(remaining)
            except TimeoutError:
                self._s.pending = got + self._s.pending
                raise
            if not chunk:
                raise EOFError(f"{self._s.what}: the command ended before {m!r}: {got[-200:]!r}")
            got += chunk
        i = got.index(m) + len(m)
        self._s.pending = got[i:] + self._s.pending
        return got[:i]

    def wait(self, timeout: Optional[float] = None) -> int:
        """Read to the command's end, dropping output not yet read; its exit code."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.recv(None if deadline is None else max(0.0, deadline - time.monotonic())):
            pass
        code = self.exit_code
        if code is None:
            raise ComposeboxError(f"{self._s.what}: the command ended without an exit code")
        return code

    def _finish(self) -> None:
        if not self._closed:
            self._closed = True
            self._sock.close()

    def close(self) -> None:
        """End the session: a command still running is killed (its status, when the server
        reports it within a few seconds, is then in ``exit_code``)."""
        if self._closed:
            return
        if not self._s.ended:
            try:
                # The server takes the end of the connection as the end of the session.
                self._sock.shutdown(socket.SHUT_WR)
                deadline = time.monotonic() + CLOSE_WAIT
                while not self._s.take() and self._fill(deadline):
                    pass
            except (OSError, ComposeboxError):
                pass
            self._s.error = None
        self._finish()

    def __enter__(self) -> "TTYSession":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class AsyncTTYSession:
    """:class:`TTYSession` for asyncio (from :meth:`AsyncClient.exec_tty`): the same methods,
    awaited. ``async with`` closes it."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, state: _State) -> None:
        self._reader = reader
        self._writer = writer
        self._s = state
        self._closed = False

    @classmethod
    async def _open(cls, endpoint: c.Endpoint, path: str, lease: Optional[str], body: Dict[str, Any],
                    what: str, connect_timeout: float) -> "AsyncTTYSession":
        family, addr = address(endpoint)
        try:
            if family == socket.AF_UNIX:
                opening = asyncio.open_unix_connection(addr, limit=MAX_FRAME + HEADER)
            else:
                opening = asyncio.open_connection(addr[0], addr[1], limit=MAX_FRAME + HEADER)
            reader, writer = await asyncio.wait_for(opening, connect_timeout)
        except (OSError, asyncio.TimeoutError) as e:
            raise SandboxUnavailable(f"{what}: cannot reach composebox serve at "
                                     f"{endpoint.describe()}: {e!r}") from e
        try:
            writer.write(request_bytes(endpoint, path, lease, body))
            await writer.drain()
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except asyncio.IncompleteReadError as e:
                raise SandboxUnavailable(f"{what}: the server closed the connection before it answered") from e
            got = parse_head(head)
            assert got is not None
            status, headers, _ = got
            if status != 101:
                n = int(headers.get("content-length", 0) or 0)
                try:
                    rest = await reader.readexactly(n)
                except asyncio.IncompleteReadError as e:
                    rest = e.partial
                raise refusal(status, headers, rest, what)
            return cls(reader, writer, _State(what))
        except BaseException:
            writer.close()
            raise

    @property
    def exit_code(self) -> Optional[int]:
        return self._s.exit_code

    @property
    def result(self) -> Optional[ExecResult]:
        return self._s.result

    @property
    def ended(self) -> bool:
        return self._s.ended

    async def send(self, data: Union[bytes, str]) -> None:
        await self._write(stdin_frames(data))

    async def resize(self, rows: int, cols: int) -> None:
        await self._write(resize_frame(rows, cols))

    async def close_stdin(self) -> None:
        await self._write(frame(FRAME_EOF))

    async def _write(self, b: bytes) -> None:
        if self._closed or self._s.ended:
            raise ComposeboxError(f"{self._s.what}: the session has ended")
        try:
            self._writer.write(b)
            await self._writer.drain()
        except OSError as e:
            raise SandboxUnavailable(f"{self._s.what}: send: {e}") from e

    async def _fill(self) -> None:
        # read() takes what is there: a cancelled wait loses nothing.
        try:
            chunk = await self._reader.read(c.CHUNK)
        except OSError as e:
            raise SandboxUnavailable(f"{self._s.what}: receive: {e}") from e
        if not chunk:
            raise self._s.lost()
        self._s.frames.buf += chunk

    async def recv(self, timeout: Optional[float] = None) -> bytes:
        """As :meth:`TTYSession.recv`."""
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while True:
            if self._s.take():
                self._finish()
            out = self._s.output(self._closed)
            if out is not None:
                return out
            remaining = None if deadline is None else deadline - loop.time()
            try:
                await asyncio.wait_for(self._fill(), remaining)
            except asyncio.TimeoutError:
                raise TimeoutError(f"{self._s.what}: no output within {timeout} s") from None

    async def read_until(self, marker: Union[bytes, str], timeout: Optional[float] = None) -> bytes:
        """As :meth:`TTYSession.read_until`."""
        loop = asyncio.get_running_loop()
        m = c.to_bytes(marker)
        deadline = None if timeout is None else loop.time() + timeout
        got = b""
        while m not in got:
            remaining = None if deadline is None else deadline - loop.time()
            try:
                if remaining is not None and remaining <= 0:
                    raise TimeoutError(f"{self._s.what}: {m!r} did not come within {timeout} s")
                chunk = await self.recv(remaining)
            except TimeoutError:
                self._s.pending = got + self._s.pending
                raise
            if not chunk:
                raise EOFError(f"{self._s.what}: the command ended before {m!r}: {got[-200:]!r}")
            got += chunk
        i = got.index(m) + len(m)
        self._s.pending = got[i:] + self._s.pending
        return got[:i]

    async def wait(self, timeout: Optional[float] = None) -> int:
        """As :meth:`TTYSession.wait`."""
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while await self.recv(None if deadline is None else max(0.0, deadline - loop.time())):
            pass
        code = self.exit_code
        if code is None:
            raise ComposeboxError(f"{self._s.what}: the command ended without an exit code")
        return code

    def _finish(self) -> None:
        if not self._closed:
            self._closed = True
            self._writer.close()

    async def close(self) -> None:
        """As :meth:`TTYSession.close`."""
        if self._closed:
            return
        if not self._s.ended:
            try:
                if self._writer.can_write_eof():
                    self._writer.write_eof()
                    loop = asyncio.get_running_loop()
                    deadline = loop.time() + CLOSE_WAIT
                    while not self._s.take():
                        await asyncio.wait_for(self._fill(), max(0.0, deadline - loop.time()))
            except (OSError, ComposeboxError, asyncio.TimeoutError):
                pass
            self._s.error = None
        self._finish()
        try:
            await self._writer.wait_closed()
        except OSError:
            pass

    async def __aenter__(self) -> "AsyncTTYSession":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()
