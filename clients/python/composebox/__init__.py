"""Python client of ``composebox serve``, and an inspect_ai sandbox provider
(``composebox.inspect``, registered as ``sandbox="composebox"``)."""

from __future__ import annotations

import importlib

from ._version import API_VERSION, MIN_API_REVISION, __version__

# The names below load on first use (PEP 562), so that importing the package costs nothing:
# the `composebox` console script and `python -m composebox` import it on every run, and hand
# over to the binary without needing httpx.
_LAZY = {
    "AsyncClient": "aio", "AsyncExecStream": "aio", "AsyncExecProcess": "process",
    "Client": "client", "ExecStream": "client",
    "AsyncTTYSession": "tty", "TTYSession": "tty",
    "BuildFailed": "errors", "Busy": "errors", "ComposeboxError": "errors", "Conflict": "errors",
    "IncompatibleServer": "errors", "InvalidConfig": "errors", "IsADirectory": "errors",
    "NotFound": "errors", "OutputLimitExceeded": "errors", "PermissionDenied": "errors",
    "PolicyViolation": "errors", "PrerequisiteError": "errors", "SandboxUnavailable": "errors",
    "ServerError": "errors", "Timeout": "errors", "Unauthorized": "errors",
    "Unsupported": "errors",
    "Connection": "types", "DoctorCheck": "types", "DoctorReport": "types",
    "EgressDenial": "types", "EgressState": "types", "Event": "types",
    "ExecEvent": "types", "ExecResult": "types", "Lease": "types", "PoolStatus": "types",
    "Port": "types", "Sample": "types", "SandboxInfo": "types", "Task": "types",
    "Version": "types",
}

# typing itself is not imported: it costs more than the rest of the package's import.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, List

    from .aio import AsyncClient, AsyncExecStream
    from .client import Client, ExecStream
    from .process import AsyncExecProcess
    from .errors import (BuildFailed, Busy, ComposeboxError, Conflict, IncompatibleServer,
                         InvalidConfig, IsADirectory, NotFound, OutputLimitExceeded,
                         PermissionDenied, PolicyViolation, PrerequisiteError, SandboxUnavailable,
                         ServerError, Timeout, Unauthorized, Unsupported)
    from .tty import AsyncTTYSession, TTYSession
    from .types import (Connection, DoctorCheck, DoctorReport, EgressDenial, EgressState, Event, ExecEvent, ExecResult, Lease,
                        PoolStatus, Port, Sample, SandboxInfo, Task, Version)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module("." + module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> List[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "__version__", "API_VERSION", "MIN_API_REVISION",
    "AsyncClient", "AsyncExecProcess", "AsyncExecStream", "AsyncTTYSession", "Client",
    "ExecStream", "TTYSession",
    "BuildFailed", "Busy", "ComposeboxError", "Conflict", "IncompatibleServer", "InvalidConfig",
    "IsADirectory", "NotFound", "OutputLimitExceeded", "PermissionDenied", "PolicyViolation",
    "PrerequisiteError", "SandboxUnavailable", "ServerError", "Timeout", "Unauthorized",
    "Unsupported",
    "Connection", "DoctorCheck", "DoctorReport", "EgressDenial", "EgressState", "Event", "ExecEvent", "ExecResult", "Lease",
    "PoolStatus", "Port", "Sample", "SandboxInfo", "Task", "Version",
]
