"""The asynchronous client (asyncio)."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any, AsyncIterator, Dict, List, Mapping, Optional, Union

import httpx

from . import _common as c
from . import tty
from .process import AsyncExecProcess
from .tty import AsyncTTYSession
from . import _uds
from .errors import ComposeboxError, SandboxUnavailable
from .types import (Connection, DoctorReport, EgressState, Event, ExecEvent, ExecResult, Lease, Sample,
                    SandboxInfo, Task, Version)

SampleRef = Union[Sample, str]


class AsyncExecStream:
    """A running streamed exec: ``async for`` it for :class:`ExecEvent` chunks. The last event is
    ``exit``; afterwards ``result`` holds the exit code and counters. A failure after the command
    started raises its error from the iteration. ``aclose()`` (or ``async with``) stops reading
    early, which kills the command."""

    def __init__(self, response: httpx.Response) -> None:
        self._response = response
        self.result: Optional[ExecResult] = None

    async def __aiter__(self) -> AsyncIterator[ExecEvent]:
        try:
            async for line in self._response.aiter_lines():
                if not line.strip():
                    continue
                ev = c.parse_exec_event(line.encode("utf-8") if isinstance(line, str) else line)
                if ev.type == "exit":
                    self.result = ev.result
                yield ev
                if ev.type == "exit":
                    return
        except httpx.TransportError as e:
            raise SandboxUnavailable(f"exec stream: connection to the server lost: {e}") from e
        finally:
            await self.aclose()
        if self.result is None:
            raise ComposeboxError("exec stream: the server ended the stream without an exit event")

    async def wait(self) -> ExecResult:
        """Consume the stream and return the result with the whole output (kept bytes only)."""
        out: List[bytes] = []
        err: List[bytes] = []
        async for ev in self:
            if ev.type == "stdout":
                out.append(ev.data)
            elif ev.type == "stderr":
                err.append(ev.data)
        assert self.result is not None
        r = self.result
        return ExecResult(exit_code=r.exit_code, stdout=b"".join(out), stderr=b"".join(err),
                          stdout_truncated=r.stdout_truncated, stderr_truncated=r.stderr_truncated,
                          stdout_bytes=r.stdout_bytes, stderr_bytes=r.stderr_bytes,
                          duration=r.duration)

    async def aclose(self) -> None:
        await self._response.aclose()

    async def __aenter__(self) -> "AsyncExecStream":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()


class AsyncClient:
    """The asyncio counterpart of :class:`composebox.Client`: the same methods, awaited.

    ``async with AsyncClient() as client`` (default socket, $COMPOSEBOX_SOCKET or
    $COMPOSEBOX_URL), ``AsyncClient(socket=...)``, ``AsyncClient(url=..., token=...)``, or
    ``async with AsyncClient.spawn() as client`` for a private server stopped on close. The lease
    heartbeat is an asyncio task of the loop the lease was opened on.
    """

    def __init__(self, socket: Optional[str] = None, *, url: Optional[str] = None,
                 token: Optional[str] = None, token_file: Optional[str] = None,
                 lease_ttl: Optional[float] = None, connect_timeout: float = 10.0,
                 busy_timeout: float = c.BUSY_TIMEOUT) -> None:
        self._endpoint_args = dict(socket=socket, url=url, token=token, token_file=token_file)
        #: As :attr:`composebox.Client.busy_timeout` and ``busy_retries``.
        self.busy_timeout = busy_timeout
        self.busy_retries = 0
        self._connect_timeout = connect_timeout
        self._lease_ttl = lease_ttl
        self._http: Optional[httpx.AsyncClient] = None
        self._beat_http: Optional[httpx.AsyncClient] = None
        self._lease: Optional[Lease] = None
        self._lease_lock: Optional[asyncio.Lock] = None
        self._heartbeat: Optional["asyncio.Task[None]"] = None
        self.heartbeat_error: Optional[BaseException] = None
        self.heartbeats = 0
        self._server: Optional[c.SpawnedServer] = None
        self._spawn_args: Optional[Dict[str, Any]] = None
        self._defaults: Dict[str, str] = {}
        self._server_version: Optional[Version] = None
        self._closed = False

    # -- construction and lifetime ---------------------------------------------------------

    @classmethod
    def spawn(cls, binary: Optional[str] = None, *, args: Optional[List[str]] = None,
              env: Optional[Mapping[str, str]] = None, start_timeout: float = 60.0,
              lease_ttl: Optional[float] = None) -> "AsyncClient":
        """A client of a private ``composebox serve`` (``binary``, else $COMPOSEBOX_BIN, else
        ``composebox`` on PATH), started by ``async with`` or ``await client.open()`` and
        stopped (SIGTERM) by closing the client."""
        client = cls(lease_ttl=lease_ttl)
        client._spawn_args = dict(binary=binary, args=args, env=env, start_timeout=start_timeout)
        return client

    async def open(self) -> "AsyncClient":
        """Connect (starting the spawned server first, if any) and check the server answers."""
        if self._http is not None:
            return self
        endpoint_args = dict(self._endpoint_args)
        if self._spawn_args is not None:
            sa = self._spawn_args
            server = c.SpawnedServer(sa["binary"], args=sa["args"], env=sa["env"])
            try:
                deadline = time.monotonic() + sa["start_timeout"]
                while not server.socket_ready():
                    server.check_alive()
                    if c.deadline_passed(deadline):
                        raise ComposeboxError("spawn composebox serve: no socket after "
                                              f"{sa['start_timeout']:.0f} s: " + server.log_tail())
                    await asyncio.sleep(0.02)
            except BaseException:
                await asyncio.get_running_loop().run_in_executor(None, server.stop)
                raise
            self._server = server
            endpoint_args = dict(socket=server.socket)
        self._endpoint = c.Endpoint(**endpoint_args)
        transport = None
        if self._endpoint.socket:
            transport = httpx.AsyncHTTPTransport(uds=self._endpoint.socket)
            _uds.fix_unix_writes(transport)
        self._http = httpx.AsyncClient(base_url=self._endpoint.base_url, transport=transport,
                                       headers=self._endpoint.headers(),
                                       timeout=httpx.Timeout(None, connect=self._connect_timeout))
        # Heartbeats have connections of their own (see composebox.Client): in the shared pool
        # they would wait behind the lease's requests, and the lease would lapse under load.
        beat_transport = None
        if self._endpoint.socket:
            beat_transport = httpx.AsyncHTTPTransport(uds=self._endpoint.socket)
            _uds.fix_unix_writes(beat_transport)
        self._beat_http = httpx.AsyncClient(base_url=self._endpoint.base_url,
                                            transport=beat_transport,
                                            headers=self._endpoint.headers(),
                                            timeout=httpx.Timeout(None, connect=self._connect_timeout))
        try:
            await self.check_server()
        except BaseException:
            await self.aclose()
            raise
        return self

    @property
    def server_log(self) -> str:
        return self._server.log_tail(1 << 20) if self._server else ""

    async def aclose(self) -> None:
        """Stop the heartbeat, close the lease (the server removes its tasks and samples), and
        stop a spawned server."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._heartbeat is not None:
                self._heartbeat.cancel()
                try:
                    await self._heartbeat
                except asyncio.CancelledError:
                    pass
            if self._lease is not None and self._http is not None:
                try:
                    await self._request("DELETE", c.lease_path(self._lease.id),
                                        what="close lease")
                except ComposeboxError:
                    pass
        finally:
            if self._http is not None:
                await self._http.aclose()
            if self._beat_http is not None:
                await self._beat_http.aclose()
            if self._server is not None:
                server, self._server = self._server, None
                await asyncio.get_running_loop().run_in_executor(None, server.stop)

    async def __aenter__(self) -> "AsyncClient":
        return await self.open()

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    # -- plumbing --------------------------------------------------------------------------

    def _client(self) -> httpx.AsyncClient:
        if self._http is None:
            raise ComposeboxError("composebox AsyncClient: not open (use `async with` or "
                                  "`await client.open()`)")
        return self._http

    async def _raise_for(self, response: httpx.Response, what: str) -> None:
        if response.status_code >= 400:
            await response.aread()
            raise c.decode_error_response(response.status_code, response.content, what)

    def _unreachable(self, what: str, err: Exception) -> SandboxUnavailable:
        return SandboxUnavailable(f"{what}: cannot reach composebox serve at "
                                  f"{self._endpoint.describe()}: {err}")

    async def check_server(self) -> Version:
        """The server's version, asked once (``open`` does). Raises
        :class:`~composebox.errors.IncompatibleServer` when the server speaks another API, or
        an older revision of it than this client needs."""
        if self._server_version is None:
            try:
                r = await self._client().get(c.VERSION_PATH)
            except httpx.TransportError as e:
                raise self._unreachable("version", e) from e
            self._server_version = c.check_version(
                r.status_code, r.content, "the server at " + self._endpoint.describe())
        return self._server_version

    async def _request(self, method: str, path: str, *, what: str, json_body: Any = None,
                       params: Optional[Dict[str, Any]] = None, lease: bool = False,
                       content: Any = None,
                       headers: Optional[Dict[str, str]] = None) -> httpx.Response:
        http = self._client()
        h = dict(headers or {})
        if lease:
            h[c.LEASE_HEADER] = (await self.lease()).id
        elif self._lease is not None:
            # Tasks and samples belong to the lease that made them: the server answers
            # not_found to a request that does not name it.
            h[c.LEASE_HEADER] = self._lease.id

        async def send() -> httpx.Response:
            try:
                return await http.request(method, path, json=json_body, params=params,
                                          content=content, headers=h)
            except httpx.TransportError as e:
                raise self._unreachable(what, e) from e

        r = await self._retry_busy(send, what, c.replayable(content))
        await self._raise_for(r, what)
        return r

    async def _retry_busy(self, send: Any, what: str, replayable: bool) -> httpx.Response:
        """As :meth:`composebox.Client._retry_busy`, awaited."""
        deadline = time.monotonic() + self.busy_timeout
        attempt = 0
        while True:
            r = await send()
            if r.status_code != 429 or not replayable:
                return r
            await r.aread()
            await r.aclose()
            err = c.decode_error_response(r.status_code, r.content, what)
            delay = c.busy_delay(err, r.headers.get("retry-after"), attempt, deadline)
            if delay is None:
                raise err
            await asyncio.sleep(delay)
            attempt += 1
            self.busy_retries += 1

    async def _send_stream(self, method: str, path: str, *, what: str, params: Any = None,
                           content: Any = None, headers: Optional[Dict[str, str]] = None,
                           content_fn: Any = None) -> httpx.Response:
        http = self._client()
        h = dict(headers or {})
        if self._lease is not None:
            h[c.LEASE_HEADER] = self._lease.id

        async def send() -> httpx.Response:
            body = content_fn() if content_fn is not None else content
            req = http.build_request(method, path, params=params, content=body, headers=h)
            try:
                return await http.send(req, stream=True)
            except httpx.TransportError as e:
                raise self._unreachable(what, e) from e

        r = await self._retry_busy(send, what, content_fn is not None or c.replayable(content))
        try:
            await self._raise_for(r, what)
        except BaseException:
            await r.aclose()
            raise
        return r

    async def _beat(self, lease: Lease) -> None:
        interval = max(0.2, lease.ttl_seconds / 3.0)
        while True:
            await asyncio.sleep(interval)
            try:
                assert self._beat_http is not None
                try:
                    r = await self._beat_http.post(c.lease_path(lease.id, "heartbeat"),
                                                   headers={c.LEASE_HEADER: lease.id})
                except httpx.TransportError as e:
                    raise self._unreachable("heartbeat lease", e) from e
                await self._raise_for(r, "heartbeat lease")
                self.heartbeats += 1
                self.heartbeat_error = None
            except asyncio.CancelledError:
                raise
            except Exception as e:  # keep beating: a transient failure must not end the lease
                self.heartbeat_error = e

    async def lease(self) -> Lease:
        """The client's lease, opened (and its heartbeat task started) on first use."""
        if self._lease_lock is None:
            self._lease_lock = asyncio.Lock()
        async with self._lease_lock:
            if self._lease is None:
                body = {"ttl_seconds": self._lease_ttl} if self._lease_ttl else None
                r = await self._request("POST", f"{c.API}/leases", what="open lease", json_body=body)
                self._lease = Lease.from_json(r.json())
                self._heartbeat = asyncio.get_running_loop().create_task(self._beat(self._lease))
            return self._lease

    async def _service(self, sample: SampleRef, service: Optional[str]) -> str:
        if service:
            return service
        if isinstance(sample, Sample):
            return sample.default_service
        d = self._defaults.get(sample)
        if d is None:
            d = (await self.sample_get(sample)).default_service
        return d

    @staticmethod
    def _project(sample: SampleRef) -> str:
        return sample.project if isinstance(sample, Sample) else sample

    def _remember(self, s: Sample) -> Sample:
        self._defaults[s.project] = s.default_service
        return s

    # -- server ------------------------------------------------------------------------------

    async def version(self) -> Version:
        """The server's version, asked now (see also :meth:`check_server`)."""
        return Version.from_json((await self._request("GET", c.VERSION_PATH, what="version")).json())

    async def doctor(self) -> DoctorReport:
        return DoctorReport.from_json((await self._request("GET", f"{c.API}/doctor", what="doctor")).json())

    async def openapi(self) -> Dict[str, Any]:
        return (await self._request("GET", f"{c.API}/openapi.json", what="openapi")).json()

    async def events(self) -> AsyncIterator[Event]:
        """Lifecycle events of this client's tasks and samples from now on (await this method,
        then ``async for``). The server streams a lease its own events only: this opens the
        client's lease if it has none yet."""
        await self.lease()
        r = await self._send_stream("GET", f"{c.API}/events", what="events")
        return _aiter_events(r)

    # -- tasks -------------------------------------------------------------------------------

    async def task_init(self, *, name: Optional[str] = None, compose_yaml: Optional[str] = None,
                        path: Optional[c.StrPath] = None,
                        files: Optional[List[c.StrPath]] = None,
                        working_dir: Optional[str] = None, env: Optional[Mapping[str, str]] = None,
                        pass_env: Optional[List[str]] = None,
                        profiles: Optional[List[str]] = None,
                        policy: Optional[Mapping[str, Any]] = None,
                        default_service: Optional[str] = None, agent_image: Optional[str] = None,
                        image_overrides: Optional[Mapping[str, str]] = None,
                        prebuilt: bool = False, ready_timeout: Optional[float] = None,
                        warm: int = 0) -> Task:
        """Initialise a task (see :meth:`composebox.Client.task_init` for the arguments)."""
        body = c.task_request(name=name, compose_yaml=compose_yaml, path=path, files=files,
                              working_dir=working_dir, env=env, pass_env=pass_env,
                              profiles=profiles, policy=policy, default_service=default_service,
                              agent_image=agent_image, image_overrides=image_overrides,
                              prebuilt=prebuilt, ready_timeout=ready_timeout, warm=warm)
        r = await self._request("POST", f"{c.API}/tasks", what="task init", json_body=body, lease=True)
        return Task.from_json(r.json())

    async def task_get(self, task: Union[Task, str]) -> Task:
        tid = task.id if isinstance(task, Task) else task
        return Task.from_json((await self._request("GET", c.task_path(tid), what="task get")).json())

    async def task_list(self) -> List[Task]:
        r = await self._request("GET", f"{c.API}/tasks", what="task list", lease=True)
        return [Task.from_json(t) for t in r.json().get("tasks") or []]

    async def task_cleanup(self, task: Union[Task, str]) -> None:
        tid = task.id if isinstance(task, Task) else task
        await self._request("DELETE", c.task_path(tid), what="task cleanup")

    # -- samples -----------------------------------------------------------------------------

    async def sample_init(self, task: Union[Task, str], *, id: Optional[str] = None,
                          metadata: Optional[Mapping[str, Any]] = None,
                          ready_timeout: Optional[float] = None) -> Sample:
        tid = task.id if isinstance(task, Task) else task
        body = c.sample_request(id=id, metadata=metadata, ready_timeout=ready_timeout)
        r = await self._request("POST", c.task_path(tid, "samples"), what="sample init",
                                json_body=body, lease=True)
        return self._remember(Sample.from_json(r.json()))

    async def sample_get(self, sample: SampleRef) -> Sample:
        r = await self._request("GET", c.sample_path(self._project(sample)), what="sample get")
        return self._remember(Sample.from_json(r.json()))

    async def sample_list(self, task: Union[Task, str, None] = None) -> List[Sample]:
        params = {}
        if task is not None:
            params["task"] = task.id if isinstance(task, Task) else task
        r = await self._request("GET", f"{c.API}/samples", what="sample list", params=params, lease=True)
        return [Sample.from_json(s) for s in r.json().get("samples") or []]

    async def sample_cleanup(self, sample: SampleRef) -> None:
        project = self._project(sample)
        await self._request("DELETE", c.sample_path(project), what="sample cleanup")
        self._defaults.pop(project, None)

    async def sample_detach(self, sample: SampleRef) -> Sample:
        r = await self._request("POST", c.sample_path(self._project(sample), "detach"),
                                what="sample detach")
        return Sample.from_json(r.json())

    async def sample_fork(self, sample: SampleRef, n: int = 1) -> List[Sample]:
        r = await self._request("POST", c.sample_path(self._project(sample), "fork"),
                                what="sample fork", json_body={"n": n})
        return [self._remember(Sample.from_json(s)) for s in r.json().get("forks") or []]

    async def sample_snapshot(self, sample: SampleRef, name: str) -> str:
        r = await self._request("POST", c.sample_path(self._project(sample), "snapshots"),
                                what="sample snapshot", json_body={"name": name})
        return str(r.json().get("name") or name)

    async def sample_reset(self, sample: SampleRef, name: str) -> Sample:
        r = await self._request("POST", c.sample_path(self._project(sample), "reset"),
                                what="sample reset", json_body={"name": name})
        return self._remember(Sample.from_json(r.json()))

    async def sample_egress(self, sample: SampleRef) -> EgressState:
        """The sample's egress allowlist and the lookups and connections its gateway refused
        (each also an ``egress_denied`` event of :meth:`events`). NotFound for a sample started
        without an allowlist."""
        c.check_egress_revision(await self.check_server(), "the server at " + self._endpoint.describe())
        r = await self._request("GET", c.sample_path(self._project(sample), "egress"), what="sample egress")
        return EgressState.from_json(r.json())

    async def sample_set_egress(self, sample: SampleRef, allow: List[str]) -> EgressState:
        """Replace the egress allowlist (NAME[:PORT]) of every service of a live sample; ``[]``
        closes it (a runner opens a package index for setup and closes it for the agent). A
        name beyond the server's ``--egress`` raises PolicyViolation naming the flag."""
        body = c.egress_request(allow)
        c.check_egress_revision(await self.check_server(), "the server at " + self._endpoint.describe())
        r = await self._request("PUT", c.sample_path(self._project(sample), "egress"),
                                what="sample set egress", json_body=body)
        return EgressState.from_json(r.json())

    async def sandboxes(self, sample: SampleRef) -> List[SandboxInfo]:
        r = await self._request("GET", c.sample_path(self._project(sample), "sandboxes"),
                                what="sandboxes")
        return [SandboxInfo.from_json(s) for s in r.json().get("sandboxes") or []]

    # -- exec --------------------------------------------------------------------------------

    async def exec(self, sample: SampleRef, cmd: List[str], *, service: Optional[str] = None,
                   input: Optional[Union[bytes, str]] = None, cwd: Optional[str] = None,
                   env: Optional[Mapping[str, str]] = None, user: Optional[str] = None,
                   timeout: Optional[float] = None, output_limit: Optional[int] = None,
                   strict_limit: bool = False) -> ExecResult:
        svc = await self._service(sample, service)
        body = c.with_input(c.exec_request(cmd, cwd=cwd, env=env, user=user, timeout=timeout,
                                           output_limit=output_limit, strict_limit=strict_limit),
                            input)
        r = await self._request("POST", c.sandbox_path(self._project(sample), svc, "exec"),
                                what=f"exec in {svc}", json_body=body)
        return ExecResult.from_json(r.json())

    async def exec_stream(self, sample: SampleRef, cmd: List[str], *,
                          service: Optional[str] = None, input: Optional[c.AsyncData] = None,
                          cwd: Optional[str] = None, env: Optional[Mapping[str, str]] = None,
                          user: Optional[str] = None, timeout: Optional[float] = None,
                          output_limit: Optional[int] = None,
                          strict_limit: bool = False) -> AsyncExecStream:
        svc = await self._service(sample, service)
        head = c.stream_request_head(c.exec_request(
            cmd, cwd=cwd, env=env, user=user, timeout=timeout, output_limit=output_limit,
            strict_limit=strict_limit))

        async def content() -> AsyncIterator[bytes]:
            yield head
            if input is not None:
                async for chunk in c.async_chunks(input):
                    yield chunk

        # A busy answer is retried when stdin can be sent twice (none, bytes or text).
        again = c.replayable(input)
        r = await self._send_stream("POST", c.sandbox_path(self._project(sample), svc, "exec", "stream"),
                                    what=f"exec stream in {svc}",
                                    content_fn=content if again else None,
                                    content=None if again else content(),
                                    headers={"Content-Type": "application/octet-stream"})
        return AsyncExecStream(r)

    async def exec_process(self, sample: SampleRef, cmd: List[str], *,
                           service: Optional[str] = None,
                           input: Optional[Union[bytes, str]] = None, stdin_open: bool = False,
                           cwd: Optional[str] = None, env: Optional[Mapping[str, str]] = None,
                           user: Optional[str] = None, timeout: Optional[float] = None,
                           output_limit: Optional[int] = None) -> AsyncExecProcess:
        """Start ``cmd`` and return an :class:`~composebox.process.AsyncExecProcess` to talk to
        it as it runs: its output as it comes (``async for``), ``write_stdin``, ``close_stdin``
        and ``kill``. ``input`` is written to stdin first; with ``stdin_open`` stdin stays open
        for ``write_stdin`` until ``close_stdin``, else it ends after ``input``. The process
        has its own connection to the server (see :mod:`composebox.process`)."""
        svc = await self._service(sample, service)
        await self.check_server()
        body = c.exec_request(cmd, cwd=cwd, env=env, user=user, timeout=timeout,
                              output_limit=output_limit)
        return await AsyncExecProcess._start(
            self._endpoint, c.sandbox_path(self._project(sample), svc, "exec", "stream"),
            self._lease.id if self._lease is not None else None, body, input, stdin_open,
            f"exec in {svc}", self._connect_timeout, self.busy_timeout)

    async def exec_tty(self, sample: SampleRef, cmd: List[str], *, service: Optional[str] = None,
                       cwd: Optional[str] = None, env: Optional[Mapping[str, str]] = None,
                       user: Optional[str] = None, timeout: Optional[float] = None,
                       rows: int = 24, cols: int = 80) -> AsyncTTYSession:
        """As :meth:`composebox.Client.exec_tty`, for asyncio."""
        svc = await self._service(sample, service)
        body = tty.tty_request(cmd, cwd=cwd, env=env, user=user, timeout=timeout, rows=rows, cols=cols)
        tty.check_revision(await self.check_server(), "the server at " + self._endpoint.describe())
        return await AsyncTTYSession._open(
            self._endpoint, c.sandbox_path(self._project(sample), svc, "exec", "tty"),
            self._lease.id if self._lease is not None else None, body, f"exec tty in {svc}",
            self._connect_timeout)

    # -- files -------------------------------------------------------------------------------

    async def read_file_stream(self, sample: SampleRef, path: str, *,
                               service: Optional[str] = None, limit: Optional[int] = None,
                               chunk_size: int = c.CHUNK) -> AsyncIterator[bytes]:
        """The file's bytes as an async iterator of chunks (await this method first)."""
        svc = await self._service(sample, service)
        what = f"read {path} in {svc}"
        r = await self._send_stream("GET", c.sandbox_path(self._project(sample), svc, "files"),
                                    what=what, params=c.read_params(path, limit))
        return _aiter_body(r, chunk_size, what, limit)

    async def read_file(self, sample: SampleRef, path: str, *, service: Optional[str] = None,
                        limit: Optional[int] = None) -> bytes:
        parts = []
        async for chunk in await self.read_file_stream(sample, path, service=service, limit=limit):
            parts.append(chunk)
        return b"".join(parts)

    async def read_text(self, sample: SampleRef, path: str, *, service: Optional[str] = None,
                        limit: Optional[int] = None) -> str:
        """The file as UTF-8 text (UnicodeDecodeError when it is not), newlines kept."""
        return (await self.read_file(sample, path, service=service,
                                     limit=limit)).decode("utf-8")

    async def write_file(self, sample: SampleRef, path: str, data: c.AsyncData, *,
                         service: Optional[str] = None) -> None:
        svc = await self._service(sample, service)
        content = c.to_bytes(data) if isinstance(data, (bytes, bytearray, memoryview, str)) \
            else c.async_chunks(data)
        await self._request("PUT", c.sandbox_path(self._project(sample), svc, "files"),
                            what=f"write {path} in {svc}", params={"path": path}, content=content,
                            headers={"Content-Type": "application/octet-stream"})

    async def read_dir_tar(self, sample: SampleRef, path: str, *,
                           service: Optional[str] = None) -> AsyncIterator[bytes]:
        svc = await self._service(sample, service)
        r = await self._send_stream("GET", c.sandbox_path(self._project(sample), svc, "dirs"),
                                    what=f"read dir {path} in {svc}", params={"path": path})
        return _aiter_body(r, c.CHUNK, f"read dir {path} in {svc}", None)

    async def write_dir_tar(self, sample: SampleRef, path: str, tar: c.AsyncData, *,
                            service: Optional[str] = None) -> None:
        svc = await self._service(sample, service)
        content = c.to_bytes(tar) if isinstance(tar, (bytes, bytearray, memoryview)) \
            else c.async_chunks(tar)
        await self._request("PUT", c.sandbox_path(self._project(sample), svc, "dirs"),
                            what=f"write dir {path} in {svc}", params={"path": path},
                            content=content, headers={"Content-Type": "application/x-tar"})

    async def logs(self, sample: SampleRef, *, service: Optional[str] = None, follow: bool = False,
                   tail: Optional[int] = None, since: Any = None,
                   timestamps: bool = False) -> AsyncIterator[ExecEvent]:
        """As :meth:`composebox.Client.logs`: ``async for`` the chunks it returns."""
        svc = await self._service(sample, service)
        what = f"logs of {svc}"
        r = await self._send_stream("GET", c.sandbox_path(self._project(sample), svc, "logs"),
                                    what=what, params=c.logs_params(follow, tail, since, timestamps))
        return _aiter_logs(r, what)

    async def connection(self, sample: SampleRef, *, service: Optional[str] = None) -> Connection:
        svc = await self._service(sample, service)
        r = await self._request("GET", c.sandbox_path(self._project(sample), svc, "connection"),
                                what=f"connection to {svc}")
        return Connection.from_json(r.json())


async def _aiter_body(r: httpx.Response, chunk_size: int, what: str,
                      limit: Optional[int]) -> AsyncIterator[bytes]:
    counter = c.LimitCounter(what, limit)
    try:
        async for chunk in r.aiter_bytes(chunk_size):
            counter.add(len(chunk))
            yield chunk
    except httpx.TransportError as e:
        raise c.cut_short(what, e) from e
    finally:
        await r.aclose()


async def _aiter_logs(r: httpx.Response, what: str) -> AsyncIterator[ExecEvent]:
    try:
        async for line in r.aiter_lines():
            if not line.strip():
                continue
            ev = c.parse_log_event(line.encode("utf-8") if isinstance(line, str) else line)
            if ev is None:
                return
            yield ev
    except httpx.TransportError as e:
        raise SandboxUnavailable(f"{what}: connection to the server lost: {e}") from e
    finally:
        await r.aclose()


async def _aiter_events(r: httpx.Response) -> AsyncIterator[Event]:
    try:
        async for line in r.aiter_lines():
            if line.strip():
                yield Event.from_json(json.loads(line))
    finally:
        await r.aclose()
