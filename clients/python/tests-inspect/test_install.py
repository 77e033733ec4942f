"""What a user of inspect_ai gets after `pip install composebox`: the real inspect_ai finds the
provider through the wheel's entry point, and the spec fields a dataset may carry are checked
by inspect's own deserialisation."""

import importlib.metadata as md
import os
import sys

import pydantic
import pytest

import composebox
import inspect_ai
from inspect_ai.util._sandbox.environment import SandboxEnvironmentSpec
from inspect_ai.util._sandbox.registry import registry_find_sandboxenv


def test_the_real_inspect_ai_and_the_installed_wheel():
    src = os.environ["INSPECT_SRC"]
    with open(os.path.join(src, "SOURCE.md")) as f:
        assert md.version("inspect_ai") in f.readline()
    assert sys.version_info[:2] >= (3, 13) and pydantic.VERSION.startswith("2.")
    assert inspect_ai.__file__.startswith(("/usr/local/lib/", "/usr/lib/"))
    # The client is the wheel's, in the run's venv, not the checkout's source.
    assert "site-packages" in composebox.__file__, composebox.__file__
    assert not composebox.__file__.startswith(os.environ["COMPOSEBOX_REPO"])
    eps = [ep for ep in md.entry_points(group="inspect_ai") if ep.name == "composebox"]
    assert [ep.value for ep in eps] == ["composebox._registry"]
    assert eps[0].dist is not None and eps[0].dist.name == "composebox"


def test_provider_found_through_the_entry_point():
    cls = registry_find_sandboxenv("composebox")
    from composebox.inspect import ComposeboxSandboxEnvironment

    assert cls is ComposeboxSandboxEnvironment
    assert cls.is_docker_compatible() and "compose.yaml" in cls.config_files()
    assert cls.default_concurrency() == max(4, 2 * (os.cpu_count() or 1))


def test_spec_fields_through_inspects_deserialisation():
    spec = SandboxEnvironmentSpec.model_validate(
        {"type": "composebox", "config": {"compose": "compose.yaml", "env": {"A": "1"}}})
    assert spec.config.compose == "compose.yaml" and spec.config.env == {"A": "1"}
    # inspect keeps specs in sets: equal configs are one.
    again = SandboxEnvironmentSpec.model_validate(
        {"type": "composebox", "config": {"compose": "compose.yaml", "env": {"A": "1"}}})
    assert len({spec, again}) == 1
    # A compose model is inspect's ComposeConfig, which the provider sends as YAML.
    spec = SandboxEnvironmentSpec.model_validate(
        {"type": "composebox", "config": {"services": {"default": {"image": "x"}}}})
    assert type(spec.config).__name__ == "ComposeConfig"
    for field, value in (("binary", "/bin/sh"), ("url", "http://127.0.0.1:9"),
                         ("token_file", "/etc/shadow"), ("socket", "/run/docker.sock")):
        with pytest.raises(Exception) as e:
            SandboxEnvironmentSpec.model_validate({"type": "composebox", "config": {field: value}})
        assert f"'{field}' cannot come from a sandbox spec" in str(e.value), str(e.value)
    with pytest.raises(Exception) as e:
        SandboxEnvironmentSpec.model_validate({"type": "composebox", "config": {"bogus": 1}})
    assert "bogus" in str(e.value)
