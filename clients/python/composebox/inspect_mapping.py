"""The inspect_ai provider's logic, as plain functions that need no inspect_ai.

``composebox.inspect`` is a thin shell over these: it passes inspect's own exception classes
and limits in, so everything here is testable where inspect_ai is not installed. The behaviour
follows inspect_ai's Docker provider: exec resolves cwd against the service's working directory,
runs as ``user`` with ``env`` added and ``input`` on stdin, and raises TimeoutError past
``timeout``; a missing executable is an ordinary failed result (exit 127); files are read as
UTF-8 text (UnicodeDecodeError otherwise, newlines kept) or bytes, up to the read limit.
"""

from __future__ import annotations

import errno
import json
import os
import posixpath
import re
import shlex
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple, Type, Union

from .errors import (ComposeboxError, InvalidConfig, IsADirectory, NotFound, OutputLimitExceeded,
                     PermissionDenied, SandboxUnavailable, Timeout)
from .types import Connection, ExecResult

PROVIDER_NAME = "composebox"

COMPOSE_FILES = ["compose.yaml", "compose.yml", "docker-compose.yaml", "docker-compose.yml"]
DOCKERFILE = "Dockerfile"

# inspect_ai's defaults, used when its limits cannot be read.
DEFAULT_MAX_EXEC_OUTPUT_SIZE = 10 * 1024 ** 2
DEFAULT_MAX_READ_FILE_SIZE = 100 * 1024 ** 2


def config_files() -> List[str]:
    """The files inspect looks for beside a task to pick this provider's config."""
    return COMPOSE_FILES + [DOCKERFILE]


def is_docker_compatible() -> bool:
    """It takes compose files and Dockerfiles, as the Docker provider does."""
    return True


@dataclass
class ProviderConfig:
    """The provider's own config (``sandbox=("composebox", ProviderConfig(...))`` through the
    pydantic model in composebox.inspect, or a dict that config_deserialize turns into one).

    Where the environment comes from: ``compose`` (a compose file, task directory or Dockerfile
    path) or ``compose_yaml`` (text); neither runs composebox's default image. The rest are task
    options of the server (``files``, ``env``, ``profiles``, ``policy``, ``default_service``,
    ``prebuilt``, ``ready_timeout``...). ``socket``/``url``/``token_file`` name a running server;
    by default the provider spawns a private one (``binary``, else composebox on PATH).
    """

    compose: Optional[str] = None
    compose_yaml: Optional[str] = None
    name: Optional[str] = None
    files: List[str] = field(default_factory=list)
    env: Dict[str, str] = field(default_factory=dict)
    profiles: List[str] = field(default_factory=list)
    policy: Dict[str, Any] = field(default_factory=dict)
    default_service: Optional[str] = None
    prebuilt: bool = False
    ready_timeout: Optional[float] = None
    socket: Optional[str] = None
    url: Optional[str] = None
    token_file: Optional[str] = None
    binary: Optional[str] = None


CONFIG_FIELDS = tuple(ProviderConfig.__dataclass_fields__)  # type: ignore[attr-defined]


def config_as_dict(config: Any) -> Optional[Dict[str, Any]]:
    """A config object as a dict: a mapping, a dataclass, or a pydantic model. None for a str
    or None."""
    if config is None or isinstance(config, str):
        return None
    if isinstance(config, Mapping):
        return dict(config)
    dump = getattr(config, "model_dump", None)
    if callable(dump):
        return dump(exclude_none=True, by_alias=True)
    if hasattr(config, "__dataclass_fields__"):
        return {k: getattr(config, k) for k in config.__dataclass_fields__}
    raise InvalidConfig(f"composebox sandbox config: unsupported type {type(config).__name__}")


def provider_config(config: Any) -> ProviderConfig:
    """Deserialise the provider's config from a dict (or return it as it is)."""
    if isinstance(config, ProviderConfig):
        return config
    d = config_as_dict(config) or {}
    unknown = sorted(set(d) - set(CONFIG_FIELDS))
    if unknown:
        raise InvalidConfig("composebox sandbox config: unknown field(s) " + ", ".join(unknown)
                            + "; known: " + ", ".join(CONFIG_FIELDS))
    return ProviderConfig(**{k: v for k, v in d.items() if v is not None})


def is_compose_config(d: Mapping[str, Any]) -> bool:
    """A compose project given as a model (inspect's ComposeConfig): it has services."""
    return "services" in d and not set(d) & {"compose", "compose_yaml"}


def task_request(task_name: str, config: Any) -> Tuple[Dict[str, Any], ProviderConfig]:
    """The keyword arguments of ``client.task_init`` for inspect's (task name, config), and the
    provider config they came from.

    - None: composebox's default image (one service, "default").
    - a str: a compose file, task directory or Dockerfile path; relative to the current
      directory (inspect resolves sandbox files against the task's directory before it calls
      the provider).
    - a compose model (inspect's ComposeConfig, or any object with ``services``): sent as
      compose YAML (JSON is YAML).
    - a ProviderConfig, its pydantic model, or a dict of its fields.
    """
    if config is None:
        return {"name": task_label(task_name)}, ProviderConfig()
    if isinstance(config, str):
        path = os.path.abspath(config)
        if not os.path.exists(path):
            raise InvalidConfig(f"composebox sandbox config {config}: no such file or directory")
        return {"name": task_label(task_name), "path": path}, ProviderConfig(compose=path)
    d = config_as_dict(config) or {}
    if is_compose_config(d):
        return ({"name": task_label(task_name), "compose_yaml": json.dumps(d)},
                ProviderConfig(compose_yaml=json.dumps(d)))
    pc = provider_config(config)
    req: Dict[str, Any] = {"name": pc.name or task_label(task_name)}
    if pc.compose and pc.compose_yaml:
        raise InvalidConfig("composebox sandbox config: give compose or compose_yaml, not both")
    if pc.compose:
        path = os.path.abspath(pc.compose)
        if not os.path.exists(path):
            raise InvalidConfig(f"composebox sandbox config: compose {pc.compose}: no such file or directory")
        req["path"] = path
    if pc.compose_yaml:
        req["compose_yaml"] = pc.compose_yaml
    if pc.files:
        req["files"] = [os.path.abspath(f) for f in pc.files]
    for key in ("env", "profiles", "policy", "default_service", "ready_timeout"):
        value = getattr(pc, key)
        if value:
            req[key] = value
    if pc.prebuilt:
        req["prebuilt"] = True
    return req, pc


def task_label(task_name: str) -> str:
    """inspect's task name as a composebox task name: lower case, [a-z0-9_-] (anything else
    made -), at most 40 characters, as the Docker provider shapes its project names. inspect's
    names ("inspect_evals/gdm_intercode_ctf") may hold slashes and spaces."""
    name = re.sub(r"[^a-z0-9_-]", "-", task_name.lower())
    name = re.sub(r"-+", "-", name).strip("-_")[:40].strip("-_")
    return name or "task"


def task_key(task_name: str, config: Any) -> str:
    """One key per (task, config) pair: inspect calls task_init once per pair, and sample_init
    names the same pair."""
    if config is None or isinstance(config, str):
        c = config
    else:
        try:
            c = json.dumps(config_as_dict(config), sort_keys=True, default=str)
        except ComposeboxError:
            c = repr(config)
    return json.dumps([task_name, c])


def sample_metadata(metadata: Optional[Mapping[str, Any]]) -> Dict[str, str]:
    """Sample metadata as the server takes it: every value as a string. The server interpolates
    each key the compose files reference as SAMPLE_METADATA_<KEY> (upper-cased, anything but
    letters, digits and _ made _), a superset of the Docker provider's rule."""
    out: Dict[str, str] = {}
    for k, v in (metadata or {}).items():
        if v is None:
            continue
        out[str(k)] = v if isinstance(v, str) else (json.dumps(v) if isinstance(v, (dict, list)) else str(v))
    return out


def metadata_var(key: str) -> str:
    """The variable a metadata key is interpolated through (as the server computes it)."""
    up = key.upper()
    return "SAMPLE_METADATA_" + "".join(ch if (ch.isascii() and ch.isalnum()) or ch == "_" else "_" for ch in up)


def order_environments(services: List[str], default_service: str) -> List[str]:
    """Services with the default one first: inspect takes the first environment as the
    default."""
    if default_service not in services:
        raise ComposeboxError(f"sample: default service {default_service!r} is not among {services}")
    return [default_service] + [s for s in services if s != default_service]


def exec_kwargs(cmd: List[str], input: Union[str, bytes, None] = None, cwd: Optional[str] = None,
                env: Optional[Mapping[str, str]] = None, user: Optional[str] = None,
                timeout: Optional[int] = None, *,
                output_limit: int = DEFAULT_MAX_EXEC_OUTPUT_SIZE) -> Dict[str, Any]:
    """The keyword arguments of ``client.exec`` for inspect's exec arguments.

    A relative cwd resolves against the service's working directory on the server. Past
    ``output_limit`` bytes on a stream the command is killed and OutputLimitExceededError
    raised, as the Docker provider does.
    """
    if isinstance(cmd, str):
        raise TypeError("exec: cmd is a list of arguments")
    kw: Dict[str, Any] = {"output_limit": int(output_limit), "strict_limit": True}
    if input is not None:
        kw["input"] = input.encode("utf-8") if isinstance(input, str) else bytes(input)
    if cwd:
        kw["cwd"] = cwd
    if env:
        kw["env"] = {str(k): str(v) for k, v in env.items()}
    if user:
        kw["user"] = user
    if timeout is not None:
        kw["timeout"] = float(timeout)
    return kw


def exec_result_fields(result: ExecResult) -> Dict[str, Any]:
    """inspect's ExecResult fields: output decoded as UTF-8 with U+FFFD for invalid bytes."""
    return {"success": result.exit_code == 0, "returncode": result.exit_code,
            "stdout": result.stdout_text, "stderr": result.stderr_text}


def human_size(n: int) -> str:
    """A size as inspect writes limits ("10 MiB")."""
    for unit, size in (("GiB", 1024 ** 3), ("MiB", 1024 ** 2), ("KiB", 1024)):
        if n >= size and n % size == 0:
            return f"{n // size} {unit}"
    return f"{n} bytes"


ErrorFactory = Callable[..., BaseException]


def map_error(err: BaseException, *, op: str, file: Optional[str] = None,
              timeout: Optional[float] = None, limit: Optional[int] = None,
              unavailable: Type[BaseException] = RuntimeError,
              output_limit: Optional[ErrorFactory] = None) -> BaseException:
    """The exception inspect expects for a composebox error raised by ``op`` ("exec", "read",
    "write"): TimeoutError, PermissionError, FileNotFoundError, IsADirectoryError (OSErrors
    with errno and the file name), ``output_limit(limit_str, truncated_output)`` and
    ``unavailable(message)``. Anything else is returned unchanged."""
    if isinstance(err, Timeout):
        e: BaseException = TimeoutError(
            f"Command timed out after {timeout:g} seconds" if timeout is not None else str(err))
        partial = getattr(err, "result", None)
        if partial is not None:
            text = partial.stdout_text + partial.stderr_text
            if text:
                setattr(e, "truncated_output", text)
        return e
    if isinstance(err, PermissionDenied):
        return PermissionError(errno.EACCES, "Permission denied.", file if file is not None else str(err))
    if isinstance(err, IsADirectory):
        return IsADirectoryError(errno.EISDIR, "Is a directory.", file if file is not None else str(err))
    if isinstance(err, NotFound):
        return FileNotFoundError(errno.ENOENT, "No such file or directory.",
                                 file if file is not None else str(err))
    if isinstance(err, OutputLimitExceeded):
        limit_str = human_size(limit) if limit else "the limit"
        truncated = None
        partial = getattr(err, "result", None)
        if op == "exec" and partial is not None:
            truncated = partial.stdout_text + partial.stderr_text
        if output_limit is not None:
            return output_limit(limit_str, truncated)
        return err
    if isinstance(err, SandboxUnavailable):
        return unavailable(str(err))
    return err


def is_directory_alias(file: str) -> bool:
    """"." and ".." (and paths ending in them) name directories: reading them is
    IsADirectoryError without asking the server."""
    return posixpath.basename(file.rstrip("/")) in (".", "..")


def decode_text(data: bytes) -> str:
    """File bytes as UTF-8 text, strictly (UnicodeDecodeError), newlines kept as they are."""
    return data.decode("utf-8")


def encode_contents(contents: Union[str, bytes]) -> bytes:
    return contents.encode("utf-8") if isinstance(contents, str) else bytes(contents)


def connection_fields(conn: Connection, *, user: Optional[str] = None) -> Dict[str, Any]:
    """inspect's SandboxConnection fields for a service: the server's ``docker exec`` command
    (with ``--user`` when inspect asks for one), the VS Code attach command (only without a
    user: VS Code cannot attach as one), the published ports grouped by container port, and
    the container name."""
    command = conn.command
    if user:
        shell = ["sh"]
        try:
            tokens = shlex.split(conn.command)
            if conn.container_name in tokens:
                shell = tokens[tokens.index(conn.container_name) + 1:] or shell
        except ValueError:
            pass
        command = shlex.join(["docker", "exec", "-it", "--user", user, conn.container_name] + shell)
    groups: Dict[Tuple[int, str], List[Dict[str, Any]]] = {}
    for p in conn.ports:
        groups.setdefault((p.container_port, p.protocol or "tcp"), []).append(
            {"host_ip": p.host_ip, "host_port": p.host_port})
    ports = [{"container_port": cp, "protocol": proto, "mappings": maps}
             for (cp, proto), maps in sorted(groups.items())]
    return {
        "type": PROVIDER_NAME,
        "command": command,
        "vscode_command": None if user else ["remote-containers.attachToRunningContainer",
                                             conn.container_name],
        "ports": ports or None,
        "container": conn.container_name,
    }


def cli_cleanup_args(id: Optional[str]) -> List[str]:
    """The composebox command that ``inspect sandbox cleanup composebox [ID]`` runs: a project
    or container, or else every project whose owner process is dead (samples left behind by a
    server that was killed, or by a run with --no-sandbox-cleanup once its server exited)."""
    if id:
        return ["cleanup", id]
    return ["cleanup", "--stale"]
