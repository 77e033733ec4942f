"""Which HTTP stack this run tests. `make test-python` runs the suite twice and says which run
is which in $COMPOSEBOX_TEST_STACK: "installed" (what the interpreter has installed: Debian's
python3-httpx, httpcore and anyio on Debian) or "modern" (the current releases' sources first on
PYTHONPATH). A run that silently imported the other stack would test it twice and this one
never."""

import os

import anyio
import httpcore
import httpx
import pytest

from composebox import _uds

STACK = os.environ.get("COMPOSEBOX_TEST_STACK", "")


def versions() -> str:
    return f"httpx {httpx.__version__} ({httpx.__file__}), httpcore {httpcore.__version__}"


def test_the_stack_is_the_one_named():
    if not STACK:
        pytest.skip("COMPOSEBOX_TEST_STACK is unset (make test-python sets it)")
    if STACK == "installed":
        for mod in (httpx, httpcore, anyio):
            parent = os.path.basename(os.path.dirname(os.path.dirname(str(mod.__file__))))
            assert parent in ("dist-packages", "site-packages"), versions()
        # The metadata found describes the anyio imported, and decides the Unix socket
        # workaround (Debian 12's anyio 3.6.2 needs it).
        installed = _uds.installed_version(anyio)
        assert installed is not None
        assert _uds.anyio_breaks_unix_writes() == (installed < _uds.FIXED_ANYIO)
    elif STACK == "modern":
        assert os.environ.get("PYTHONPATH"), "the modern run puts its sources on PYTHONPATH"
        first = os.path.realpath(os.environ["PYTHONPATH"].split(os.pathsep)[0])
        for mod in (httpx, httpcore, anyio):
            assert os.path.realpath(str(mod.__file__)).startswith(first + os.sep), versions()
        assert int(httpcore.__version__.split(".")[0]) >= 1, versions()
        assert not _uds.anyio_breaks_unix_writes()
    else:
        pytest.fail(f"COMPOSEBOX_TEST_STACK={STACK!r}: expected installed or modern")
