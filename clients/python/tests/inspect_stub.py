"""A stand-in for the few names composebox.inspect imports from inspect_ai and pydantic, for
machines where neither is installed: the provider class can then run against the real server.
It mirrors inspect_ai's public signatures (util.ExecResult, OutputLimitExceededError,
SandboxEnvironment, SandboxEnvironmentLimits, sandboxenv...), nothing more."""

from __future__ import annotations

import sys
import types
from dataclasses import dataclass
from typing import Any, Dict, Generic, TypeVar

T = TypeVar("T")

registry: Dict[str, type] = {}


@dataclass
class ExecResult(Generic[T]):
    success: bool
    returncode: int
    stdout: T
    stderr: T


class OutputLimitExceededError(Exception):
    def __init__(self, limit_str: str, truncated_output: Any) -> None:
        self.limit_str = limit_str
        self.truncated_output = truncated_output
        super().__init__(f"The sandbox output stream limit of {limit_str} was exceeded.")


class SandboxUnavailableError(RuntimeError):
    pass


class SandboxConnection:
    def __init__(self, **kw: Any) -> None:
        self.__dict__.update(kw)


class SandboxEnvironment:
    def __init__(self) -> None:
        pass

    def as_type(self, cls: type) -> Any:
        if not isinstance(self, cls):
            raise TypeError(cls.__name__)
        return self


@dataclass
class ExecStdout:
    data: str


@dataclass
class ExecStderr:
    data: str


@dataclass
class ExecCompleted:
    exit_code: int


@dataclass
class ExecRemoteStreamingOptions:
    input: Any = None
    cwd: Any = None
    env: Any = None
    user: Any = None
    stdin_open: bool = False


@dataclass
class ExecRemoteAwaitableOptions:
    input: Any = None
    cwd: Any = None
    env: Any = None
    user: Any = None
    timeout: Any = None


class ExecRemoteProcess:
    def __aiter__(self) -> Any:
        return self


class SandboxEnvironmentLimits:
    MAX_EXEC_OUTPUT_SIZE = 10 * 1024 ** 2
    MAX_READ_FILE_SIZE = 100 * 1024 ** 2


def sandboxenv(name: str):
    def wrap(cls: type) -> type:
        registry[name] = cls
        return cls
    return wrap


class BaseModel:
    def __init__(self, **kw: Any) -> None:
        for k, v in type(self).__dict__.items():
            if not k.startswith("_") and not callable(v):
                setattr(self, k, v)
        for k in getattr(type(self), "__annotations__", {}):
            if not hasattr(self, k):
                setattr(self, k, None)
        self.__dict__.update(kw)

    def model_dump(self, exclude_none: bool = False, by_alias: bool = False) -> Dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if not (exclude_none and v is None)}


def Field(default: Any = None, default_factory: Any = None) -> Any:
    return default_factory() if default_factory else default


def ConfigDict(**kw: Any) -> Dict[str, Any]:
    return kw


def install() -> list:
    """Put the stand-ins in sys.modules; returns the names to remove afterwards."""
    util = types.ModuleType("inspect_ai.util")
    for name in ("ExecResult", "OutputLimitExceededError", "SandboxUnavailableError",
                 "SandboxConnection", "SandboxEnvironment", "SandboxEnvironmentLimits",
                 "sandboxenv", "ExecStdout", "ExecStderr", "ExecCompleted", "ExecRemoteProcess",
                 "ExecRemoteStreamingOptions", "ExecRemoteAwaitableOptions"):
        setattr(util, name, globals()[name])
    util.SandboxEnvironmentConfigType = Any
    pkg = types.ModuleType("inspect_ai")
    pkg.util = util
    pyd = types.ModuleType("pydantic")
    pyd.BaseModel = BaseModel
    pyd.Field = Field
    pyd.ConfigDict = ConfigDict
    added = {"inspect_ai": pkg, "inspect_ai.util": util, "pydantic": pyd}
    for k, v in added.items():
        sys.modules[k] = v
    return list(added) + ["composebox.inspect", "composebox._registry"]
