"""inspect_ai sandbox provider: ``sandbox="composebox"`` or ``("composebox", "compose.yaml")``.

Importable only where inspect_ai is installed. inspect_ai finds it through the package's
``inspect_ai`` entry point. The logic lives in :mod:`composebox.inspect_mapping`; this class
wires it to inspect's types and to one :class:`~composebox.AsyncClient` per process (a private
``composebox serve`` spawned on first use, or the server named by the config's ``socket``/``url``
or $COMPOSEBOX_SOCKET/$COMPOSEBOX_URL).
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import subprocess
from typing import Any, Dict, List, Literal, Optional, Union, overload

import anyio
from pydantic import BaseModel, Field
from inspect_ai.util import (ExecResult, OutputLimitExceededError, SandboxConnection,
                             SandboxEnvironment, SandboxEnvironmentConfigType,
                             SandboxEnvironmentLimits, sandboxenv)

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

logger = logging.getLogger(__name__)

# The server's largest read (the API's maximum for a file read's limit).
SERVER_MAX_READ = 100 * 1024 ** 2


class ComposeboxSandboxConfig(BaseModel):
    """The provider's config model: see :class:`composebox.inspect_mapping.ProviderConfig`."""

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
    socket: Optional[str] = None
    url: Optional[str] = None
    token_file: Optional[str] = None
    binary: Optional[str] = None


class _State:
    """The process's client and the tasks it initialised, keyed by (task name, config)."""

    def __init__(self) -> None:
        self.client: Optional[AsyncClient] = None
        self.loop: Optional[asyncio.AbstractEventLoop] = None
        self.tasks: Dict[str, str] = {}
        self.task_locks: Dict[str, asyncio.Lock] = {}
        self.lock: Optional[asyncio.Lock] = None

    async def get_client(self, pc: m.ProviderConfig) -> AsyncClient:
        loop = asyncio.get_running_loop()
        if self.loop is not loop:
            # A new event loop (inspect's CLI commands each run their own): start afresh. A
            # client of the old loop cannot be closed from this one; its private server is
            # stopped directly (which removes what it owned).
            old = self.client
            if old is not None and old._server is not None:
                server, old._server = old._server, None
                await anyio.to_thread.run_sync(server.stop)
            self.client, self.loop, self.lock = None, loop, asyncio.Lock()
            self.tasks, self.task_locks = {}, {}
        assert self.lock is not None
        async with self.lock:
            if self.client is None:
                if pc.socket or pc.url:
                    client = AsyncClient(socket=pc.socket, url=pc.url, token_file=pc.token_file)
                elif os.environ.get("COMPOSEBOX_SOCKET") or os.environ.get("COMPOSEBOX_URL"):
                    client = AsyncClient()
                else:
                    client = AsyncClient.spawn(pc.binary)
                self.client = await client.open()
            return self.client

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
        return ComposeboxSandboxConfig(**config)

    @classmethod
    async def task_init(cls, task_name: str, config: SandboxEnvironmentConfigType | None) -> None:
        await cls._task_id(task_name, config)

    @classmethod
    async def _task_id(cls, task_name: str, config: Any) -> str:
        req, pc = m.task_request(task_name, config)
        client = await _state.get_client(pc)
        key = m.task_key(task_name, config)
        # One init per (task, config), however many samples ask for it at once.
        async with _state.task_locks.setdefault(key, asyncio.Lock()):
            tid = _state.tasks.get(key)
            if tid is None:
                tid = (await client.task_init(**req)).id
                _state.tasks[key] = tid
        return tid

    @classmethod
    async def sample_init(cls, task_name: str, config: SandboxEnvironmentConfigType | None,
                          metadata: dict[str, str]) -> dict[str, SandboxEnvironment]:
        _, pc = m.task_request(task_name, config)
        tid = await cls._task_id(task_name, config)
        client = await _state.get_client(pc)
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
        key = m.task_key(task_name, config)
        tid = _state.tasks.get(key)
        client = _state.client
        if tid is None or client is None:
            return
        with anyio.CancelScope(shield=True):
            try:
                if cleanup:
                    await client.task_cleanup(tid)
                else:
                    # --no-sandbox-cleanup: hand the samples over so that neither the lease nor
                    # the server's shutdown removes them; `inspect sandbox cleanup composebox`
                    # (or `composebox cleanup`) does later.
                    for s in await client.sample_list(tid):
                        await client.sample_detach(s.project)
                        logger.warning("composebox sample %s left running (%s)", s.project,
                                       "remove it with: composebox down " + s.project)
            finally:
                _state.tasks.pop(key, None)
                await _state.close_if_idle()

    @classmethod
    async def cli_cleanup(cls, id: str | None) -> None:
        binary = _common.find_binary(None)
        args = [binary] + m.cli_cleanup_args(id)
        result = await anyio.to_thread.run_sync(
            lambda: subprocess.run(args, capture_output=True, text=True))
        if result.returncode != 0:
            raise RuntimeError(f"{' '.join(args)} failed: {result.stderr.strip()}")

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
        try:
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

    def default_polling_interval(self) -> float:
        return 0.2


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
