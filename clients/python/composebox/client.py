"""The synchronous client."""

from __future__ import annotations

import itertools
import json
import threading
import time
from typing import Any, Dict, Iterator, List, Mapping, Optional, Union

import httpx

from . import _common as c
from . import tty
from .tty import TTYSession
from .errors import ComposeboxError, SandboxUnavailable
from .types import (Connection, DoctorReport, EgressState, Event, ExecEvent, ExecResult, Lease, Sample,
                    SandboxInfo, Task, Version)

SampleRef = Union[Sample, str]


class ExecStream:
    """A running streamed exec: iterate it for :class:`ExecEvent` chunks as the command writes
    them. The last event is ``exit``; afterwards ``result`` holds the exit code and counters. A
    failure after the command started (timeout, strict output limit, lost container) raises its
    error from the iteration. Close it (or use ``with``) to stop reading early, which kills the
    command."""

    def __init__(self, response: httpx.Response) -> None:
        self._response = response
        self.result: Optional[ExecResult] = None

    def __iter__(self) -> Iterator[ExecEvent]:
        try:
            for line in self._response.iter_lines():
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
            self.close()
        if self.result is None:
            raise ComposeboxError("exec stream: the server ended the stream without an exit event")

    def wait(self) -> ExecResult:
        """Consume the stream and return the result with the whole output (kept bytes only)."""
        out: List[bytes] = []
        err: List[bytes] = []
        for ev in self:
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

    def close(self) -> None:
        self._response.close()

    def __enter__(self) -> "ExecStream":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class _Heartbeat:
    """Keeps a lease alive from a daemon thread until stopped."""

    def __init__(self, client: "Client", lease: Lease) -> None:
        self._client = client
        self._lease = lease
        self._stop = threading.Event()
        self.error: Optional[BaseException] = None
        self.beats = 0
        self._thread = threading.Thread(target=self._run, name="composebox-heartbeat", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        interval = max(0.2, self._lease.ttl_seconds / 3.0)
        while not self._stop.wait(interval):
            try:
                self._client._heartbeat_once(self._lease.id)
                self.beats += 1
                self.error = None
            except BaseException as e:  # keep beating: a transient failure must not end the lease
                self.error = e

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)


class Client:
    """A client of ``composebox serve``.

    ``Client()`` talks to the default socket (or $COMPOSEBOX_SOCKET, or $COMPOSEBOX_URL with
    $COMPOSEBOX_TOKEN/$COMPOSEBOX_TOKEN_FILE); ``Client(socket=...)`` or
    ``Client(url="http://127.0.0.1:PORT", token=...)`` name a server; ``Client.spawn()`` starts a
    private server and stops it on close. Tasks and samples created through the client belong to
    its lease, which a background thread heartbeats; closing the client closes the lease, which
    removes them.
    """

    def __init__(self, socket: Optional[str] = None, *, url: Optional[str] = None,
                 token: Optional[str] = None, token_file: Optional[str] = None,
                 lease_ttl: Optional[float] = None, connect_timeout: float = 10.0,
                 busy_timeout: float = c.BUSY_TIMEOUT) -> None:
        self._endpoint = c.Endpoint(socket=socket, url=url, token=token, token_file=token_file)
        transport = httpx.HTTPTransport(uds=self._endpoint.socket) if self._endpoint.socket else None
        # No read timeout: an exec or a sample init takes as long as it takes; the server
        # enforces the timeouts a caller asks for.
        self._http = httpx.Client(base_url=self._endpoint.base_url, transport=transport,
                                  headers=self._endpoint.headers(),
                                  timeout=httpx.Timeout(None, connect=connect_timeout))
        # Heartbeats have connections of their own: in the shared pool they would wait behind
        # the lease's requests (hundreds of execs at once fill it), and a lease whose heartbeat
        # waits past its TTL lapses, taking its samples with it.
        self._beat_http = httpx.Client(
            base_url=self._endpoint.base_url,
            transport=httpx.HTTPTransport(uds=self._endpoint.socket) if self._endpoint.socket else None,
            headers=self._endpoint.headers(), timeout=httpx.Timeout(None, connect=connect_timeout))
        self._connect_timeout = connect_timeout
        self._lease_ttl = lease_ttl
        self._lease: Optional[Lease] = None
        self._lease_lock = threading.Lock()
        self._heartbeat: Optional[_Heartbeat] = None
        self._server: Optional[c.SpawnedServer] = None
        self._defaults: Dict[str, str] = {}
        self._server_version: Optional[Version] = None
        self._closed = False
        #: How long one request waits out ``busy`` answers (its lease already runs as many
        #: requests as the server allows) before it raises Busy; ``busy_retries`` counts the
        #: requests sent again.
        self.busy_timeout = busy_timeout
        self.busy_retries = 0

    # -- construction and lifetime ---------------------------------------------------------

    @classmethod
    def spawn(cls, binary: Optional[str] = None, *, args: Optional[List[str]] = None,
              env: Optional[Mapping[str, str]] = None, start_timeout: float = 60.0,
              lease_ttl: Optional[float] = None) -> "Client":
        """Start a private ``composebox serve`` (``binary``, else $COMPOSEBOX_BIN, else
        ``composebox`` on PATH) on a socket in a private directory, and return a client of it.
        Closing the client stops the server (SIGTERM, which removes what it still owns)."""
        server = c.SpawnedServer(binary, args=args, env=env)
        client = None
        try:
            deadline = time.monotonic() + start_timeout
            while not server.socket_ready():
                server.check_alive()
                if c.deadline_passed(deadline):
                    raise ComposeboxError(f"spawn composebox serve: no socket after {start_timeout:.0f} s: "
                                          + server.log_tail())
                time.sleep(0.02)
            client = cls(socket=server.socket, lease_ttl=lease_ttl)
            client._server = server
            client.check_server()
            return client
        except BaseException:
            if client is not None:
                client._server = None
                client.close()
            server.stop()
            raise

    @property
    def server_log(self) -> str:
        """The spawned server's output so far ("" when the server was not spawned)."""
        return self._server.log_tail(1 << 20) if self._server else ""

    def close(self) -> None:
        """Stop the heartbeat, close the lease (the server removes its tasks and samples), and
        stop a spawned server."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._heartbeat is not None:
                self._heartbeat.stop()
            if self._lease is not None:
                try:
                    self._request("DELETE", c.lease_path(self._lease.id), what="close lease")
                except ComposeboxError:
                    pass
        finally:
            self._http.close()
            self._beat_http.close()
            if self._server is not None:
                self._server.stop()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- plumbing --------------------------------------------------------------------------

    def _raise_for(self, response: httpx.Response, what: str) -> None:
        if response.status_code >= 400:
            response.read()
            raise c.decode_error_response(response.status_code, response.content, what)

    def _unreachable(self, what: str, err: Exception) -> SandboxUnavailable:
        return SandboxUnavailable(f"{what}: cannot reach composebox serve at "
                                  f"{self._endpoint.describe()}: {err}")

    def check_server(self) -> Version:
        """The server's version, asked once: every other call asks first. Raises
        :class:`~composebox.errors.IncompatibleServer` when the server speaks another API, or
        an older revision of it than this client needs."""
        if self._server_version is None:
            try:
                r = self._http.get(c.VERSION_PATH)
            except httpx.TransportError as e:
                raise self._unreachable("version", e) from e
            self._server_version = c.check_version(
                r.status_code, r.content, "the server at " + self._endpoint.describe())
        return self._server_version

    def _request(self, method: str, path: str, *, what: str, json_body: Any = None,
                 params: Optional[Dict[str, Any]] = None, lease: bool = False,
                 content: Any = None, headers: Optional[Dict[str, str]] = None) -> httpx.Response:
        self.check_server()
        h = dict(headers or {})
        if lease:
            h[c.LEASE_HEADER] = self.lease().id
        elif self._lease is not None:
            # Tasks and samples belong to the lease that made them: the server answers
            # not_found to a request that does not name it.
            h[c.LEASE_HEADER] = self._lease.id

        def send() -> httpx.Response:
            try:
                return self._http.request(method, path, json=json_body, params=params,
                                          content=content, headers=h)
            except httpx.TransportError as e:
                raise self._unreachable(what, e) from e

        r = self._retry_busy(send, what, c.replayable(content))
        self._raise_for(r, what)
        return r

    def _retry_busy(self, send: Any, what: str, replayable: bool) -> httpx.Response:
        """send() again while the server answers busy (it has run nothing then), waiting as
        c.busy_delay says, up to busy_timeout. A body that cannot be sent twice is not."""
        deadline = time.monotonic() + self.busy_timeout
        attempt = 0
        while True:
            r = send()
            if r.status_code != 429 or not replayable:
                return r
            r.read()
            err = c.decode_error_response(r.status_code, r.content, what)
            delay = c.busy_delay(err, r.headers.get("retry-after"), attempt, deadline)
            if delay is None:
                r.close()
                raise err
            r.close()
            time.sleep(delay)
            attempt += 1
            self.busy_retries += 1

    def _send_stream(self, method: str, path: str, *, what: str, params: Any = None,
                     content: Any = None, headers: Optional[Dict[str, str]] = None,
                     content_fn: Any = None) -> httpx.Response:
        """A request whose answer is read as it streams. ``content_fn``, when given, makes a
        fresh body for each send (so that a busy answer can be retried)."""
        self.check_server()
        h = dict(headers or {})
        if self._lease is not None:
            h[c.LEASE_HEADER] = self._lease.id

        def send() -> httpx.Response:
            body = content_fn() if content_fn is not None else content
            req = self._http.build_request(method, path, params=params, content=body, headers=h)
            try:
                return self._http.send(req, stream=True)
            except httpx.TransportError as e:
                raise self._unreachable(what, e) from e

        r = self._retry_busy(send, what, content_fn is not None or c.replayable(content))
        try:
            self._raise_for(r, what)
        except BaseException:
            r.close()
            raise
        return r

    def _heartbeat_once(self, lease_id: str) -> None:
        try:
            r = self._beat_http.post(c.lease_path(lease_id, "heartbeat"),
                                     headers={c.LEASE_HEADER: lease_id})
        except httpx.TransportError as e:
            raise self._unreachable("heartbeat lease", e) from e
        self._raise_for(r, "heartbeat lease")

    def lease(self) -> Lease:
        """The client's lease, opened (and its heartbeat started) on first use."""
        with self._lease_lock:
            if self._lease is None:
                body = {"ttl_seconds": self._lease_ttl} if self._lease_ttl else None
                r = self._request("POST", f"{c.API}/leases", what="open lease", json_body=body)
                self._lease = Lease.from_json(r.json())
                self._heartbeat = _Heartbeat(self, self._lease)
            return self._lease

    def _service(self, sample: SampleRef, service: Optional[str]) -> str:
        if service:
            return service
        if isinstance(sample, Sample):
            return sample.default_service
        d = self._defaults.get(sample)
        if d is None:
            d = self.sample_get(sample).default_service
        return d

    @staticmethod
    def _project(sample: SampleRef) -> str:
        return sample.project if isinstance(sample, Sample) else sample

    def _remember(self, s: Sample) -> Sample:
        self._defaults[s.project] = s.default_service
        return s

    # -- server ------------------------------------------------------------------------------

    def version(self) -> Version:
        """The server's version, asked now (see also :meth:`check_server`)."""
        return Version.from_json(self._request("GET", c.VERSION_PATH, what="version").json())

    def doctor(self) -> DoctorReport:
        return DoctorReport.from_json(self._request("GET", f"{c.API}/doctor", what="doctor").json())

    def openapi(self) -> Dict[str, Any]:
        return self._request("GET", f"{c.API}/openapi.json", what="openapi").json()

    def events(self) -> Iterator[Event]:
        """Lifecycle events of this client's tasks and samples from now on, as they happen:
        the subscription starts when this returns. Close the iterator (or stop iterating and
        drop it) to end it. The server streams a lease its own events only: this opens the
        client's lease if it has none yet, and the stream ends with the lease."""
        self.lease()
        r = self._send_stream("GET", f"{c.API}/events", what="events")
        return _iter_events(r)

    # -- tasks -------------------------------------------------------------------------------

    def task_init(self, *, name: Optional[str] = None, compose_yaml: Optional[str] = None,
                  path: Optional[c.StrPath] = None, files: Optional[List[c.StrPath]] = None,
                  working_dir: Optional[str] = None, env: Optional[Mapping[str, str]] = None,
                  pass_env: Optional[List[str]] = None, profiles: Optional[List[str]] = None,
                  policy: Optional[Mapping[str, Any]] = None,
                  default_service: Optional[str] = None, agent_image: Optional[str] = None,
                  image_overrides: Optional[Mapping[str, str]] = None, prebuilt: bool = False,
                  ready_timeout: Optional[float] = None, warm: int = 0) -> Task:
        """Initialise a task: resolve its compose project, police it and build its images.

        Where the project comes from: ``compose_yaml`` (text) or ``path`` (a compose file, task
        directory or Dockerfile on the server's host); neither runs composebox's default image.
        ``name`` names the task in labels and project names. ``files``: more compose files
        merged on top (like ``-f``). ``working_dir``: the task directory of ``compose_yaml``
        (host paths must stay in it). ``env``: variables for interpolation; ``pass_env``: names
        of the server's own variables that interpolation may read. ``profiles``: compose
        profiles. ``policy``: the security policy's fields (see the server's Policy schema).
        ``default_service``: the agent's service. ``agent_image``: adds a service ``default`` on
        this image, attached to every network. ``image_overrides``: service -> image run
        instead of its own. ``prebuilt``: only check that every image exists, build nothing.
        ``ready_timeout``: seconds each sample may take to become ready. ``warm``: keep that
        many ready samples (a warm pool; ``sample_init`` takes one when there is one)."""
        body = c.task_request(name=name, compose_yaml=compose_yaml, path=path, files=files,
                              working_dir=working_dir, env=env, pass_env=pass_env,
                              profiles=profiles, policy=policy, default_service=default_service,
                              agent_image=agent_image, image_overrides=image_overrides,
                              prebuilt=prebuilt, ready_timeout=ready_timeout, warm=warm)
        r = self._request("POST", f"{c.API}/tasks", what="task init", json_body=body, lease=True)
        return Task.from_json(r.json())

    def task_get(self, task: Union[Task, str]) -> Task:
        tid = task.id if isinstance(task, Task) else task
        return Task.from_json(self._request("GET", c.task_path(tid), what="task get").json())

    def task_list(self) -> List[Task]:
        r = self._request("GET", f"{c.API}/tasks", what="task list", lease=True)
        return [Task.from_json(t) for t in r.json().get("tasks") or []]

    def task_cleanup(self, task: Union[Task, str]) -> None:
        """Remove every sample of the task (detached ones excepted) and forget it."""
        tid = task.id if isinstance(task, Task) else task
        self._request("DELETE", c.task_path(tid), what="task cleanup")

    # -- samples -----------------------------------------------------------------------------

    def sample_init(self, task: Union[Task, str], *, id: Optional[str] = None,
                    metadata: Optional[Mapping[str, Any]] = None,
                    ready_timeout: Optional[float] = None) -> Sample:
        """Start a sample of the task and wait until it is ready. ``metadata`` is interpolated
        as SAMPLE_METADATA_<KEY>."""
        tid = task.id if isinstance(task, Task) else task
        body = c.sample_request(id=id, metadata=metadata, ready_timeout=ready_timeout)
        r = self._request("POST", c.task_path(tid, "samples"), what="sample init",
                          json_body=body, lease=True)
        return self._remember(Sample.from_json(r.json()))

    def sample_get(self, sample: SampleRef) -> Sample:
        r = self._request("GET", c.sample_path(self._project(sample)), what="sample get")
        return self._remember(Sample.from_json(r.json()))

    def sample_list(self, task: Union[Task, str, None] = None) -> List[Sample]:
        params = {}
        if task is not None:
            params["task"] = task.id if isinstance(task, Task) else task
        r = self._request("GET", f"{c.API}/samples", what="sample list", params=params, lease=True)
        return [Sample.from_json(s) for s in r.json().get("samples") or []]

    def sample_cleanup(self, sample: SampleRef) -> None:
        """Remove the sample: its containers, networks and volumes."""
        project = self._project(sample)
        self._request("DELETE", c.sample_path(project), what="sample cleanup")
        self._defaults.pop(project, None)

    def sample_detach(self, sample: SampleRef) -> Sample:
        """Hand the sample over: no lease, task cleanup or server shutdown removes it any more."""
        r = self._request("POST", c.sample_path(self._project(sample), "detach"), what="sample detach")
        return Sample.from_json(r.json())

    def sample_fork(self, sample: SampleRef, n: int = 1) -> List[Sample]:
        """Start ``n`` copies of the sample at one moment: every service's files and named
        volumes, in networks of their own; processes start afresh. The forks are samples of
        this lease and the source's task. Raises Unsupported on a backend that cannot fork."""
        r = self._request("POST", c.sample_path(self._project(sample), "fork"), what="sample fork",
                          json_body={"n": n})
        return [self._remember(Sample.from_json(s)) for s in r.json().get("forks") or []]

    def sample_snapshot(self, sample: SampleRef, name: str) -> str:
        """Record the sample's files and named volumes under ``name`` (the sample is paused
        for the cut); returns the name. The snapshot goes with the sample."""
        r = self._request("POST", c.sample_path(self._project(sample), "snapshots"),
                          what="sample snapshot", json_body={"name": name})
        return str(r.json().get("name") or name)

    def sample_reset(self, sample: SampleRef, name: str) -> Sample:
        """Bring the sample back to its snapshot ``name``: same project and networks, its
        services started afresh. Its sandboxes' containers are new."""
        r = self._request("POST", c.sample_path(self._project(sample), "reset"),
                          what="sample reset", json_body={"name": name})
        return self._remember(Sample.from_json(r.json()))

    def sample_egress(self, sample: SampleRef) -> EgressState:
        """The sample's egress allowlist and the lookups and connections its gateway refused
        (each also an ``egress_denied`` event of :meth:`events`). NotFound for a sample started
        without an allowlist."""
        c.check_egress_revision(self.check_server(), "the server at " + self._endpoint.describe())
        r = self._request("GET", c.sample_path(self._project(sample), "egress"), what="sample egress")
        return EgressState.from_json(r.json())

    def sample_set_egress(self, sample: SampleRef, allow: List[str]) -> EgressState:
        """Replace the egress allowlist (NAME[:PORT]) of every service of a live sample; ``[]``
        closes it (a runner opens a package index for setup and closes it for the agent). A
        name beyond the server's ``--egress`` raises PolicyViolation naming the flag."""
        body = c.egress_request(allow)
        c.check_egress_revision(self.check_server(), "the server at " + self._endpoint.describe())
        r = self._request("PUT", c.sample_path(self._project(sample), "egress"),
                          what="sample set egress", json_body=body)
        return EgressState.from_json(r.json())

    def sandboxes(self, sample: SampleRef) -> List[SandboxInfo]:
        r = self._request("GET", c.sample_path(self._project(sample), "sandboxes"), what="sandboxes")
        return [SandboxInfo.from_json(s) for s in r.json().get("sandboxes") or []]

    # -- exec --------------------------------------------------------------------------------

    def exec(self, sample: SampleRef, cmd: List[str], *, service: Optional[str] = None,
             input: Optional[Union[bytes, str]] = None, cwd: Optional[str] = None,
             env: Optional[Mapping[str, str]] = None, user: Optional[str] = None,
             timeout: Optional[float] = None, output_limit: Optional[int] = None,
             strict_limit: bool = False) -> ExecResult:
        """Run ``cmd`` (an argv; no implicit shell) in the service (default: the sample's default
        one) and wait for it. A timeout raises :class:`~composebox.errors.Timeout` (a
        TimeoutError) whose ``result`` holds the partial output."""
        svc = self._service(sample, service)
        body = c.with_input(c.exec_request(cmd, cwd=cwd, env=env, user=user, timeout=timeout,
                                           output_limit=output_limit, strict_limit=strict_limit),
                            input)
        r = self._request("POST", c.sandbox_path(self._project(sample), svc, "exec"),
                          what=f"exec in {svc}", json_body=body)
        return ExecResult.from_json(r.json())

    def exec_stream(self, sample: SampleRef, cmd: List[str], *, service: Optional[str] = None,
                    input: Optional[c.Data] = None, cwd: Optional[str] = None,
                    env: Optional[Mapping[str, str]] = None, user: Optional[str] = None,
                    timeout: Optional[float] = None, output_limit: Optional[int] = None,
                    strict_limit: bool = False) -> ExecStream:
        """Start ``cmd`` and return an :class:`ExecStream` of its output events. ``input`` (bytes,
        str, a file object or an iterable of chunks) is streamed to the server as stdin."""
        svc = self._service(sample, service)
        head = c.stream_request_head(c.exec_request(
            cmd, cwd=cwd, env=env, user=user, timeout=timeout, output_limit=output_limit,
            strict_limit=strict_limit))
        def content() -> Iterator[bytes]:
            return itertools.chain([head], c.sync_chunks(input) if input is not None else [])

        # A busy answer is retried when stdin can be sent twice (none, bytes or text).
        r = self._send_stream("POST", c.sandbox_path(self._project(sample), svc, "exec", "stream"),
                              what=f"exec stream in {svc}",
                              content_fn=content if c.replayable(input) else None,
                              content=None if c.replayable(input) else content(),
                              headers={"Content-Type": "application/octet-stream"})
        return ExecStream(r)

    def exec_tty(self, sample: SampleRef, cmd: List[str], *, service: Optional[str] = None,
                 cwd: Optional[str] = None, env: Optional[Mapping[str, str]] = None,
                 user: Optional[str] = None, timeout: Optional[float] = None,
                 rows: int = 24, cols: int = 80) -> TTYSession:
        """Start ``cmd`` on a terminal of ``rows`` x ``cols`` and return a :class:`TTYSession`
        to talk to it (``send``, ``recv``, ``read_until``, ``resize``, ``wait``; ``with`` closes
        it, killing a command still running). ``timeout`` kills the command after that many
        seconds. Needs a server of API revision 3 or later
        (:class:`~composebox.errors.IncompatibleServer` otherwise)."""
        svc = self._service(sample, service)
        body = tty.tty_request(cmd, cwd=cwd, env=env, user=user, timeout=timeout, rows=rows, cols=cols)
        tty.check_revision(self.check_server(), "the server at " + self._endpoint.describe())
        return TTYSession._open(self._endpoint, c.sandbox_path(self._project(sample), svc, "exec", "tty"),
                                self._lease.id if self._lease is not None else None, body,
                                f"exec tty in {svc}", self._connect_timeout)

    # -- files -------------------------------------------------------------------------------

    def read_file_stream(self, sample: SampleRef, path: str, *, service: Optional[str] = None,
                         limit: Optional[int] = None, chunk_size: int = c.CHUNK) -> Iterator[bytes]:
        """The file's bytes as chunks, streamed (nothing is held in memory). Errors:
        NotFound, IsADirectory, PermissionDenied, OutputLimitExceeded (past ``limit`` bytes,
        default and at most 100 MiB)."""
        svc = self._service(sample, service)
        what = f"read {path} in {svc}"
        r = self._send_stream("GET", c.sandbox_path(self._project(sample), svc, "files"),
                              what=what, params=c.read_params(path, limit))
        return _iter_body(r, chunk_size, what, limit)

    def read_file(self, sample: SampleRef, path: str, *, service: Optional[str] = None,
                  limit: Optional[int] = None) -> bytes:
        """The file's bytes (at most ``limit``, default and maximum 100 MiB)."""
        return b"".join(self.read_file_stream(sample, path, service=service, limit=limit))

    def read_text(self, sample: SampleRef, path: str, *, service: Optional[str] = None,
                  limit: Optional[int] = None) -> str:
        """The file as UTF-8 text (UnicodeDecodeError when it is not), newlines kept as they are."""
        return self.read_file(sample, path, service=service, limit=limit).decode("utf-8")

    def write_file(self, sample: SampleRef, path: str, data: c.Data, *,
                   service: Optional[str] = None) -> None:
        """Create or replace the file (creating missing parents) as the sandbox's user. ``data``
        is bytes, str (UTF-8), a file object or an iterable of chunks; it is streamed."""
        svc = self._service(sample, service)
        content = c.to_bytes(data) if isinstance(data, (bytes, bytearray, memoryview, str)) \
            else c.sync_chunks(data)
        self._request("PUT", c.sandbox_path(self._project(sample), svc, "files"),
                      what=f"write {path} in {svc}", params={"path": path}, content=content,
                      headers={"Content-Type": "application/octet-stream"})

    def read_dir_tar(self, sample: SampleRef, path: str, *,
                     service: Optional[str] = None) -> Iterator[bytes]:
        """The directory's contents as a tar stream (chunks)."""
        svc = self._service(sample, service)
        r = self._send_stream("GET", c.sandbox_path(self._project(sample), svc, "dirs"),
                              what=f"read dir {path} in {svc}", params={"path": path})
        return _iter_body(r, c.CHUNK, f"read dir {path} in {svc}", None)

    def write_dir_tar(self, sample: SampleRef, path: str, tar: c.Data, *,
                      service: Optional[str] = None) -> None:
        """Extract a tar archive (bytes, file object or chunks; streamed) into the directory."""
        svc = self._service(sample, service)
        content = c.to_bytes(tar) if isinstance(tar, (bytes, bytearray, memoryview)) \
            else c.sync_chunks(tar)
        self._request("PUT", c.sandbox_path(self._project(sample), svc, "dirs"),
                      what=f"write dir {path} in {svc}", params={"path": path}, content=content,
                      headers={"Content-Type": "application/x-tar"})

    def logs(self, sample: SampleRef, *, service: Optional[str] = None, follow: bool = False,
             tail: Optional[int] = None, since: Any = None,
             timestamps: bool = False) -> Iterator[ExecEvent]:
        """The service's container output (what its main process wrote, running or not), as
        :class:`ExecEvent` chunks of type ``stdout`` and ``stderr``. ``tail``: only the last N
        lines; ``since``: a datetime or RFC 3339 string; ``follow``: keep streaming new output
        until the container stops or the iterator is closed."""
        svc = self._service(sample, service)
        what = f"logs of {svc}"
        r = self._send_stream("GET", c.sandbox_path(self._project(sample), svc, "logs"), what=what,
                              params=c.logs_params(follow, tail, since, timestamps))
        return _iter_logs(r, what)

    def connection(self, sample: SampleRef, *, service: Optional[str] = None) -> Connection:
        svc = self._service(sample, service)
        r = self._request("GET", c.sandbox_path(self._project(sample), svc, "connection"),
                          what=f"connection to {svc}")
        return Connection.from_json(r.json())


def _iter_body(r: httpx.Response, chunk_size: int, what: str,
               limit: Optional[int]) -> Iterator[bytes]:
    counter = c.LimitCounter(what, limit)
    try:
        for chunk in r.iter_bytes(chunk_size):
            counter.add(len(chunk))
            yield chunk
    except httpx.TransportError as e:
        raise c.cut_short(what, e) from e
    finally:
        r.close()


def _iter_logs(r: httpx.Response, what: str) -> Iterator[ExecEvent]:
    try:
        for line in r.iter_lines():
            if not line.strip():
                continue
            ev = c.parse_log_event(line.encode("utf-8") if isinstance(line, str) else line)
            if ev is None:
                return
            yield ev
    except httpx.TransportError as e:
        raise SandboxUnavailable(f"{what}: connection to the server lost: {e}") from e
    finally:
        r.close()


def _iter_events(r: httpx.Response) -> Iterator[Event]:
    try:
        for line in r.iter_lines():
            if line.strip():
                yield Event.from_json(json.loads(line))
    finally:
        r.close()
