"""Stand-in for nest_asyncio2 (not in Debian trixie); inspect_ai calls apply() for notebooks."""

from _standin import record


def apply(loop=None):
    record("nest_asyncio2.apply")
