"""Result types: plain dataclasses decoded from the server's JSON."""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional


def _b64(value: Any) -> bytes:
    if not value:
        return b""
    return base64.b64decode(value)


@dataclass(frozen=True)
class Version:
    """The server's ``/v1/version``: its release (``version``), the Go and compose library it
    was built with, and its API: ``api`` (the route prefix, "v1") and ``api_revision`` (how many
    additions that API has had; 0 from a server older than the field)."""

    version: str
    go: str = ""
    compose: str = ""
    api: str = ""
    api_revision: int = 0

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "Version":
        rev = d.get("api_revision")
        return cls(version=str(d.get("version", "")), go=str(d.get("go", "")),
                   compose=str(d.get("compose", "")), api=str(d.get("api", "")),
                   api_revision=rev if isinstance(rev, int) and not isinstance(rev, bool) else 0)


@dataclass(frozen=True)
class DoctorCheck:
    name: str
    status: str
    detail: str = ""
    fix: str = ""


@dataclass(frozen=True)
class DoctorReport:
    ok: bool
    checks: List[DoctorCheck] = field(default_factory=list)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "DoctorReport":
        return cls(ok=bool(d.get("ok")), checks=[
            DoctorCheck(name=c.get("name", ""), status=c.get("status", ""),
                        detail=c.get("detail", ""), fix=c.get("fix", ""))
            for c in d.get("checks") or []])


@dataclass(frozen=True)
class Lease:
    id: str
    ttl_seconds: float
    expires_at: str = ""

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "Lease":
        return cls(id=d["id"], ttl_seconds=float(d.get("ttl_seconds") or 0),
                   expires_at=d.get("expires_at", ""))


@dataclass(frozen=True)
class Task:
    """An initialised task: its compose project is resolved, policed and built."""

    id: str
    name: str
    default_service: str
    services: List[str] = field(default_factory=list)
    images: Dict[str, str] = field(default_factory=dict)
    lease: str = ""
    #: The task's warm pool, when it asked for one (``warm=N`` at task init).
    pool: Optional["PoolStatus"] = None

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "Task":
        pool = d.get("pool")
        return cls(id=d["id"], name=d.get("name", ""), default_service=d.get("default_service", ""),
                   services=list(d.get("services") or []), images=dict(d.get("images") or {}),
                   lease=d.get("lease", ""), pool=PoolStatus.from_json(pool) if pool else None)


@dataclass(frozen=True)
class PoolStatus:
    """A task's warm pool: how many ready samples it keeps, holds and is starting; when the
    task cannot be pooled, ``reason`` says why."""

    target: int
    ready: int
    filling: int
    poolable: bool
    reason: str = ""
    failures: int = 0

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "PoolStatus":
        return cls(target=int(d.get("target", 0)), ready=int(d.get("ready", 0)),
                   filling=int(d.get("filling", 0)), poolable=bool(d.get("poolable", False)),
                   reason=d.get("reason", ""), failures=int(d.get("failures", 0)))


@dataclass(frozen=True)
class SandboxInfo:
    """One service of a live sample."""

    service: str
    container: str
    container_name: str
    working_dir: str
    user: str
    default: bool

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "SandboxInfo":
        return cls(service=d["service"], container=d.get("container", ""),
                   container_name=d.get("container_name", ""), working_dir=d.get("working_dir", ""),
                   user=d.get("user", ""), default=bool(d.get("default")))


@dataclass(frozen=True)
class Sample:
    """A live copy of a task's project. ``project`` identifies it in every call."""

    project: str
    id: str
    task: str
    default_service: str
    sandboxes: List[SandboxInfo] = field(default_factory=list)
    detached: bool = False
    lease: str = ""
    #: The engine the sample lives on: ``default`` for the one engine, else the name
    #: placement chose among several (``--engine``, ``--engines``).
    engine: str = ""

    @property
    def default(self) -> SandboxInfo:
        """The default service's sandbox."""
        for s in self.sandboxes:
            if s.service == self.default_service:
                return s
        return self.sandboxes[0]

    def sandbox(self, service: str) -> SandboxInfo:
        for s in self.sandboxes:
            if s.service == service:
                return s
        raise KeyError(f"sample {self.project} has no service {service!r}")

    @property
    def services(self) -> List[str]:
        return [s.service for s in self.sandboxes]

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "Sample":
        return cls(project=d["project"], id=d.get("id", ""), task=d.get("task", ""),
                   default_service=d.get("default_service", ""),
                   sandboxes=[SandboxInfo.from_json(s) for s in d.get("sandboxes") or []],
                   detached=bool(d.get("detached")), lease=d.get("lease", ""),
                   engine=d.get("engine", ""))


@dataclass(frozen=True)
class ExecResult:
    """A finished command. A non-zero ``exit_code`` is a result, not an error.

    ``stdout``/``stderr`` are the captured bytes (the tail when ``*_truncated``);
    ``stdout_text``/``stderr_text`` decode them as UTF-8 with U+FFFD for invalid bytes.
    """

    exit_code: int
    stdout: bytes = b""
    stderr: bytes = b""
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    stdout_bytes: int = 0
    stderr_bytes: int = 0
    duration: float = 0.0

    @property
    def success(self) -> bool:
        return self.exit_code == 0

    @property
    def returncode(self) -> int:
        return self.exit_code

    @property
    def stdout_text(self) -> str:
        return self.stdout.decode("utf-8", errors="replace")

    @property
    def stderr_text(self) -> str:
        return self.stderr.decode("utf-8", errors="replace")

    @classmethod
    def from_json(cls, d: Dict[str, Any], stdout: Optional[bytes] = None,
                  stderr: Optional[bytes] = None) -> "ExecResult":
        return cls(
            exit_code=int(d.get("exit_code", 0)),
            stdout=_b64(d.get("stdout")) if stdout is None else stdout,
            stderr=_b64(d.get("stderr")) if stderr is None else stderr,
            stdout_truncated=bool(d.get("stdout_truncated")),
            stderr_truncated=bool(d.get("stderr_truncated")),
            stdout_bytes=int(d.get("stdout_bytes") or 0),
            stderr_bytes=int(d.get("stderr_bytes") or 0),
            duration=float(d.get("duration_seconds") or 0.0),
        )


@dataclass(frozen=True)
class ExecEvent:
    """One event of a streamed exec: a chunk of ``stdout`` or ``stderr`` (``data``), or the final
    ``exit`` (``result`` holds the exit code and counters; its stdout/stderr are empty: the
    chunks were the output)."""

    type: str
    data: bytes = b""
    result: Optional[ExecResult] = None

    @property
    def text(self) -> str:
        return self.data.decode("utf-8", errors="replace")


@dataclass(frozen=True)
class Port:
    container_port: int
    protocol: str
    host_ip: str
    host_port: int


@dataclass(frozen=True)
class Connection:
    """How to reach a running service: its container, a shell command that enters it, and its
    published ports."""

    container_id: str
    container_name: str
    command: str
    ports: List[Port] = field(default_factory=list)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "Connection":
        return cls(container_id=d.get("container_id", ""), container_name=d.get("container_name", ""),
                   command=d.get("command", ""), ports=[
                       Port(container_port=int(p.get("container_port") or 0),
                            protocol=p.get("protocol", "tcp"), host_ip=p.get("host_ip", ""),
                            host_port=int(p.get("host_port") or 0))
                       for p in d.get("ports") or []])


@dataclass(frozen=True)
class EgressDenial:
    """One lookup or connection a sample's egress gateway refused (``egress_denied``): the
    ``name`` asked for (DNS query, TLS SNI, HTTP Host) or the ``address`` when there is none,
    the ``port``, the ``protocol`` (dns, tls, http or tcp), the ``service`` it came from and
    why (``reason``)."""

    time: str = ""
    service: str = ""
    client: str = ""
    name: str = ""
    address: str = ""
    port: int = 0
    protocol: str = ""
    reason: str = ""

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "EgressDenial":
        return cls(time=d.get("time", ""), service=d.get("service", ""), client=d.get("client", ""),
                   name=d.get("name", ""), address=d.get("address", ""),
                   port=int(d.get("port") or 0), protocol=d.get("protocol", ""),
                   reason=d.get("reason", ""))


@dataclass(frozen=True)
class EgressState:
    """A sample's egress allowlist and what its gateway refused so far, oldest first.
    ``allow`` is the list every service has once it was set (empty: closed), None before any
    set, when ``services`` holds each restricted service's own list. ``ceiling`` is the
    task's ``--egress`` the sample started with (empty when it had none): a later list stays
    within it."""

    project: str
    allow: Optional[List[str]] = None
    services: Dict[str, List[str]] = field(default_factory=dict)
    denials: List[EgressDenial] = field(default_factory=list)
    ceiling: List[str] = field(default_factory=list)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "EgressState":
        allow = d.get("allow")
        return cls(project=d.get("project", ""), allow=None if allow is None else list(allow),
                   services={k: list(v or []) for k, v in (d.get("services") or {}).items()},
                   denials=[EgressDenial.from_json(x) for x in d.get("denials") or []],
                   ceiling=list(d.get("ceiling") or []))


@dataclass(frozen=True)
class Event:
    """A lifecycle event of the server's tasks and samples (``type`` "event"), or a notice that
    this subscriber missed ``count`` events (``type`` "dropped"). An ``egress_denied`` event
    carries what the sample's egress gateway refused in ``denial``."""

    type: str
    kind: str = ""
    time: str = ""
    task: str = ""
    sample: str = ""
    project: str = ""
    service: str = ""
    duration: float = 0.0
    error: str = ""
    message: str = ""
    count: int = 0
    denial: Optional[EgressDenial] = None

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "Event":
        denial = d.get("denial")
        return cls(type=d.get("type", "event"), kind=d.get("kind", ""), time=d.get("time", ""),
                   task=d.get("task", ""), sample=d.get("sample", ""), project=d.get("project", ""),
                   service=d.get("service", ""), duration=float(d.get("duration_seconds") or 0.0),
                   error=d.get("error", ""), message=d.get("message", ""),
                   count=int(d.get("count") or 0),
                   denial=EgressDenial.from_json(denial) if isinstance(denial, dict) else None)
