"""The target of the package's ``inspect_ai`` entry point: inspect_ai imports it when it loads
its plugins, which registers the "composebox" sandbox environment."""

from . import inspect  # noqa: F401  (the import registers the provider)
