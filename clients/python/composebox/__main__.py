"""``python -m composebox ARGS`` and the ``composebox`` console script: run the composebox
binary (the bundled one, else $COMPOSEBOX_BIN, else PATH) with ARGS, in this process's place,
so that its exit code, signals and terminal are the binary's own."""

from __future__ import annotations

import os
import sys

from ._binary import find_binary

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import List, Optional


def main(argv: Optional[List[str]] = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    try:
        binary = find_binary(None, what="composebox")
    except Exception as e:
        from .errors import PrerequisiteError

        if not isinstance(e, PrerequisiteError):
            raise
        print(f"composebox: prerequisite: {e}", file=sys.stderr)
        return 125
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(binary, [binary] + list(args))
    return 125  # not reached: execv replaces this process or raises


if __name__ == "__main__":
    sys.exit(main())
