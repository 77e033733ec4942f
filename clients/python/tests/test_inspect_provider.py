"""The inspect_ai shell: runs only where inspect_ai is installed (it is not on the CI machines;
the logic it wraps is tested in test_inspect_mapping.py)."""

import pytest

inspect_ai = pytest.importorskip(
    "inspect_ai", reason="inspect_ai is not installed here (PyPI unreachable); the provider's "
    "logic is covered by test_inspect_mapping.py")


def test_provider_is_registered_and_docker_compatible():
    from inspect_ai.util._sandbox.registry import registry_find_sandboxenv

    import composebox._registry  # noqa: F401  (what the entry point imports)
    from composebox.inspect import ComposeboxSandboxConfig, ComposeboxSandboxEnvironment

    cls = registry_find_sandboxenv("composebox")
    assert cls is ComposeboxSandboxEnvironment
    assert cls.is_docker_compatible()
    assert "compose.yaml" in cls.config_files()
    cfg = cls.config_deserialize({"compose": "compose.yaml", "env": {"A": "1"}})
    assert isinstance(cfg, ComposeboxSandboxConfig) and cfg.env == {"A": "1"}

