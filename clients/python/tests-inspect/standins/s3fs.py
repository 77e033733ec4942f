"""Stand-in for s3fs (not in Debian trixie): S3 log directories only."""

from _standin import unavailable


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    return unavailable("s3fs", name)
