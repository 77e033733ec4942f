"""Errors raised by the composebox client.

Every error is a :class:`ComposeboxError`. The ones that have a Python built-in counterpart also
derive from it (``NotFound`` is a ``FileNotFoundError``, ``Timeout`` a ``TimeoutError``...), so
callers can catch either. The server reports failures as ``{kind, message, detail}``; ``kind``
selects the class (see :data:`KIND_TO_ERROR`).
"""

from __future__ import annotations

import errno as _errno
from typing import Any, Dict, Optional, Type


class ComposeboxError(Exception):
    """Base of every composebox error.

    Attributes: ``kind`` (the server's error kind, "internal" when it gave none), ``message``,
    ``detail`` (a dict of extra facts, possibly empty), ``status`` (the HTTP status, 0 when the
    error did not come from a response) and, for an exec that timed out or hit a strict output
    limit, ``result``: the partial :class:`~composebox.types.ExecResult`.
    """

    kind = "internal"

    def __init__(self, message: str = "", *, kind: Optional[str] = None,
                 detail: Optional[Dict[str, Any]] = None, status: int = 0,
                 result: Any = None) -> None:
        super().__init__(message)
        self.message = message
        if kind is not None:
            self.kind = kind
        self.detail = detail or {}
        self.status = status
        self.result = result

    def __str__(self) -> str:
        return self.message


class InvalidConfig(ComposeboxError, ValueError):
    """The request or the compose project is invalid."""

    kind = "invalid_config"


class PolicyViolation(ComposeboxError):
    """The compose project asks for something the security policy denies."""

    kind = "policy_violation"


class PrerequisiteError(ComposeboxError):
    """The host cannot run composebox (engine missing, image absent with prebuilt, ...)."""

    kind = "prerequisite"


class NotFound(ComposeboxError, FileNotFoundError):
    """No such file, task, sample, service or lease."""

    kind = "not_found"
    _errno = _errno.ENOENT


class IsADirectory(ComposeboxError, IsADirectoryError):
    """A file operation met a directory."""

    kind = "is_a_directory"
    _errno = _errno.EISDIR


class PermissionDenied(ComposeboxError, PermissionError):
    """The sandbox's user may not do this (read, write, execute)."""

    kind = "permission_denied"
    _errno = _errno.EACCES


class Timeout(ComposeboxError, TimeoutError):
    """An exec (or another operation) ran past its timeout; ``result`` holds the partial output."""

    kind = "timeout"
    _errno = _errno.ETIMEDOUT


class OutputLimitExceeded(ComposeboxError):
    """An output or file size limit was exceeded."""

    kind = "output_limit"


class SandboxUnavailable(ComposeboxError):
    """The sandbox's container is stopped or gone, or the server cannot reach the engine."""

    kind = "unavailable"


class Conflict(ComposeboxError):
    """The resource is in a state that forbids the operation (or already exists)."""

    kind = "conflict"


class Busy(ComposeboxError):
    """The lease runs as many requests as the server allows at once."""

    kind = "busy"


class Unauthorized(ComposeboxError, PermissionError):
    """The TCP listener refused the bearer token."""

    kind = "unauthorized"
    _errno = _errno.EACCES


class BuildFailed(ComposeboxError):
    """A task's image did not build: the engine ran its Dockerfile and a step failed (the
    task's fault, not composebox's). ``image``, ``step`` (as the builder announced it, e.g.
    "Step 3/5 : RUN make"; empty when the build failed before its first step) and ``log`` (the
    tail of the build log) come from the server's detail."""

    kind = "build_failed"

    @property
    def image(self) -> str:
        return str(self.detail.get("image") or "")

    @property
    def step(self) -> str:
        return str(self.detail.get("step") or "")

    @property
    def log(self) -> str:
        return str(self.detail.get("log") or "")


class Unsupported(ComposeboxError, NotImplementedError):
    """The server's backend cannot do this (fork, snapshot or reset on Kubernetes): the message
    names the backend and says why."""

    kind = "unsupported"


class ServerError(ComposeboxError):
    """The server failed in a way that has no kind of its own."""

    kind = "internal"


class IncompatibleServer(ComposeboxError):
    """The server does not speak the API this client does: another API version, an older
    revision than the client needs, or no composebox version answer at all. Raised by the
    client's first request (``Client.spawn``, ``AsyncClient.open``), before anything else is
    sent.

    Attributes besides ComposeboxError's: ``server`` (the server's
    :class:`~composebox.types.Version`, None when it gave none), ``client_version``,
    ``client_api`` and ``min_api_revision`` (what this client speaks and needs).
    """

    kind = "incompatible_server"

    def __init__(self, message: str = "", *, server: Any = None, client_version: str = "",
                 client_api: str = "", min_api_revision: int = 0, status: int = 0) -> None:
        super().__init__(message, status=status)
        self.server = server
        self.client_version = client_version
        self.client_api = client_api
        self.min_api_revision = min_api_revision


# The kinds the server sends. IncompatibleServer is the client's own finding, not a server kind.
KIND_TO_ERROR: Dict[str, Type[ComposeboxError]] = {
    cls.kind: cls
    for cls in (InvalidConfig, PolicyViolation, PrerequisiteError, NotFound, IsADirectory,
                PermissionDenied, Timeout, OutputLimitExceeded, SandboxUnavailable, Conflict,
                Busy, Unauthorized, BuildFailed, Unsupported, ServerError)
}

# The fixed HTTP status of each kind, as the server documents it; used when a response has no
# JSON error body (a proxy's, or a cut connection's).
STATUS_TO_KIND: Dict[int, str] = {
    400: "invalid_config",
    401: "unauthorized",
    403: "permission_denied",
    404: "not_found",
    409: "conflict",
    413: "output_limit",
    422: "policy_violation",
    424: "prerequisite",
    429: "busy",
    500: "internal",
    501: "unsupported",
    503: "unavailable",
    504: "timeout",
}


def error_from_body(status: int, body: Any, fallback_message: str = "") -> ComposeboxError:
    """Build the error for a failed response: ``body`` is its decoded JSON (or anything else
    when the body was not an error object)."""
    kind = None
    message = ""
    detail: Dict[str, Any] = {}
    if isinstance(body, dict) and isinstance(body.get("kind"), str):
        kind = body["kind"]
        message = str(body.get("message") or "")
        d = body.get("detail")
        if isinstance(d, dict):
            detail = d
    if kind is None:
        kind = STATUS_TO_KIND.get(status, "internal")
    if not message:
        message = fallback_message or f"request failed with HTTP {status}"
    return make_error(kind, message, detail=detail, status=status)


def make_error(kind: str, message: str, *, detail: Optional[Dict[str, Any]] = None,
               status: int = 0) -> ComposeboxError:
    """The error of ``kind``; an unknown kind gives a plain ComposeboxError carrying it."""
    cls = KIND_TO_ERROR.get(kind, ComposeboxError)
    err = cls(message, kind=kind, detail=detail, status=status)
    code = getattr(cls, "_errno", None)
    if code is not None and isinstance(err, OSError):
        # OSError subclasses: give them the errno and filename a caller of os functions expects.
        err.errno = code
        err.strerror = message
        path = (detail or {}).get("path")
        if isinstance(path, str):
            err.filename = path
    if detail and isinstance(detail.get("result"), dict):
        from .types import ExecResult

        try:
            err.result = ExecResult.from_json(detail["result"])
        except (KeyError, TypeError, ValueError):
            err.result = None
    return err
