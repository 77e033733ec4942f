"""The client's release, and the server API it speaks."""

import os

# One version for the package and the composebox binary: the VERSION file beside this module
# (the repository's VERSION links to it; make build stamps the binary with it).
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "VERSION"), encoding="ascii") as _f:
    __version__ = _f.read().strip()

# The prefix of every route this client calls.
API_VERSION = "v1"

# The lowest revision of API_VERSION that has everything this client calls: the server reports
# its own in /v1/version (``api_revision``), and the client refuses an older one. Raise it
# when the client starts to rely on something a newer server added.
MIN_API_REVISION = 2
