"""What the sync and async clients share: endpoints, request bodies, decoding, the spawned server."""

from __future__ import annotations

import atexit
import base64
import datetime
import json
import os
import random
import shutil
import signal
import subprocess
import tempfile
import time
from typing import (IO, Any, AsyncIterable, AsyncIterator, Awaitable, Dict, Iterable, Iterator,
                    List, Mapping, Optional, Protocol, Tuple, Union, cast)
from urllib.parse import quote

from ._binary import find_binary
from ._version import API_VERSION, MIN_API_REVISION, __version__
from .errors import (Busy, ComposeboxError, IncompatibleServer, OutputLimitExceeded,
                     PrerequisiteError, error_from_body, make_error)
from .types import ExecEvent, ExecResult, Version

API = "/" + API_VERSION
VERSION_PATH = API + "/version"
LEASE_HEADER = "X-Composebox-Lease"
CHUNK = 64 * 1024
# Base URL of requests over the Unix socket: the host part is ignored but must be a valid name.
SOCKET_BASE_URL = "http://composebox"

BytesLike = Union[bytes, bytearray, memoryview]
# What a write takes: bytes or str (UTF-8), a binary or text file object, or an iterable of
# chunks; the async client also takes async iterables and objects whose read() is awaitable.
Data = Union[BytesLike, str, IO[bytes], IO[str], Iterable[bytes], Iterable[str]]
StrPath = Union[str, "os.PathLike[str]"]


class AsyncReadable(Protocol):
    """An object with an awaitable ``read(n)`` (an async file, a stream reader)."""

    def read(self, n: int, /) -> Awaitable[Union[bytes, str]]: ...


AsyncData = Union[Data, AsyncIterable[bytes], AsyncIterable[str], AsyncReadable]


def default_socket_path() -> str:
    """The socket ``composebox serve`` listens on by default."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime:
        return os.path.join(runtime, "composebox", "api.sock")
    return "/run/composebox/api.sock"


class Endpoint:
    """Where the server is: a Unix socket, or a loopback URL with a bearer token."""

    def __init__(self, socket: Optional[str] = None, url: Optional[str] = None,
                 token: Optional[str] = None, token_file: Optional[str] = None) -> None:
        if socket and url:
            raise ValueError("composebox client: give socket or url, not both")
        if not socket and not url:
            url = os.environ.get("COMPOSEBOX_URL") or None
            if not url:
                socket = os.environ.get("COMPOSEBOX_SOCKET") or default_socket_path()
        if url and token is None:
            token_file = token_file or os.environ.get("COMPOSEBOX_TOKEN_FILE")
            token = os.environ.get("COMPOSEBOX_TOKEN")
            if token_file:
                with open(token_file, "r", encoding="utf-8") as f:
                    token = f.read().strip()
        self.socket = socket
        self.url = url.rstrip("/") if url else None
        self.token = token

    @property
    def base_url(self) -> str:
        return self.url or SOCKET_BASE_URL

    def headers(self) -> Dict[str, str]:
        h = {"User-Agent": "composebox-python"}
        if self.token:
            h["Authorization"] = "Bearer " + self.token
        return h

    def describe(self) -> str:
        return self.url or ("unix:" + str(self.socket))


def _path(kind: str, ident: str, rest: Tuple[str, ...]) -> str:
    p = f"{API}/{kind}/{quote(ident, safe='')}"
    for r in rest:
        p += "/" + quote(r, safe="")
    return p


def task_path(task_id: str, *rest: str) -> str:
    return _path("tasks", task_id, rest)


def lease_path(lease_id: str, *rest: str) -> str:
    return _path("leases", lease_id, rest)


def sample_path(project: str, *rest: str) -> str:
    return _path("samples", project, rest)


def sandbox_path(project: str, service: str, *rest: str) -> str:
    return sample_path(project, "sandboxes", service, *rest)


def task_request(*, name: Optional[str] = None, compose_yaml: Optional[str] = None,
                 path: Optional[StrPath] = None, files: Optional[List[StrPath]] = None,
                 working_dir: Optional[str] = None, env: Optional[Mapping[str, str]] = None,
                 pass_env: Optional[List[str]] = None, profiles: Optional[List[str]] = None,
                 policy: Optional[Mapping[str, Any]] = None, default_service: Optional[str] = None,
                 agent_image: Optional[str] = None,
                 image_overrides: Optional[Mapping[str, str]] = None, prebuilt: bool = False,
                 ready_timeout: Optional[float] = None, warm: int = 0) -> Dict[str, Any]:
    """The JSON body of a task init; only the fields given are sent."""
    if compose_yaml is not None and path is not None:
        raise ValueError("task init: give compose_yaml or path, not both")
    body: Dict[str, Any] = {}
    for key, value in (("name", name), ("compose_yaml", compose_yaml), ("path", path),
                       ("working_dir", working_dir), ("default_service", default_service),
                       ("agent_image", agent_image)):
        if value is not None:
            body[key] = value
    if path is not None:
        body["path"] = os.fspath(path)
    for key, lst in (("files", files), ("pass_env", pass_env), ("profiles", profiles)):
        if lst:
            body[key] = [os.fspath(x) for x in lst]
    if env:
        body["env"] = {str(k): str(v) for k, v in env.items()}
    if image_overrides:
        body["image_overrides"] = dict(image_overrides)
    if policy:
        body["policy"] = dict(policy)
    if prebuilt:
        body["prebuilt"] = True
    if ready_timeout is not None:
        body["ready_timeout_seconds"] = float(ready_timeout)
    if warm < 0:
        raise ValueError("task init: warm must not be negative")
    if warm:
        body["warm"] = int(warm)
    return body


def sample_request(*, id: Optional[str] = None, metadata: Optional[Mapping[str, Any]] = None,
                   ready_timeout: Optional[float] = None) -> Dict[str, Any]:
    body: Dict[str, Any] = {}
    if id is not None:
        body["id"] = str(id)
    if metadata:
        body["metadata"] = {str(k): str(v) for k, v in metadata.items()}
    if ready_timeout is not None:
        body["ready_timeout_seconds"] = float(ready_timeout)
    return body


def to_bytes(data: Union[BytesLike, str]) -> bytes:
    if isinstance(data, str):
        return data.encode("utf-8")
    return bytes(data)


def exec_request(cmd: Union[List[str], Tuple[str, ...]], *, cwd: Optional[str] = None,
                 env: Optional[Mapping[str, str]] = None, user: Optional[str] = None,
                 timeout: Optional[float] = None, output_limit: Optional[int] = None,
                 strict_limit: bool = False) -> Dict[str, Any]:
    """The JSON of an exec without its input."""
    if isinstance(cmd, (str, bytes)):
        raise TypeError("exec: cmd is an argv list (there is no implicit shell); "
                        "use ['sh', '-c', script] for a shell command")
    if not cmd:
        raise ValueError("exec: cmd is empty")
    body: Dict[str, Any] = {"cmd": [str(c) for c in cmd]}
    if cwd:
        body["cwd"] = str(cwd)
    if env:
        body["env"] = {str(k): str(v) for k, v in env.items()}
    if user:
        body["user"] = str(user)
    if timeout is not None:
        if timeout <= 0:
            raise ValueError(f"exec: timeout must be positive, got {timeout}")
        body["timeout_seconds"] = float(timeout)
    if output_limit is not None:
        body["output_limit"] = int(output_limit)
    if strict_limit:
        body["strict_limit"] = True
    return body


def with_input(body: Dict[str, Any], input: Optional[Union[BytesLike, str]]) -> Dict[str, Any]:
    if input is not None:
        body = dict(body)
        body["input"] = base64.b64encode(to_bytes(input)).decode("ascii")
    return body


def sync_chunks(data: Data) -> Iterator[bytes]:
    """Bytes, str, a binary or text file object, or an iterable of bytes/str, as chunks."""
    if isinstance(data, (bytes, bytearray, memoryview, str)):
        b = to_bytes(data)
        if b:
            yield b
        return
    read = getattr(data, "read", None)
    if callable(read):
        while True:
            chunk = read(CHUNK)
            if not chunk:
                return
            yield to_bytes(chunk)
    for chunk in cast(Iterable[Union[bytes, str]], data):
        if chunk:
            yield to_bytes(chunk)


async def async_chunks(data: AsyncData) -> AsyncIterator[bytes]:
    """As sync_chunks, and also async iterables and objects with an async read()."""
    import inspect as _inspect

    if isinstance(data, (bytes, bytearray, memoryview, str)):
        b = to_bytes(data)
        if b:
            yield b
        return
    read = getattr(data, "read", None)
    if callable(read):
        while True:
            chunk = read(CHUNK)
            if _inspect.isawaitable(chunk):
                chunk = await chunk
            if not chunk:
                return
            yield to_bytes(chunk)
    if hasattr(data, "__aiter__"):
        async for achunk in cast(AsyncIterable[Union[bytes, str]], data):
            if achunk:
                yield to_bytes(achunk)
        return
    for chunk in cast(Iterable[Union[bytes, str]], data):
        if chunk:
            yield to_bytes(chunk)


def stream_request_head(body: Dict[str, Any]) -> bytes:
    """The first line of a streamed exec's request body; stdin follows it."""
    return json.dumps(body, separators=(",", ":")).encode("utf-8") + b"\n"


def decode_error_response(status: int, content: bytes, what: str) -> ComposeboxError:
    try:
        body = json.loads(content.decode("utf-8")) if content else None
    except (UnicodeDecodeError, ValueError):
        body = None
    fallback = f"{what}: HTTP {status}"
    if body is None and content:
        fallback += ": " + content[:200].decode("utf-8", errors="replace").strip()
    return error_from_body(status, body, fallback)


def _client_says() -> str:
    return (f"this client (composebox {__version__} for Python) speaks API {API_VERSION} and "
            f"needs revision {MIN_API_REVISION} or later")


def _incompatible(message: str, server: Optional[Version] = None,
                  status: int = 0) -> IncompatibleServer:
    return IncompatibleServer(message, server=server, client_version=__version__,
                              client_api=API_VERSION, min_api_revision=MIN_API_REVISION,
                              status=status)


# The server revision that has a live sample's egress routes and egress_denied events.
EGRESS_API_REVISION = 5


def check_egress_revision(v: Version, where: str) -> None:
    """IncompatibleServer when the server predates the egress routes, naming both sides."""
    if v.api_revision < EGRESS_API_REVISION:
        raise IncompatibleServer(
            f"sample egress: {where} (composebox {v.version or '(no version)'}) serves API {v.api} "
            f"revision {v.api_revision}; a sample's egress needs revision {EGRESS_API_REVISION} "
            "or later: upgrade composebox serve", server=v, client_version=__version__,
            client_api=API_VERSION, min_api_revision=EGRESS_API_REVISION)


def egress_request(allow: List[str]) -> Dict[str, Any]:
    if isinstance(allow, (str, bytes)):
        raise TypeError("sample egress: allow is a list of NAME[:PORT], not one string")
    return {"allow": [str(a) for a in allow]}


def check_version(status: int, content: bytes, where: str) -> Version:
    """The server's Version from its answer to GET /v1/version, or IncompatibleServer when it is
    not a server this client can talk to: another API, an older revision, or an answer that is
    no composebox version. Other failures (a refused token, a server error) raise their own
    error. ``where`` names the server ("the server at unix:/run/...")."""
    if status in (404, 405):
        raise _incompatible(
            f"{where} does not serve API {API_VERSION}: GET {VERSION_PATH} answered HTTP "
            f"{status} (a composebox serve of another API, or not composebox serve); "
            + _client_says(), status=status)
    if status >= 400:
        raise decode_error_response(status, content, "version")
    try:
        body = json.loads(content.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        body = None
    if not isinstance(body, dict) or not isinstance(body.get("api"), str):
        snippet = content[:200].decode("utf-8", errors="replace").strip()
        raise _incompatible(
            f"{where} is not composebox serve, or not one this client knows: GET {VERSION_PATH} "
            f"answered {snippet!r}, which names no API; " + _client_says(), status=status)
    v = Version.from_json(body)
    server = f"composebox {v.version or '(no version)'}"
    if v.api != API_VERSION:
        raise _incompatible(
            f"{where} ({server}) speaks API {v.api} revision {v.api_revision}; "
            + _client_says() + ": use the client release made for that server, or a server "
            f"of API {API_VERSION}", v, status)
    if v.api_revision < MIN_API_REVISION:
        rev = (f"revision {v.api_revision}" if "api_revision" in body
               else "without a revision (it predates them)")
        raise _incompatible(
            f"{where} ({server}) is older than this client: it serves API {v.api} {rev}; "
            + _client_says() + ": upgrade composebox serve", v, status)
    return v


def parse_exec_event(line: bytes) -> ExecEvent:
    """One NDJSON line of a streamed exec; an error event raises its error."""
    d = json.loads(line)
    typ = d.get("type")
    if typ in ("stdout", "stderr"):
        return ExecEvent(type=typ, data=base64.b64decode(d.get("data") or ""))
    if typ == "exit":
        return ExecEvent(type="exit", result=ExecResult.from_json(d, stdout=b"", stderr=b""))
    if typ == "error":
        e = d.get("error") or {}
        raise make_error(e.get("kind", "internal"), e.get("message", "exec stream failed"),
                         detail=e.get("detail") if isinstance(e.get("detail"), dict) else None)
    raise ComposeboxError(f"exec stream: unknown event type {typ!r}")


def logs_params(follow: bool, tail: Optional[int], since: Any, timestamps: bool) -> Dict[str, Any]:
    """Query of a logs request. ``since`` is a datetime (naive means local time) or an RFC 3339
    string; ``tail`` the number of last lines (None: all)."""
    params: Dict[str, Any] = {}
    if follow:
        params["follow"] = "true"
    if timestamps:
        params["timestamps"] = "true"
    if tail is not None:
        if tail < 0:
            raise ValueError(f"logs: tail must be 0 or more, got {tail}")
        params["tail"] = int(tail)
    if since is not None:
        if isinstance(since, datetime.datetime):
            since = since.astimezone(datetime.timezone.utc).isoformat()
        params["since"] = str(since)
    return params


def parse_log_event(line: bytes) -> Optional[ExecEvent]:
    """One NDJSON line of a logs stream: a chunk, or None at its end; an error event raises."""
    d = json.loads(line)
    if d.get("type") == "end":
        return None
    return parse_exec_event(line)


# The server's largest file read: its default and maximum limit.
SERVER_READ_LIMIT = 100 * 1024 ** 2


def read_params(path: str, limit: Optional[int]) -> Dict[str, Any]:
    """Query of a file read. The server answers output_limit when a file passes the limit
    within the body's first 64 KiB, and past that cuts the connection once it has sent
    ``limit`` bytes; the client counts the bytes too (LimitCounter, cut_short), so both cases
    are OutputLimitExceeded."""
    if limit is not None and limit <= 0:
        raise ValueError(f"read {path}: limit must be positive, got {limit}")
    params: Dict[str, Any] = {"path": path}
    if limit is not None:
        params["limit"] = min(int(limit), SERVER_READ_LIMIT)
    return params


class LimitCounter:
    """Counts a streamed body's bytes and raises OutputLimitExceeded past the limit."""

    def __init__(self, what: str, limit: Optional[int]) -> None:
        self.what = what
        self.limit = limit
        self.n = 0

    def add(self, n: int) -> None:
        self.n += n
        if self.limit is not None and self.n > self.limit:
            raise OutputLimitExceeded(f"{self.what}: larger than the {self.limit} byte limit")


def cut_short(what: str, err: BaseException) -> ComposeboxError:
    """The error of a body the server cut: it does so only when the file grew past its limit
    (100 MiB) after the first byte was sent, or when it stopped."""
    return OutputLimitExceeded(f"{what}: the server cut the transfer: the file is larger than "
                               f"its {SERVER_READ_LIMIT} byte limit (or the server stopped): {err}")


class SpawnedServer:
    """A private ``composebox serve`` on a private socket, owned by one client."""

    def __init__(self, binary: Optional[str] = None, args: Optional[List[str]] = None,
                 env: Optional[Mapping[str, str]] = None) -> None:
        self.binary = find_binary(binary)
        self.dir = tempfile.mkdtemp(prefix="composebox-py-")
        self.socket = os.path.join(self.dir, "api.sock")
        self.log_path = os.path.join(self.dir, "serve.log")
        self._log = open(self.log_path, "wb")
        # The server stops when its stdin pipe closes, so it goes with this process however
        # this process ends (even SIGKILL), and removes what it owns.
        cmd = [self.binary, "serve", "--socket", self.socket, "--stop-on-stdin-eof"] + list(args or [])
        proc_env = dict(os.environ)
        if env:
            proc_env.update(env)
        try:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=self._log,
                                         stderr=subprocess.STDOUT, env=proc_env,
                                         start_new_session=True)
        except OSError as e:
            self._log.close()
            shutil.rmtree(self.dir, ignore_errors=True)
            raise PrerequisiteError(f"spawn composebox serve: {e}") from e
        # A client that is never closed still stops its server when the interpreter exits
        # (the server then removes what it owns); a killed interpreter closes the pipe.
        atexit.register(self.stop)

    def log_tail(self, n: int = 2000) -> str:
        try:
            with open(self.log_path, "rb") as f:
                data = f.read()
        except OSError:
            return ""
        return data[-n:].decode("utf-8", errors="replace").strip()

    def check_alive(self) -> None:
        code = self.proc.poll()
        if code is not None:
            raise PrerequisiteError(
                f"spawn composebox serve: it exited with status {code} before it answered: "
                + (self.log_tail() or "(no output)"))

    def socket_ready(self) -> bool:
        return os.path.exists(self.socket)

    def stop(self, timeout: float = 60.0) -> None:
        """SIGTERM (the server drains and removes what it owns), then wait; SIGKILL past the
        deadline."""
        atexit.unregister(self.stop)
        try:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGTERM)
                try:
                    self.proc.wait(timeout)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait(10)
        finally:
            if self.proc.stdin is not None and not self.proc.stdin.closed:
                self.proc.stdin.close()
            if not self._log.closed:
                self._log.close()
            shutil.rmtree(self.dir, ignore_errors=True)


# How long a request may wait out busy answers (the lease runs as many requests as the server
# allows) before the client gives up and raises Busy; Client(busy_timeout=...) changes it.
BUSY_TIMEOUT = 600.0
BUSY_FIRST_WAIT = 0.05
BUSY_MAX_WAIT = 2.0


def busy_delay(err: ComposeboxError, retry_after: Optional[str], attempt: int,
               deadline: float) -> Optional[float]:
    """How long to wait before sending a request again that the server answered with
    ``err``: None unless it is Busy and the deadline (monotonic) leaves time. The wait doubles
    from BUSY_FIRST_WAIT up to BUSY_MAX_WAIT, never shorter than the server's hint
    (detail.retry_after_seconds, else the Retry-After header), with jitter so that the
    requests that were turned away together do not all come back together."""
    if not isinstance(err, Busy):
        return None
    hint = err.detail.get("retry_after_seconds")
    if not isinstance(hint, (int, float)) or isinstance(hint, bool):
        try:
            hint = float(retry_after) if retry_after else 0.0
        except ValueError:
            hint = 0.0
    wait = max(float(hint), min(BUSY_MAX_WAIT, BUSY_FIRST_WAIT * (2 ** min(attempt, 10))))
    wait *= 1.0 + random.random() * 0.5
    left = deadline - time.monotonic()
    if left <= 0:
        return None
    return min(wait, left)


def replayable(content: Any) -> bool:
    """A request body that can be sent again: none, bytes, or text (not a stream)."""
    return content is None or isinstance(content, (bytes, bytearray, memoryview, str))


def deadline_passed(deadline: float) -> bool:
    return time.monotonic() >= deadline
