"""A correct write path for the async client's Unix socket connections, where anyio needs one.

anyio before 3.7.1 (Debian 12 ships 3.6.2) resends its buffer from the start after a partial
write on a Unix socket (agronholm/anyio#579, fixed in 3.7.1), so any request body larger than
the socket's buffer (a file write, an exec's input) reaches the server corrupted and longer than
its Content-Length; the bytes past it then break the next request on the connection. httpx's
async transport writes through that code, so with such an anyio the async client gives its
connection pool a network backend whose Unix socket streams write with asyncio's own
``sock_sendall`` (see :mod:`composebox._uds_sendall`). With a fixed anyio nothing changes, and
nothing of httpcore's network backend API is imported.
"""

from __future__ import annotations

import importlib.metadata
import os
import types
import typing

# The first anyio release that writes Unix sockets correctly.
FIXED_ANYIO = (3, 7, 1)


def _release(version: str) -> typing.Tuple[int, ...]:
    parts = []
    for p in version.split(".")[:3]:
        digits = ""
        for ch in p:
            if not ch.isdigit():
                break
            digits += ch
        parts.append(int(digits or 0))
    return tuple(parts)


def installed_version(module: types.ModuleType) -> typing.Optional[typing.Tuple[int, ...]]:
    """The release of the imported ``module`` from its distribution's metadata, or None when the
    module imported is not the one that metadata describes (a source tree put first on
    PYTHONPATH imports its own copy while the metadata found is another installation's)."""
    name = module.__name__
    try:
        dist = importlib.metadata.distribution(name)
        located = str(dist.locate_file(f"{name}/__init__.py"))
        if not os.path.samefile(located, str(module.__file__)):
            return None
        return _release(dist.version)
    except (importlib.metadata.PackageNotFoundError, OSError, TypeError, ValueError):
        return None


def anyio_breaks_unix_writes() -> bool:
    """True when the anyio that httpcore uses here is older than 3.7.1."""
    import anyio

    # anyio 4.0 added Unix datagram sockets: that copy has the fix, metadata or not.
    if hasattr(anyio, "create_unix_datagram_socket"):
        return False
    version = installed_version(anyio)
    # A 3.x copy that no metadata describes is taken to be the broken kind: the workaround is
    # correct with any anyio, only unneeded.
    return version is None or version < FIXED_ANYIO


def fix_unix_writes(transport: typing.Any) -> bool:
    """Give a fresh httpx.AsyncHTTPTransport (before its first request) the sendall backend, when
    this anyio needs it. True when it did; False when anyio is fixed, or when this httpx keeps
    its pool elsewhere (then nothing changes)."""
    if not anyio_breaks_unix_writes():
        return False
    # httpx has no public way to give its transport a network backend; every httpx from 0.23
    # to 0.28 keeps an httpcore pool in ``_pool``, whose ``network_backend`` is a constructor
    # argument stored as ``_network_backend``.
    pool = getattr(transport, "_pool", None)
    if pool is None or not hasattr(pool, "_network_backend"):
        return False
    from . import _uds_sendall

    pool._network_backend = _uds_sendall.Backend()
    return True
