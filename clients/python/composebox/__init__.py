"""Python client of ``composebox serve``, and an inspect_ai sandbox provider
(``composebox.inspect``, registered as ``sandbox="composebox"``)."""

from ._version import API_VERSION, MIN_API_REVISION, __version__
from .aio import AsyncClient, AsyncExecStream
from .client import Client, ExecStream
from .errors import (BuildFailed, Busy, ComposeboxError, Conflict, IncompatibleServer,
                     InvalidConfig, IsADirectory, NotFound, OutputLimitExceeded, PermissionDenied,
                     PolicyViolation, PrerequisiteError, SandboxUnavailable, ServerError, Timeout,
                     Unauthorized)
from .process import AsyncExecProcess
from .tty import AsyncTTYSession, TTYSession
from .types import (Connection, DoctorCheck, DoctorReport, Event, ExecEvent, ExecResult, Lease,
                    PoolStatus, Port, Sample, SandboxInfo, Task, Version)

__all__ = [
    "__version__", "API_VERSION", "MIN_API_REVISION",
    "AsyncClient", "AsyncExecProcess", "AsyncExecStream", "AsyncTTYSession", "Client",
    "ExecStream", "TTYSession",
    "BuildFailed", "Busy", "ComposeboxError", "Conflict", "IncompatibleServer", "InvalidConfig",
    "IsADirectory", "NotFound", "OutputLimitExceeded", "PermissionDenied", "PolicyViolation",
    "PrerequisiteError", "SandboxUnavailable", "ServerError", "Timeout", "Unauthorized",
    "Connection", "DoctorCheck", "DoctorReport", "Event", "ExecEvent", "ExecResult", "Lease",
    "PoolStatus", "Port", "Sample", "SandboxInfo", "Task", "Version",
]
