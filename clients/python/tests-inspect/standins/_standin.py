"""The call log the stand-ins share (see README.md beside this file)."""

import os
import traceback


def record(name: str) -> None:
    path = os.environ.get("COMPOSEBOX_STANDIN_LOG")
    if not path:
        return
    caller = traceback.extract_stack(limit=4)[0]
    with open(path, "a", encoding="utf-8") as f:
        f.write(f"{name} called from {caller.filename}:{caller.lineno}\n")


class _Constants(dict):
    """A constant table (an upper-case name): each key maps to itself."""

    def __missing__(self, key):
        return key


def unavailable(module: str, name: str):
    """A module attribute: a constant table (an upper-case name), a class (a capitalised name)
    or a function; a class made or a function called records its use and raises
    NotImplementedError."""
    qual = f"{module}.{name}"
    if name.isupper():
        return _Constants()
    if name[:1].isupper():
        from pydantic import BaseModel, ConfigDict

        def __init__(self, *a, **kw):
            record(qual)
            raise NotImplementedError(f"{qual} is a test stand-in ({module} is not in Debian trixie)")

        return type(name, (BaseModel,), {"model_config": ConfigDict(extra="allow"),
                                          "__init__": __init__, "__module__": module})

    def call(*a, **kw):
        record(qual)
        raise NotImplementedError(f"{qual} is a test stand-in ({module} is not in Debian trixie)")

    call.__name__ = name
    return call


class _Finder:
    """Makes every submodule of a stand-in package (acp.schema, acp.agent.router...) a module
    whose attributes are stand-ins."""

    def __init__(self, package: str) -> None:
        self.package = package

    def find_spec(self, fullname, path=None, target=None):
        import importlib.machinery

        if fullname.startswith(self.package + "."):
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        fill(module)


def fill(module) -> None:
    """Give a module stand-in attributes, and make it a package of stand-in submodules."""
    name = module.__name__

    def __getattr__(attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return unavailable(name, attr)

    module.__getattr__ = __getattr__
    module.__path__ = []


def package(module) -> None:
    """Make module (a stand-in package's __init__) and all its submodules stand-ins."""
    import sys

    fill(module)
    if not any(isinstance(f, _Finder) and f.package == module.__name__ for f in sys.meta_path):
        sys.meta_path.append(_Finder(module.__name__))
