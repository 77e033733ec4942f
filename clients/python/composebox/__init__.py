"""Python client of ``composebox serve``, and an inspect_ai sandbox provider
(``composebox.inspect``, registered as ``sandbox="composebox"``)."""

from .aio import AsyncClient, AsyncExecStream
from .client import Client, ExecStream
from .errors import (Busy, ComposeboxError, Conflict, InvalidConfig, IsADirectory, NotFound,
                     OutputLimitExceeded, PermissionDenied, PolicyViolation, PrerequisiteError,
                     SandboxUnavailable, ServerError, Timeout, Unauthorized)
from .types import (Connection, DoctorCheck, DoctorReport, Event, ExecEvent, ExecResult, Lease,
                    PoolStatus, Port, Sample, SandboxInfo, Task, Version)

__all__ = [
    "AsyncClient", "AsyncExecStream", "Client", "ExecStream",
    "Busy", "ComposeboxError", "Conflict", "InvalidConfig", "IsADirectory", "NotFound",
    "OutputLimitExceeded", "PermissionDenied", "PolicyViolation", "PrerequisiteError",
    "SandboxUnavailable", "ServerError", "Timeout", "Unauthorized",
    "Connection", "DoctorCheck", "DoctorReport", "Event", "ExecEvent", "ExecResult", "Lease",
    "PoolStatus", "Port", "Sample", "SandboxInfo", "Task", "Version",
]
