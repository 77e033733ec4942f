"""The platform wheels. pyproject.toml holds the package's metadata; this file only decides what
kind of wheel a build makes:

- with no composebox/_bin/composebox (the source tree, the sdist): the pure wheel
  (py3-none-any), the client alone, for users who bring their own server;
- with that file (scripts/build-wheels.sh puts a static binary there in a copy of the tree):
  a wheel for the binary's platform, py3-none-manylinux_2_17_<arch>, read from its ELF header.
  The binary must be static: a manylinux wheel may not need a newer libc than its tag says, and
  a static Go binary needs none.

Both have the `composebox` console script; in the pure wheel it runs $COMPOSEBOX_BIN or PATH's.
"""

import os
import struct

from setuptools import Distribution, setup

try:  # setuptools >= 70.1 has its own; before, the wheel package provides it
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:
    from wheel.bdist_wheel import bdist_wheel

HERE = os.path.dirname(os.path.abspath(__file__))
BINARY = os.path.join(HERE, "composebox", "_bin", "composebox")
# ELF e_machine values of the architectures composebox is built for.
MACHINES = {0x3E: "x86_64", 0xB7: "aarch64"}
PT_INTERP = 3


def platform_of(path):
    """The manylinux platform tag of a static Linux ELF executable; ValueError otherwise."""
    with open(path, "rb") as f:
        head = f.read(64)
        if head[:4] != b"\x7fELF" or head[4] != 2 or head[5] != 1:
            raise ValueError(f"{path}: not a 64-bit little-endian ELF executable")
        machine = struct.unpack_from("<H", head, 18)[0]
        if machine not in MACHINES:
            raise ValueError(f"{path}: ELF machine {machine:#x} is not one composebox ships for")
        phoff, = struct.unpack_from("<Q", head, 32)
        phentsize, phnum = struct.unpack_from("<HH", head, 54)
        for i in range(phnum):
            f.seek(phoff + i * phentsize)
            if struct.unpack("<I", f.read(4))[0] == PT_INTERP:
                raise ValueError(f"{path}: dynamically linked; build it static (CGO_ENABLED=0, "
                                 "as make build does)")
    return "manylinux_2_17_" + MACHINES[machine]


class PlatformWheel(bdist_wheel):
    """A wheel tagged for the bundled binary's platform, for any Python 3."""

    def get_tag(self):
        return "py3", "none", platform_of(BINARY)


class BinaryDistribution(Distribution):
    """A distribution that is not pure: its files install into platlib, as a wheel with a
    platform tag must."""

    def has_ext_modules(self):
        return True


if os.path.exists(BINARY):
    setup(distclass=BinaryDistribution, cmdclass={"bdist_wheel": PlatformWheel})
else:
    setup()
