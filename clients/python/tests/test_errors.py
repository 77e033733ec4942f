import errno

import pytest

from composebox import errors
from composebox.errors import (BuildFailed, ComposeboxError, InvalidConfig, IsADirectory,
                               NotFound, OutputLimitExceeded, PermissionDenied, PolicyViolation,
                               PrerequisiteError, SandboxUnavailable, Timeout, error_from_body)
from composebox.types import ExecResult


@pytest.mark.parametrize("kind,cls,builtin", [
    ("not_found", NotFound, FileNotFoundError),
    ("is_a_directory", IsADirectory, IsADirectoryError),
    ("permission_denied", PermissionDenied, PermissionError),
    ("timeout", Timeout, TimeoutError),
    ("invalid_config", InvalidConfig, ValueError),
])
def test_kinds_map_to_builtins(kind, cls, builtin):
    e = error_from_body(400, {"kind": kind, "message": "op x: it failed", "detail": None})
    assert type(e) is cls
    assert isinstance(e, builtin)
    assert isinstance(e, ComposeboxError)
    assert str(e) == "op x: it failed"
    assert e.kind == kind


@pytest.mark.parametrize("kind,cls", [
    ("output_limit", OutputLimitExceeded),
    ("unavailable", SandboxUnavailable),
    ("policy_violation", PolicyViolation),
    ("prerequisite", PrerequisiteError),
    ("build_failed", BuildFailed),
])
def test_composebox_only_kinds(kind, cls):
    e = error_from_body(500, {"kind": kind, "message": "m"})
    assert type(e) is cls
    assert not isinstance(e, OSError)


def test_every_documented_kind_has_a_class():
    documented = ["invalid_config", "unauthorized", "permission_denied", "not_found",
                  "is_a_directory", "conflict", "output_limit", "policy_violation",
                  "prerequisite", "busy", "internal", "unavailable", "timeout", "build_failed"]
    for kind in documented:
        assert kind in errors.KIND_TO_ERROR, kind
        assert errors.KIND_TO_ERROR[kind].kind == kind


def test_build_failed_carries_step_and_log():
    # The body the server sends for a build that failed at a step (api/errors.go).
    e = error_from_body(422, {"kind": "build_failed",
                              "message": "build image cbx-t-web:1: Step 2/3 : RUN make: exit 2",
                              "detail": {"image": "cbx-t-web:1", "step": "Step 2/3 : RUN make",
                                         "log": "make: *** No rule"}})
    assert type(e) is BuildFailed
    assert not isinstance(e, PolicyViolation)
    assert e.status == 422
    assert e.image == "cbx-t-web:1"
    assert e.step == "Step 2/3 : RUN make"
    assert e.log == "make: *** No rule"
    assert BuildFailed("no detail").step == ""


def test_unknown_kind_keeps_its_name():
    e = error_from_body(418, {"kind": "teapot", "message": "brew: no"})
    assert type(e) is ComposeboxError
    assert e.kind == "teapot"
    assert e.status == 418


def test_status_fallback_without_body():
    e = error_from_body(404, None, "read /x: HTTP 404")
    assert isinstance(e, NotFound)
    assert str(e) == "read /x: HTTP 404"
    e = error_from_body(502, "<html>", "")
    assert type(e) is errors.ServerError or type(e) is ComposeboxError
    assert "502" in str(e)


def test_oserror_attributes_and_path():
    e = error_from_body(404, {"kind": "not_found", "message": "read /etc/nope: no such file",
                              "detail": {"path": "/etc/nope"}})
    assert e.errno == errno.ENOENT
    assert e.filename == "/etc/nope"
    assert e.detail == {"path": "/etc/nope"}


def test_timeout_carries_partial_result():
    e = error_from_body(504, {"kind": "timeout", "message": "exec: timed out after 1s",
                              "detail": {"result": {"exit_code": 137, "stdout": "cGFydA==",
                                                    "stderr": "", "stdout_bytes": 4}}})
    assert isinstance(e, TimeoutError)
    assert isinstance(e.result, ExecResult)
    assert e.result.stdout == b"part"
    assert e.result.stdout_bytes == 4


def test_catchable_as_builtin():
    with pytest.raises(FileNotFoundError):
        raise error_from_body(404, {"kind": "not_found", "message": "x"})
    with pytest.raises(TimeoutError):
        raise error_from_body(504, {"kind": "timeout", "message": "x"})
