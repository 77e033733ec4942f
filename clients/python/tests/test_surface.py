"""The package's public surface as type checkers and editors see it: every public method names
its arguments (no ``*args``/``**kwargs``), the sync and async clients take the same ones, and
the package says it is typed."""

import inspect
import os

import pytest

import composebox
from composebox import (AsyncClient, AsyncExecProcess, AsyncExecStream, AsyncTTYSession, Client,
                        ExecStream, TTYSession)


def public_methods(cls):
    return {name: member for name, member in inspect.getmembers(cls)
            if not name.startswith("_") and callable(member)}


@pytest.mark.parametrize("cls", [Client, AsyncClient, ExecStream, AsyncExecStream, TTYSession,
                                 AsyncTTYSession, AsyncExecProcess],
                         ids=lambda c: c.__name__)
def test_public_methods_name_their_arguments(cls):
    for name, method in public_methods(cls).items():
        for p in inspect.signature(method).parameters.values():
            assert p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL), f"{cls.__name__}.{name}: {p}"


def test_sync_and_async_clients_take_the_same_arguments():
    sync, aio = public_methods(Client), public_methods(AsyncClient)
    # exec_process (a command talked to both ways, for inspect's exec_remote) is asyncio's only.
    assert set(sync) - {"close"} == set(aio) - {"aclose", "open", "exec_process"}
    for name in sync.keys() & aio.keys():
        s, a = inspect.signature(sync[name]), inspect.signature(aio[name])
        assert [(p.name, p.kind, p.default) for p in s.parameters.values()] == \
            [(p.name, p.kind, p.default) for p in a.parameters.values()], name
        if name not in ("spawn", "server_log"):
            assert inspect.iscoroutinefunction(aio[name]), name
    assert list(inspect.signature(Client.__init__).parameters) == \
        list(inspect.signature(AsyncClient.__init__).parameters)


def test_every_error_is_exported():
    for name in dir(composebox.errors):
        obj = getattr(composebox.errors, name)
        if isinstance(obj, type) and issubclass(obj, composebox.ComposeboxError):
            assert getattr(composebox, name) is obj and name in composebox.__all__, name


def test_the_package_is_marked_typed():
    assert os.path.isfile(os.path.join(os.path.dirname(composebox.__file__), "py.typed"))
