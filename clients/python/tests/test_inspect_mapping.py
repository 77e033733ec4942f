import errno
import json
import os
import shlex

import pytest

from composebox import inspect_mapping as m
from composebox.errors import (InvalidConfig, IsADirectory, NotFound, OutputLimitExceeded,
                               PermissionDenied, PolicyViolation, SandboxUnavailable, Timeout,
                               error_from_body)
from composebox.types import Connection, ExecResult, Port


def test_config_files_and_docker_compatibility():
    files = m.config_files()
    assert "compose.yaml" in files and "docker-compose.yml" in files and "Dockerfile" in files
    assert m.is_docker_compatible() is True


def test_task_request_none_runs_default_image():
    req, pc = m.task_request("mytask", None)
    assert req == {"name": "mytask"}
    assert pc.compose is None


def test_task_request_path_is_absolute(tmp_path, monkeypatch):
    (tmp_path / "compose.yaml").write_text("services: {default: {image: x}}\n")
    monkeypatch.chdir(tmp_path)
    req, pc = m.task_request("t", "compose.yaml")
    assert req == {"name": "t", "path": str(tmp_path / "compose.yaml")}
    with pytest.raises(InvalidConfig) as e:
        m.task_request("t", "missing.yaml")
    assert "missing.yaml" in str(e.value)


def test_task_request_compose_model_is_sent_as_yaml():
    class FakeComposeConfig:
        def model_dump(self, exclude_none, by_alias):
            return {"services": {"default": {"image": "busybox"}}}

    req, _ = m.task_request("t", FakeComposeConfig())
    assert json.loads(req["compose_yaml"]) == {"services": {"default": {"image": "busybox"}}}


def test_task_request_provider_config(tmp_path):
    compose = tmp_path / "c.yaml"
    compose.write_text("services: {}\n")
    req, pc = m.task_request("t", {"compose": str(compose), "env": {"A": "1"},
                                   "default_service": "web", "prebuilt": True,
                                   "socket": "/tmp/s.sock"})
    assert req == {"name": "t", "path": str(compose), "env": {"A": "1"},
                   "default_service": "web", "prebuilt": True}
    assert pc.socket == "/tmp/s.sock"
    with pytest.raises(InvalidConfig) as e:
        m.provider_config({"compose": "x", "bogus": 1})
    assert "bogus" in str(e.value)
    with pytest.raises(InvalidConfig):
        m.task_request("t", {"compose": str(compose), "compose_yaml": "services: {}"})


def test_task_label_is_a_safe_name():
    assert m.task_label("inspect_evals/GDM Intercode CTF") == "inspect_evals-gdm-intercode-ctf"
    assert m.task_label("///") == "task"
    assert len(m.task_label("x" * 100)) == 40
    assert m.task_request("A/B", None)[0] == {"name": "a-b"}


def test_task_key_separates_tasks_and_configs():
    assert m.task_key("a", None) == m.task_key("a", None)
    assert m.task_key("a", None) != m.task_key("b", None)
    assert m.task_key("a", "x.yaml") != m.task_key("a", "y.yaml")
    assert m.task_key("a", {"env": {"A": "1"}}) == m.task_key("a", {"env": {"A": "1"}})


def test_sample_metadata_stringifies():
    md = m.sample_metadata({"difficulty": 3, "flag": "x", "tags": ["a"], "none": None})
    assert md == {"difficulty": "3", "flag": "x", "tags": '["a"]'}
    assert m.metadata_var("difficulty level") == "SAMPLE_METADATA_DIFFICULTY_LEVEL"
    assert m.metadata_var("a-b.c") == "SAMPLE_METADATA_A_B_C"


def test_order_environments_puts_default_first():
    assert m.order_environments(["db", "web", "default"], "default") == ["default", "db", "web"]
    with pytest.raises(Exception):
        m.order_environments(["db"], "web")


def test_exec_kwargs():
    kw = m.exec_kwargs(["cat"], input="héllo", cwd="sub", env={"K": "V"}, user="nobody",
                       timeout=5, output_limit=1024)
    assert kw == {"input": "héllo".encode(), "cwd": "sub", "env": {"K": "V"}, "user": "nobody",
                  "timeout": 5.0, "output_limit": 1024, "strict_limit": True}
    kw = m.exec_kwargs(["true"])
    assert kw == {"output_limit": m.DEFAULT_MAX_EXEC_OUTPUT_SIZE, "strict_limit": True}
    assert m.exec_kwargs(["cat"], input=b"\x00")["input"] == b"\x00"
    with pytest.raises(TypeError):
        m.exec_kwargs("echo hi")


def test_exec_result_fields_replace_invalid_utf8():
    f = m.exec_result_fields(ExecResult(exit_code=1, stdout=b"a\xffb", stderr=b"err\n"))
    assert f == {"success": False, "returncode": 1, "stdout": "a\ufffdb", "stderr": "err\n"}


class FakeOutputLimit(Exception):
    def __init__(self, limit_str, truncated_output):
        super().__init__(f"The sandbox output stream limit of {limit_str} was exceeded.")
        self.limit_str = limit_str
        self.truncated_output = truncated_output


class FakeUnavailable(RuntimeError):
    pass


def _err(kind, **detail):
    return error_from_body(0, {"kind": kind, "message": f"{kind} happened", "detail": detail})


def test_map_error_timeout_keeps_partial_output():
    e = _err("timeout", result={"exit_code": -1, "stdout": "cGFydA==", "stderr": ""})
    mapped = m.map_error(e, op="exec", timeout=2)
    assert type(mapped) is TimeoutError
    assert "timed out after 2 seconds" in str(mapped)
    assert mapped.truncated_output == "part"


def test_map_error_file_errors_name_the_file():
    for kind, cls, code in (("not_found", FileNotFoundError, errno.ENOENT),
                            ("permission_denied", PermissionError, errno.EACCES),
                            ("is_a_directory", IsADirectoryError, errno.EISDIR)):
        mapped = m.map_error(_err(kind), op="read", file="/etc/thing")
        assert type(mapped) is cls
        assert mapped.errno == code
        assert "/etc/thing" in str(mapped)
    assert "directory" in str(m.map_error(_err("is_a_directory"), op="write", file="/d"))


def test_map_error_output_limit_and_unavailable():
    mapped = m.map_error(_err("output_limit", result={"exit_code": -1, "stdout": "eHg=", "stderr": ""}),
                         op="exec", limit=10 * 1024 ** 2, output_limit=FakeOutputLimit)
    assert isinstance(mapped, FakeOutputLimit)
    assert "limit of 10 MiB was exceeded" in str(mapped)
    assert mapped.truncated_output == "xx"
    mapped = m.map_error(_err("output_limit"), op="read", limit=100 * 1024 ** 2,
                         output_limit=FakeOutputLimit)
    assert mapped.truncated_output is None and mapped.limit_str == "100 MiB"
    mapped = m.map_error(_err("unavailable"), op="exec", unavailable=FakeUnavailable)
    assert type(mapped) is FakeUnavailable
    other = _err("policy_violation")
    assert m.map_error(other, op="exec") is other


def test_directory_alias_and_text():
    assert m.is_directory_alias(".") and m.is_directory_alias("a/..") and m.is_directory_alias("./")
    assert not m.is_directory_alias("a.txt")
    assert m.decode_text(b"a\r\nb") == "a\r\nb"
    with pytest.raises(UnicodeDecodeError):
        m.decode_text(b"\xc3\x28")
    assert m.encode_contents("é") == "é".encode() and m.encode_contents(b"\x00") == b"\x00"


def test_human_size():
    assert m.human_size(10 * 1024 ** 2) == "10 MiB"
    assert m.human_size(2048) == "2 KiB"
    assert m.human_size(1000) == "1000 bytes"


def test_connection_fields():
    conn = Connection(container_id="abc", container_name="cbx-t-1-default-1",
                      command="docker exec -it cbx-t-1-default-1 bash -l",
                      ports=[Port(80, "tcp", "127.0.0.1", 32768), Port(80, "tcp", "::1", 32768),
                             Port(53, "udp", "127.0.0.1", 32769)])
    f = m.connection_fields(conn)
    assert f["type"] == "composebox" and f["container"] == "cbx-t-1-default-1"
    assert f["command"] == conn.command
    assert f["vscode_command"] == ["remote-containers.attachToRunningContainer", "cbx-t-1-default-1"]
    assert f["ports"] == [
        {"container_port": 53, "protocol": "udp", "mappings": [{"host_ip": "127.0.0.1", "host_port": 32769}]},
        {"container_port": 80, "protocol": "tcp", "mappings": [{"host_ip": "127.0.0.1", "host_port": 32768},
                                                               {"host_ip": "::1", "host_port": 32768}]},
    ]
    f = m.connection_fields(conn, user="app")
    assert shlex.split(f["command"]) == ["docker", "exec", "-it", "--user", "app", "cbx-t-1-default-1", "bash", "-l"]
    assert f["vscode_command"] is None
    assert m.connection_fields(Connection("i", "n", "docker exec -it n sh", []))["ports"] is None


def test_cli_cleanup_args():
    assert m.cli_cleanup_args(None) == ["cleanup", "--stale"]
    assert m.cli_cleanup_args("cbx-t-1") == ["cleanup", "cbx-t-1"]


def test_entry_point_declared():
    import os
    import tomllib  # Python 3.11+

    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with open(os.path.join(here, "pyproject.toml"), "rb") as f:
        project = tomllib.load(f)["project"]
    assert project["entry-points"]["inspect_ai"]["composebox"] == "composebox._registry"
