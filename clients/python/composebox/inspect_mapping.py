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
from .types import Connection, ExecResult, Sample

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


# What names the server: the operator's, never a sandbox spec's. A spec can come from a dataset
# row, and each of these names a host program or a host file: `binary` would run any program
# (`binary: /bin/sh` runs a file named `serve` from the eval's directory), `url` with
# `token_file` would send any host file as a bearer token to any address, and `socket` would
# point the client at any Unix socket of the host. Each is refused with the variable (or the
# configure() argument) that sets it.
OPERATOR_FIELDS = {
    "binary": "COMPOSEBOX_BIN",
    "socket": "COMPOSEBOX_SOCKET",
    "url": "COMPOSEBOX_URL",
    "token_file": "COMPOSEBOX_TOKEN_FILE",
}

# The prefix of every task the provider creates, so that `inspect sandbox cleanup composebox`
# removes what inspect left and nothing else.
TASK_PREFIX = "inspect-"


@dataclass
class ProviderConfig:
    """The fields a sandbox spec may carry (``sandbox=("composebox", {...})``, or the pydantic
    model in composebox.inspect).

    Where the environment comes from: ``compose`` (a compose file, task directory or Dockerfile
    path) or ``compose_yaml`` (text); neither runs composebox's default image. The rest are task
    options of the server (``files``, ``env``, ``profiles``, ``policy``, ``default_service``,
    ``prebuilt``, ``ready_timeout``) and ``name`` (the task's name in composebox, after
    "inspect-"). ``policy`` may only narrow what the server's operator allows: the server
    refuses anything beyond its ceiling (``policy_violation``). Which server, and which
    binary runs it, is the operator's (:class:`ServerSettings`), never a spec's.
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


CONFIG_FIELDS = tuple(ProviderConfig.__dataclass_fields__)  # type: ignore[attr-defined]


def refuse_operator_fields(fields: Any) -> None:
    """InvalidConfig when a spec names the server, its binary or its token: those come from
    the operator's environment or the runner's code."""
    named = [f for f in OPERATOR_FIELDS if f in fields]
    if named:
        how = "; ".join(f"{f}: ${OPERATOR_FIELDS[f]} or composebox.inspect.configure({f}=...)"
                        for f in named)
        raise InvalidConfig(
            "composebox sandbox config: " + ", ".join(repr(f) for f in named)
            + " cannot come from a sandbox spec (a spec may come from a dataset row, and these "
            "name a host program or host file); the runner's operator sets them (" + how + ")")


@dataclass
class ServerSettings:
    """Which server the provider talks to, set by the operator: ``$COMPOSEBOX_SOCKET`` or
    ``$COMPOSEBOX_URL`` (with ``$COMPOSEBOX_TOKEN`` or ``$COMPOSEBOX_TOKEN_FILE``) name a
    running server; otherwise the provider spawns a private ``composebox serve`` of
    ``$COMPOSEBOX_BIN`` (else composebox on PATH). ``$COMPOSEBOX_ARGS`` (shell words) are global
    flags given to every composebox command the provider runs, the spawned server and the
    cleanup (``--engine``, ``--backend``...); ``$COMPOSEBOX_SERVE_ARGS`` are flags of the
    spawned ``serve`` alone: the ceiling of what a spec's ``policy`` may ask for (``--allow``,
    ``--allow-cap``, ``--allow-mount-root``, ``--policy``, ``--pass-env``, ``--task-root``). The
    runner's code may set any of them with composebox.inspect.configure(), which takes
    precedence."""

    binary: Optional[str] = None
    socket: Optional[str] = None
    url: Optional[str] = None
    token_file: Optional[str] = None
    args: List[str] = field(default_factory=list)
    serve_args: List[str] = field(default_factory=list)

    @classmethod
    def from_env(cls, environ: Optional[Mapping[str, str]] = None,
                 **overrides: Any) -> "ServerSettings":
        env = os.environ if environ is None else environ
        s = cls(binary=env.get("COMPOSEBOX_BIN") or None,
                socket=env.get("COMPOSEBOX_SOCKET") or None,
                url=env.get("COMPOSEBOX_URL") or None,
                token_file=env.get("COMPOSEBOX_TOKEN_FILE") or None,
                args=shlex.split(env.get("COMPOSEBOX_ARGS") or ""),
                serve_args=shlex.split(env.get("COMPOSEBOX_SERVE_ARGS") or ""))
        for k, v in overrides.items():
            if v is not None:
                setattr(s, k, list(v) if k in ("args", "serve_args") else v)
        if overrides.get("socket"):
            s.url = None
        if overrides.get("url"):
            s.socket = None
        return s

    @property
    def spawns(self) -> bool:
        return not (self.socket or self.url)


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
    refuse_operator_fields(d)
    unknown = sorted(set(d) - set(CONFIG_FIELDS))
    if unknown:
        raise InvalidConfig("composebox sandbox config: unknown field(s) " + ", ".join(unknown)
                            + "; a spec may carry " + ", ".join(CONFIG_FIELDS))
    return ProviderConfig(**{k: v for k, v in d.items() if v is not None})


def is_compose_config(d: Mapping[str, Any]) -> bool:
    """A compose project given as a model (inspect's ComposeConfig): it has services."""
    return "services" in d and not set(d) & {"compose", "compose_yaml"}


@dataclass
class TaskPlan:
    """What one sandbox config asks of the server: ``key`` (equal for equal configs, whatever
    task names them), the ``request`` (keyword arguments of ``client.task_init``) and the
    provider ``config`` it came from."""

    key: str
    request: Dict[str, Any]
    config: ProviderConfig


def _existing(path: str, what: str) -> str:
    full = os.path.abspath(path)
    if not os.path.exists(full):
        raise InvalidConfig(f"composebox sandbox config: {what}{path}: no such file or directory")
    return full


def task_plan(config: Any) -> TaskPlan:
    """The task a sandbox config needs.

    - None: composebox's default image (one service, "default").
    - a str: a compose file, task directory or Dockerfile path; relative to the current
      directory (inspect runs task_init and sample_init in the task's directory).
    - a compose model (inspect's ComposeConfig, or any object with ``services``): sent as
      compose YAML (JSON is YAML).
    - a ProviderConfig, its pydantic model, or a dict of its fields.

    inspect calls task_init("startup", config) once per distinct config for a whole eval, then
    sample_init with each task's own name, so a task is keyed by its config alone, and named
    from it: "inspect-" and the config's ``name``, else the directory of its compose file,
    else "default" (the default image) or "compose" (inline YAML).
    """
    if config is None:
        pc = ProviderConfig()
        label = "default"
        req: Dict[str, Any] = {}
    elif isinstance(config, str):
        path = _existing(config, "")
        pc = ProviderConfig(compose=path)
        label = _path_label(path)
        req = {"path": path}
    else:
        d = config_as_dict(config) or {}
        if is_compose_config(d):
            yaml_text = json.dumps(d)
            pc = ProviderConfig(compose_yaml=yaml_text)
            label = str(d.get("name") or "compose")
            req = {"compose_yaml": yaml_text}
        else:
            pc = provider_config(config)
            if pc.compose and pc.compose_yaml:
                raise InvalidConfig("composebox sandbox config: give compose or compose_yaml, not both")
            req = {}
            label = "default"
            if pc.compose:
                req["path"] = _existing(pc.compose, "compose ")
                label = _path_label(req["path"])
            if pc.compose_yaml:
                req["compose_yaml"] = pc.compose_yaml
                label = "compose"
            if pc.files:
                req["files"] = [_existing(f, "files: ") for f in pc.files]
            for key in ("env", "profiles", "policy", "default_service", "ready_timeout"):
                value = getattr(pc, key)
                if value:
                    req[key] = value
            if pc.prebuilt:
                req["prebuilt"] = True
            if pc.name:
                label = pc.name
    req["name"] = task_label(label)
    key = json.dumps(req, sort_keys=True, default=str)
    return TaskPlan(key=key, request=req, config=pc)


def _path_label(path: str) -> str:
    """The name of a task given by path: its directory's ("ctf" for tasks/ctf/compose.yaml)."""
    if os.path.isdir(path):
        return os.path.basename(path.rstrip(os.sep)) or "task"
    return os.path.basename(os.path.dirname(path)) or "task"


def task_label(name: str) -> str:
    """A composebox task name for the provider: "inspect-" and the name in lower case, [a-z0-9_-]
    (anything else made -), at most 40 characters in all, as the Docker provider shapes its
    project names."""
    label = re.sub(r"[^a-z0-9_-]", "-", name.lower())
    label = re.sub(r"-+", "-", label).strip("-_")[:40 - len(TASK_PREFIX)].strip("-_")
    return TASK_PREFIX + (label or "task")


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


def exec_remote_kwargs(cmd: List[str], options: Any) -> Dict[str, Any]:
    """The keyword arguments of ``AsyncClient.exec_process`` for inspect's exec_remote options
    (input, cwd, env, user, stdin_open; the polling options have nothing to tune here)."""
    if isinstance(cmd, str):
        raise TypeError("exec_remote: cmd is a list of arguments")
    kw: Dict[str, Any] = {"stdin_open": bool(getattr(options, "stdin_open", False))}
    data = getattr(options, "input", None)
    if data is not None:
        kw["input"] = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    for key in ("cwd", "user"):
        value = getattr(options, key, None)
        if value:
            kw[key] = value
    env = getattr(options, "env", None)
    if env:
        kw["env"] = {str(k): str(v) for k, v in env.items()}
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


def cli_cleanup_projects(listing: Mapping[str, Any]) -> List[str]:
    """What ``inspect sandbox cleanup composebox`` with no id removes, from ``composebox ls
    --json --all``: the projects of tasks the provider made (named "inspect-...") whose owner
    is gone, the samples a killed eval left (stale) and those ``--no-sandbox-cleanup`` kept
    (detached). Samples of a running eval, and every project another runner made, stay."""
    out = []
    for p in listing.get("projects") or []:
        if str(p.get("task", "")).startswith(TASK_PREFIX) and p.get("status") in ("stale", "detached"):
            out.append(str(p["name"]))
    return out


def left_running_notice(samples: List[Sample]) -> str:
    """What task_cleanup prints for the samples --no-sandbox-cleanup kept: each sample (inspect's
    id and epoch), its project and containers, and the commands that remove them."""
    rows = [("Sample ID", "Epoch", "Project", "Container(s)")]
    for s in samples:
        sample_id, _, epoch = (s.id or "").rpartition("-")
        if not sample_id:
            sample_id, epoch = s.id or "", ""
        rows.append((sample_id, epoch, s.project,
                     " ".join(b.container_name for b in s.sandboxes if b.container_name)))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = ["", "composebox sandbox environments (not yet cleaned up):"]
    lines += ["  " + "  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip() for r in rows]
    lines += ["",
              "Cleanup all inspect samples : inspect sandbox cleanup composebox",
              "Cleanup one sample          : inspect sandbox cleanup composebox <project>",
              "  (or: composebox down <project>)", ""]
    return "\n".join(lines)


# Samples one process's provider runs at once unless inspect's --max-sandboxes says otherwise:
# twice the cores, as inspect's Docker provider does (a sample's containers mostly wait on the
# model), and at least 4.
def default_concurrency(cpus: Optional[int] = None) -> int:
    return max(4, 2 * (cpus if cpus is not None else (os.cpu_count() or 1)))


# Execs that ask for inspect's concurrency limit (exec(..., concurrency=True), the default) run
# at most this many at once per process: half the server's default bound per lease, which
# leaves room for file transfers, sample starts and streamed execs. The rest wait their turn in
# the provider rather than in busy retries. concurrency=False skips the queue (the client still
# retries busy answers).
EXEC_CONCURRENCY = 32
