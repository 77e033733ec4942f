"""Where the ``composebox`` binary is: the one a platform wheel bundles, else $COMPOSEBOX_BIN,
else PATH. ``Client.spawn()``, the inspect_ai provider and the ``composebox`` console script all
look it up here. Imports nothing heavy: the console script runs through it on every call."""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import NoReturn, Optional

# The platform wheels put the binary here, inside the package; the pure wheel and the sdist
# have none.
BUNDLED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_bin", "composebox")


def _missing(message: str) -> NoReturn:
    from .errors import PrerequisiteError  # only now: errors imports typing

    raise PrerequisiteError(message)


def bundled_binary() -> Optional[str]:
    """The binary this package carries, or None (the pure wheel, a source checkout)."""
    return BUNDLED if os.access(BUNDLED, os.X_OK) else None


def _on_path(name: str, skip: Optional[str]) -> Optional[str]:
    """``name`` on PATH, leaving out ``skip``."""
    for d in os.environ.get("PATH", os.defpath).split(os.pathsep):
        candidate = os.path.join(d or os.curdir, name)
        if not (os.path.isfile(candidate) and os.access(candidate, os.X_OK)):
            continue
        if skip is not None and os.path.realpath(candidate) == skip:
            continue
        return candidate
    return None


def find_binary(binary: Optional[str] = None, what: str = "spawn composebox serve") -> str:
    """The composebox binary: ``binary`` when given (a path, or a name on PATH), else the
    bundled one, else $COMPOSEBOX_BIN, else ``composebox`` on PATH. ``what`` names the
    operation in the error raised when there is none."""
    # The console script itself is never the binary: it would run itself again.
    script = os.path.realpath(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if not binary:
        binary = bundled_binary() or os.environ.get("COMPOSEBOX_BIN")
    if binary:
        if os.sep in binary:
            if os.path.isfile(binary) and os.access(binary, os.X_OK):
                return binary
            _missing(f"{what}: {binary} is not an executable file")
        found = _on_path(binary, script)
        if found:
            return found
        _missing(f"{what}: no {binary!r} on PATH")
    found = _on_path("composebox", script)
    if not found:
        _missing(
            f"{what}: no composebox binary: this composebox package has none (install a "
            "platform wheel: pip install composebox on Linux x86_64 or aarch64), $COMPOSEBOX_BIN "
            "is not set and there is no composebox on PATH (build it with make build)")
    return found
