"""Stand-in for mmh3 (not in Debian trixie): stable hashes of the widths inspect_ai uses, from
blake2b rather than MurmurHash3. Each call is recorded."""

import hashlib

from _standin import record


def hash64(data, seed=0, x64arch=True, signed=True):
    record("mmh3.hash64")
    d = hashlib.blake2b(bytes(data), digest_size=16, salt=seed.to_bytes(16, "little")).digest()
    return (int.from_bytes(d[:8], "little", signed=signed), int.from_bytes(d[8:], "little", signed=signed))


def hash_bytes(data, seed=0, x64arch=True):
    record("mmh3.hash_bytes")
    return hashlib.blake2b(bytes(data), digest_size=16, salt=seed.to_bytes(16, "little")).digest()
