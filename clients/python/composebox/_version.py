"""The client's release, and the server API it speaks."""

__version__ = "0.2.0"

# The prefix of every route this client calls.
API_VERSION = "v1"

# The lowest revision of API_VERSION that has everything this client calls: the server reports
# its own in /v1/version (``api_revision``), and the client refuses an older one. Raise it
# when the client starts to rely on something a newer server added.
MIN_API_REVISION = 2
