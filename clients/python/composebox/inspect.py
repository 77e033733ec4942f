"""inspect_ai sandbox provider: ``sandbox="composebox"`` or ``("composebox", "compose.yaml")``.

Importable only where inspect_ai is installed. inspect_ai finds it through the package's
``inspect_ai`` entry point. The logic lives in :mod:`composebox.inspect_mapping`; this class
wires it to inspect's types and to one :class:`~composebox.AsyncClient` per process (a private
``composebox serve`` spawned on first use, or the server the operator names: $COMPOSEBOX_SOCKET,
$COMPOSEBOX_URL, or :func:`configure` from the runner's code; never a sandbox spec).
"""

from __future__ import annotations

import asyncio
import codecs
import errno
import json
import logging
import subprocess
from typing import Any, Dict, List, Literal, Optional, Union, overload

import anyio
from pydantic import BaseModel, ConfigDict, Field
from inspect_ai.util import (ExecCompleted, ExecRemoteAwaitableOptions, ExecRemoteProcess,
                             ExecRemoteStreamingOptions, ExecResult, ExecStderr, ExecStdout,
                             OutputLimitExceededError, SandboxConnection, SandboxEnvironment,
                             SandboxEnvironmentConfigType, SandboxEnvironmentLimits, sandboxenv)

try:  # present in the inspect_ai releases that have SandboxUnavailableError
    from inspect_ai.util import SandboxUnavailableError
except ImportError:  # pragma: no cover - older inspect_ai
    SandboxUnavailableError = RuntimeError  # type: ignore[misc,assignment]

try:
    from inspect_ai.util._sandbox.environment import HostMapping, PortMapping
except ImportError:  # pragma: no cover
    HostMapping = PortMapping = None  # type: ignore[misc,assignment]

from . import _common
from . import inspect_mapping as m
from .aio import AsyncClient
from .errors import ComposeboxError, NotFound, SandboxUnavailable
from .process import AsyncExecProcess
from .types import ExecEvent

logger = logging.getLogger(__name__)

# The server's largest read (the API's maximum for a file read's limit).
SERVER_MAX_READ = 100 * 1024 ** 2


class ComposeboxSandboxConfig(BaseModel):
    """The fields a sandbox spec may carry: see :class:`composebox.inspect_mapping.ProviderConfig`.
    Unknown fields are refused, and so are ``binary``, ``socket``, ``url`` and ``token_file``,
    which are the operator's (:func:`configure`)."""

    model_config = ConfigDict(extra="forbid")

    compose: Optional[str] = None
    compose_yaml: Optional[str] = None
    name: Optional[str] = None
    files: List[str] = Field(default_factory=list)
    env: Dict[str, str] = Field(default_factory=dict)
    profiles: List[str] = Field(default_factory=list)
    policy: Dict[str, Any] = Field(default_factory=dict)
    default_service: Optional[str] = None
    prebuilt: bool = False
    ready_timeout: Optional[float] = None

    # inspect keeps specs in sets (a frozen SandboxEnvironmentSpec hashes its config): hash
    # and compare by content, as inspect's own ComposeConfig does.
    def __hash__(self) -> int:
        return hash(self.model_dump_json())

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ComposeboxSandboxConfig):
            return NotImplemented
        return self.model_dump() == other.model_dump()


# What the runner's code set with configure(); it takes precedence over the environment.
_operator: Dict[str, Any] = {}


def configure(*, binary: Optional[str] = None, socket: Optional[str] = None,
              url: Optional[str] = None, token_file: Optional[str] = None,
              args: Optional[List[str]] = None,
              serve_args: Optional[List[str]] = None) -> None:
    """Name the server the provider uses, from the runner's code (a sandbox spec cannot): a
    running server's ``socket`` or ``url`` (with ``token_file``), or, to spawn a private one,
    the ``binary`` and the global flags ``args`` given to every composebox command the
    provider runs (``--engine``, ``--backend``...), and ``serve_args``, the spawned server's
    own flags: the ceiling a spec's ``policy`` may ask within (``--allow host-access``...).
    Unset arguments keep the environment's ($COMPOSEBOX_BIN, $COMPOSEBOX_SOCKET,
    $COMPOSEBOX_URL, $COMPOSEBOX_TOKEN_FILE, $COMPOSEBOX_ARGS, $COMPOSEBOX_SERVE_ARGS). Takes
    effect for clients opened afterwards."""
    _operator.update(binary=binary, socket=socket, url=url, token_file=token_file, args=args,
                     serve_args=serve_args)


def _settings() -> m.ServerSettings:
    return m.ServerSettings.from_env(**_operator)


class _State:
    """The process's client, its tasks (one per distinct config, keyed by TaskPlan.key) and
    how many task_init calls hold each; all of an event loop's (inspect's CLI commands each
    run their own)."""

    def __init__(self) -> None:
        self.client: Optional[AsyncClient] = None
        self.loop: Optional[asyncio.AbstractEventLoop] = None
        self.tasks: Dict[str, str] = {}
        self.inits: Dict[str, int] = {}
        self.task_locks: Dict[str, asyncio.Lock] = {}
        self.lock: Optional[asyncio.Lock] = None
        self.exec_limit: Optional[asyncio.Semaphore] = None

    async def get_client(self) -> AsyncClient:
        loop = asyncio.get_running_loop()
        if self.loop is not loop:
            # A new event loop: start afresh. A client of the old loop cannot be closed from
            # this one; its private server is stopped directly (which removes what it owned).
            old = self.client
            if old is not None and old._server is not None:
                server, old._server = old._server, None
                await anyio.to_thread.run_sync(server.stop)
            self.client, self.loop, self.lock = None, loop, asyncio.Lock()
            self.tasks, self.inits, self.task_locks = {}, {}, {}
            self.exec_limit = asyncio.Semaphore(m.EXEC_CONCURRENCY)
        assert self.lock is not None
        async with self.lock:
            if self.client is None:
                st = _settings()
                if st.spawns:
                    client = AsyncClient.spawn(st.binary, args=st.args + st.serve_args)
                else:
                    client = AsyncClient(socket=st.socket, url=st.url, token_file=st.token_file)
                self.client = await client.open()
            return self.client

    async def task_id(self, plan: m.TaskPlan) -> str:
        client = await self.get_client()
        # One init per distinct config, however many samples ask for it at once.
        async with self.task_locks.setdefault(plan.key, asyncio.Lock()):
            tid = self.tasks.get(plan.key)
            if tid is None:
                tid = (await client.task_init(**plan.request)).id
                self.tasks[plan.key] = tid
        return tid

    async def close_if_idle(self) -> None:
        if self.client is not None and not self.tasks:
            client, self.client = self.client, None
            await client.aclose()


_state = _State()


def _raise_mapped(err: ComposeboxError, *, op: str, file: Optional[str] = None,
                  timeout: Optional[float] = None, limit: Optional[int] = None) -> None:
    mapped = m.map_error(err, op=op, file=file, timeout=timeout, limit=limit,
                         unavailable=SandboxUnavailableError,
                         output_limit=lambda limit_str, out: OutputLimitExceededError(limit_str, out))
    if mapped is err:
        raise err
    raise mapped from err


@sandboxenv(name=m.PROVIDER_NAME)
class ComposeboxSandboxEnvironment(SandboxEnvironment):
    """One service of a composebox sample."""

    @classmethod
    def config_files(cls) -> list[str]:
        return m.config_files()

    @classmethod
    def is_docker_compatible(cls) -> bool:
        return m.is_docker_compatible()

    @classmethod
    def config_deserialize(cls, config: dict[str, Any]) -> BaseModel:
        # Refused here with a clear error, before pydantic's "extra inputs": a dataset row's
        # spec is deserialised when the dataset is read, before anything runs.
        m.refuse_operator_fields(config)
        return ComposeboxSandboxConfig(**config)

    @classmethod
    def default_concurrency(cls) -> int | None:
        return m.default_concurrency()

    @classmethod
    async def task_init(cls, task_name: str, config: SandboxEnvironmentConfigType | None) -> None:
        # inspect calls this once per distinct config for the whole eval, with the name
        # "startup": the task is the config's, whatever the name.
        plan = m.task_plan(config)
        await _state.task_id(plan)
        _state.inits[plan.key] = _state.inits.get(plan.key, 0) + 1

    @classmethod
    async def sample_init(cls, task_name: str, config: SandboxEnvironmentConfigType | None,
                          metadata: dict[str, str]) -> dict[str, SandboxEnvironment]:
        plan = m.task_plan(config)
        tid = await _state.task_id(plan)
        client = await _state.get_client()
        sample = await client.sample_init(tid, id=_sample_label(), metadata=m.sample_metadata(metadata))
        envs: Dict[str, SandboxEnvironment] = {}
        for service in m.order_environments(sample.services, sample.default_service):
            info = sample.sandbox(service)
            envs[service] = cls(client, sample.project, service, info.working_dir)
        return envs

    @classmethod
    async def sample_cleanup(cls, task_name: str, config: SandboxEnvironmentConfigType | None,
                             environments: dict[str, SandboxEnvironment],
                             interrupted: bool) -> None:
        if not environments:
            return
        first = next(iter(environments.values())).as_type(ComposeboxSandboxEnvironment)
        # Removed now whether or not the sample was interrupted; shielded so that a cancelled
        # sample still leaves nothing behind.
        with anyio.CancelScope(shield=True):
            try:
                await first._client.sample_cleanup(first._project)
            except NotFound:
                pass

    @classmethod
    async def task_cleanup(cls, task_name: str, config: SandboxEnvironmentConfigType | None,
                           cleanup: bool) -> None:
        try:
            key = m.task_plan(config).key
        except ComposeboxError:
            return
        tid = _state.tasks.get(key)
        client = _state.client
        if tid is None or client is None:
            return
        # Another eval of this process that still runs holds the task too.
        _state.inits[key] = _state.inits.get(key, 0) - 1
        if _state.inits[key] > 0:
            return
        with anyio.CancelScope(shield=True):
            try:
                if cleanup:
                    await client.task_cleanup(tid)
                else:
                    # --no-sandbox-cleanup (inspect then skips sample_cleanup): hand the samples
                    # over, so that neither the lease nor the server's shutdown removes them,
                    # and say how to remove them, as inspect's Docker provider does.
                    kept = [await client.sample_detach(s.project) for s in await client.sample_list(tid)]
                    if kept:
                        print(m.left_running_notice(kept), flush=True)
            finally:
                _state.tasks.pop(key, None)
                _state.inits.pop(key, None)
                await _state.close_if_idle()

    @classmethod
    async def cli_cleanup(cls, id: str | None) -> None:
        st = _settings()
        binary = _common.find_binary(st.binary)
        if id:
            await _run_cli([binary] + st.args + ["cleanup", id])
            return
        # Only what the provider made and no live eval owns: stale and detached samples of
        # "inspect-" tasks. Every other composebox project on the engine stays.
        listing = json.loads(await _run_cli([binary] + st.args + ["ls", "--json", "--all"]))
        projects = m.cli_cleanup_projects(listing)
        if projects:
            await _run_cli([binary] + st.args + ["cleanup"] + projects)
        print(f"composebox: removed {len(projects)} sample(s) left by inspect"
              + (": " + " ".join(projects) if projects else ""), flush=True)

    def __init__(self, client: AsyncClient, project: str, service: str, working_dir: str) -> None:
        super().__init__()
        self._client = client
        self._project = project
        self._service = service
        self._working_dir = working_dir

    async def exec(self, cmd: list[str], input: str | bytes | None = None, cwd: str | None = None,
                   env: dict[str, str] | None = None, user: str | None = None,
                   timeout: int | None = None, timeout_retry: bool = True,
                   concurrency: bool = True) -> ExecResult[str]:
        kw = m.exec_kwargs(cmd, input, cwd, env, user, timeout,
                           output_limit=SandboxEnvironmentLimits.MAX_EXEC_OUTPUT_SIZE)
        limit = _state.exec_limit if concurrency else None
        try:
            if limit is not None:
                async with limit:
                    r = await self._client.exec(self._project, cmd, service=self._service, **kw)
            else:
                r = await self._client.exec(self._project, cmd, service=self._service, **kw)
        except ComposeboxError as e:
            _raise_mapped(e, op="exec", timeout=timeout,
                          limit=SandboxEnvironmentLimits.MAX_EXEC_OUTPUT_SIZE)
        return ExecResult(**m.exec_result_fields(r))

    async def write_file(self, file: str, contents: str | bytes) -> None:
        try:
            await self._client.write_file(self._project, file, m.encode_contents(contents),
                                          service=self._service)
        except ComposeboxError as e:
            _raise_mapped(e, op="write", file=file)

    @overload
    async def read_file(self, file: str, text: Literal[True] = True) -> str: ...

    @overload
    async def read_file(self, file: str, text: Literal[False]) -> bytes: ...

    async def read_file(self, file: str, text: bool = True) -> Union[str, bytes]:
        if m.is_directory_alias(file):
            raise IsADirectoryError(errno.EISDIR, "Is a directory.", file)
        limit = min(SandboxEnvironmentLimits.MAX_READ_FILE_SIZE, SERVER_MAX_READ)
        try:
            data = await self._client.read_file(self._project, file, service=self._service,
                                                limit=limit)
        except ComposeboxError as e:
            _raise_mapped(e, op="read", file=file, limit=limit)
        return m.decode_text(data) if text else data

    async def connection(self, *, user: str | None = None) -> SandboxConnection:
        try:
            conn = await self._client.connection(self._project, service=self._service)
        except (NotFound, SandboxUnavailable) as e:
            raise ConnectionError(f"Service '{self._service}' is not currently running: {e}") from e
        fields = m.connection_fields(conn, user=user)
        if PortMapping is not None and fields["ports"]:
            fields["ports"] = [PortMapping(container_port=p["container_port"], protocol=p["protocol"],
                                           mappings=[HostMapping(**h) for h in p["mappings"]])
                               for p in fields["ports"]]
        return SandboxConnection(**fields)

    async def exec_remote(self, cmd: list[str], options: Any = None, *,
                          stream: bool = True) -> Any:
        """inspect's streaming exec, natively over composebox's streamed exec: no helper binary
        is put into the container and nothing polls. With ``stream=True`` it returns an
        ExecRemoteProcess whose events come as the command writes them (``write_stdin`` and
        ``close_stdin`` with ``stdin_open``, ``kill``, and a kill when the iterating task is
        cancelled); with ``stream=False`` the ExecResult, the last MAX_EXEC_OUTPUT_SIZE bytes of
        each stream kept, and TimeoutError past ``options.timeout`` (the command killed).
        Neither takes the provider's exec queue: a long-running process would hold a place."""
        if stream:
            opts = options if options is not None else ExecRemoteStreamingOptions()
            return await _RemoteProcess.start(self, cmd, opts)
        opts = options if options is not None else ExecRemoteAwaitableOptions()
        proc = await _RemoteProcess.start(self, cmd, opts)
        limit = SandboxEnvironmentLimits.MAX_EXEC_OUTPUT_SIZE
        out, err = bytearray(), bytearray()
        timeout = getattr(opts, "timeout", None)
        try:
            with anyio.fail_after(timeout):
                async for ev in proc._proc:
                    if ev.type in ("stdout", "stderr"):
                        buf = out if ev.type == "stdout" else err
                        buf += ev.data
                        del buf[:-limit]
        except BaseException:
            with anyio.CancelScope(shield=True):
                await proc.kill()
            raise
        code = proc._proc.result.exit_code if proc._proc.result is not None else -1
        return ExecResult(success=code == 0, returncode=code,
                          stdout=out.decode("utf-8", errors="replace"),
                          stderr=err.decode("utf-8", errors="replace"))

    def default_polling_interval(self) -> float:
        return 0.2


class _RemoteProcess(ExecRemoteProcess):
    """inspect's process handle over a composebox :class:`~composebox.process.AsyncExecProcess`.
    It keeps ExecRemoteProcess's contract (single iteration; events decoded as UTF-8 text,
    invalid bytes replaced; after kill() the output already received, then the end, no
    ExecCompleted) without its JSON-RPC transport. The server gives no pid: ``pid`` is 0."""

    def __init__(self, proc: AsyncExecProcess, options: Any, what: str) -> None:
        # ExecRemoteProcess.__init__ sets up inspect's polling transport, unused here.
        self._proc = proc
        self._options = options
        self._what = what
        self._pid = 0
        self._killed = False
        self._completed = False
        self._iteration_started = False
        self._pending_events: list = []
        self._decoders = {t: codecs.getincrementaldecoder("utf-8")(errors="replace")
                          for t in ("stdout", "stderr")}

    @classmethod
    async def start(cls, env: "ComposeboxSandboxEnvironment", cmd: list[str],
                    options: Any) -> "_RemoteProcess":
        kw = m.exec_remote_kwargs(cmd, options)
        try:
            proc = await env._client.exec_process(env._project, cmd, service=env._service, **kw)
        except ComposeboxError as e:
            _raise_mapped(e, op="exec")
        return cls(proc, options, f"exec_remote in {env._service}")

    def _text(self, typ: str, data: bytes, final: bool = False) -> str:
        return self._decoders[typ].decode(data, final)

    async def __anext__(self) -> Any:
        if self._pending_events:
            return self._pending_events.pop(0)
        if self._completed or self._killed:
            raise StopAsyncIteration
        try:
            while True:
                try:
                    ev = await self._proc.__anext__()
                except StopAsyncIteration:
                    self._killed = self._killed or not self._completed
                    raise
                except ComposeboxError as e:
                    self._completed = True
                    _raise_mapped(e, op="exec")
                if ev.type == "exit":
                    self._completed = True
                    assert ev.result is not None
                    for typ, event in (("stdout", ExecStdout), ("stderr", ExecStderr)):
                        rest = self._text(typ, b"", True)
                        if rest:
                            self._pending_events.append(event(data=rest))
                    self._pending_events.append(ExecCompleted(exit_code=ev.result.exit_code))
                    return self._pending_events.pop(0)
                text = self._text(ev.type, ev.data)
                if text:
                    return ExecStdout(data=text) if ev.type == "stdout" else ExecStderr(data=text)
        except anyio.get_cancelled_exc_class():
            # A cancelled caller kills the command rather than leave it running.
            with anyio.CancelScope(shield=True):
                await self.kill()
            raise

    def _check_stdin(self, op: str) -> None:
        if not getattr(self._options, "stdin_open", False):
            raise RuntimeError(f"{op}() requires stdin_open=True in ExecRemoteStreamingOptions")

    async def write_stdin(self, data: str | bytes) -> None:
        self._check_stdin("write_stdin")
        if self._completed or self._killed or not self._proc.running:
            raise RuntimeError("Cannot write to stdin: process has terminated")
        try:
            await self._proc.write_stdin(data)
        except ComposeboxError as e:
            raise RuntimeError(f"{self._what}: write_stdin: {e}") from e

    async def close_stdin(self) -> None:
        self._check_stdin("close_stdin")
        if self._completed or self._killed:
            return
        try:
            await self._proc.close_stdin()
        except ComposeboxError:
            pass

    async def kill(self) -> None:
        if self._completed or self._killed:
            return
        self._killed = True
        await self._proc.kill()
        # What had arrived before the kill is still handed out.
        while True:
            try:
                ev = self._proc._events.get_nowait()
            except asyncio.QueueEmpty:
                break
            if isinstance(ev, ExecEvent) and ev.type in ("stdout", "stderr"):
                text = self._text(ev.type, ev.data)
                if text:
                    self._pending_events.append(
                        ExecStdout(data=text) if ev.type == "stdout" else ExecStderr(data=text))


async def _run_cli(args: List[str]) -> str:
    result = await anyio.to_thread.run_sync(
        lambda: subprocess.run(args, capture_output=True, text=True))
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed: {result.stderr.strip()}")
    return result.stdout


def _sample_label() -> Optional[str]:
    """inspect's sample id and epoch ("<id>-<epoch>"), so that `composebox ls` shows which
    sample a project belongs to; None outside a running sample."""
    try:
        from inspect_ai.log._samples import sample_active

        active = sample_active()
    except Exception:
        return None
    if active is None:
        return None
    return f"{active.sample.id}-{active.epoch}"
