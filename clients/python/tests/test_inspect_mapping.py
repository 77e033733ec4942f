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


def test_task_plan_none_runs_default_image():
    plan = m.task_plan(None)
    assert plan.request == {"name": "inspect-default"}
    assert plan.config.compose is None


def test_task_plan_path_is_absolute_and_names_the_task_after_its_directory(tmp_path, monkeypatch):
    (tmp_path / "ctf").mkdir()
    (tmp_path / "ctf" / "compose.yaml").write_text("services: {default: {image: x}}\n")
    monkeypatch.chdir(tmp_path / "ctf")
    plan = m.task_plan("compose.yaml")
    assert plan.request == {"name": "inspect-ctf", "path": str(tmp_path / "ctf" / "compose.yaml")}
    assert m.task_plan(str(tmp_path / "ctf")).request["name"] == "inspect-ctf"
    with pytest.raises(InvalidConfig) as e:
        m.task_plan("missing.yaml")
    assert "missing.yaml" in str(e.value)


def test_task_plan_compose_model_is_sent_as_yaml():
    class FakeComposeConfig:
        def model_dump(self, exclude_none, by_alias):
            return {"services": {"default": {"image": "busybox"}}}

    plan = m.task_plan(FakeComposeConfig())
    assert json.loads(plan.request["compose_yaml"]) == {"services": {"default": {"image": "busybox"}}}
    assert plan.request["name"] == "inspect-compose"


def test_task_plan_provider_config(tmp_path):
    compose = tmp_path / "c.yaml"
    compose.write_text("services: {}\n")
    plan = m.task_plan({"compose": str(compose), "env": {"A": "1"}, "default_service": "web",
                        "prebuilt": True, "name": "My Task"})
    assert plan.request == {"name": "inspect-my-task", "path": str(compose), "env": {"A": "1"},
                            "default_service": "web", "prebuilt": True}
    with pytest.raises(InvalidConfig) as e:
        m.provider_config({"compose": "x", "bogus": 1})
    assert "bogus" in str(e.value)
    with pytest.raises(InvalidConfig):
        m.task_plan({"compose": str(compose), "compose_yaml": "services: {}"})


def test_spec_cannot_name_the_server_or_its_binary():
    # A spec can come from a dataset row: each of these names a host program or file.
    for field, var in m.OPERATOR_FIELDS.items():
        with pytest.raises(InvalidConfig) as e:
            m.task_plan({"compose_yaml": "services: {}", field: "/bin/sh"})
        msg = str(e.value)
        assert f"'{field}' cannot come from a sandbox spec" in msg and "$" + var in msg
        assert f"configure({field}=" in msg


def test_server_settings_come_from_the_operator(monkeypatch):
    env = {"COMPOSEBOX_BIN": "/opt/cbx", "COMPOSEBOX_ARGS": "--engine 'a=unix:///x y.sock'"}
    s = m.ServerSettings.from_env(env)
    assert (s.binary, s.args, s.spawns) == ("/opt/cbx", ["--engine", "a=unix:///x y.sock"], True)
    # The serve-only flags (the ceiling of a spec's policy) go to the spawned server alone.
    s = m.ServerSettings.from_env({"COMPOSEBOX_ARGS": "--engine a=unix:///x.sock",
                                   "COMPOSEBOX_SERVE_ARGS": "--allow host-access --pass-env TOKEN"})
    assert (s.args, s.serve_args) == (["--engine", "a=unix:///x.sock"], ["--allow", "host-access", "--pass-env", "TOKEN"])
    s = m.ServerSettings.from_env({}, serve_args=("--allow-cap", "NET_ADMIN"))
    assert (s.args, s.serve_args) == ([], ["--allow-cap", "NET_ADMIN"])
    s = m.ServerSettings.from_env({"COMPOSEBOX_URL": "http://127.0.0.1:1", "COMPOSEBOX_TOKEN_FILE": "/t"})
    assert (s.url, s.token_file, s.spawns) == ("http://127.0.0.1:1", "/t", False)
    # The runner's code wins over the environment, and a socket replaces a URL.
    s = m.ServerSettings.from_env({"COMPOSEBOX_URL": "http://127.0.0.1:1"}, socket="/run/s.sock", binary=None)
    assert (s.socket, s.url) == ("/run/s.sock", None)


def test_task_label_is_a_safe_name():
    assert m.task_label("inspect_evals/GDM Intercode CTF") == "inspect-inspect_evals-gdm-intercode-ctf"
    assert m.task_label("///") == "inspect-task"
    assert len(m.task_label("x" * 100)) == 40


def test_task_key_is_the_config_whatever_the_name(tmp_path):
    assert m.task_plan(None).key == m.task_plan(None).key
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    a.write_text("services: {}")
    b.write_text("services: {}")
    assert m.task_plan(str(a)).key != m.task_plan(str(b)).key
    assert m.task_plan({"env": {"A": "1"}}).key == m.task_plan({"env": {"A": "1"}}).key
    assert m.task_plan({"env": {"A": "1"}}).key != m.task_plan({"env": {"A": "2"}}).key


def test_default_concurrency():
    assert m.default_concurrency(1) == 4 and m.default_concurrency(8) == 16


def test_cli_cleanup_takes_only_what_inspect_left():
    listing = {"projects": [
        {"name": "p1", "task": "inspect-ctf", "status": "stale"},
        {"name": "p2", "task": "inspect-ctf", "status": "detached"},
        {"name": "p3", "task": "inspect-ctf", "status": "alive"},
        {"name": "p4", "task": "other", "status": "stale"},
        {"name": "p5", "task": "other", "status": "detached"},
    ]}
    assert m.cli_cleanup_projects(listing) == ["p1", "p2"]


def test_left_running_notice():
    from composebox.types import Sample, SandboxInfo

    s = Sample(project="cbx-inspect-ctf-1", id="7-1", task="t", default_service="default",
               sandboxes=[SandboxInfo(service="default", container="c", container_name="cbx-1-default",
                                      working_dir="/", user="", default=True)])
    text = m.left_running_notice([s])
    assert "cbx-inspect-ctf-1" in text and "cbx-1-default" in text
    assert "inspect sandbox cleanup composebox" in text
    row = [line for line in text.splitlines() if "cbx-inspect-ctf-1" in line][0].split()
    assert row[:2] == ["7", "1"]


def test_exec_remote_kwargs():
    class Opts:
        input = "in"
        cwd = "sub"
        env = {"K": 1}
        user = "nobody"
        stdin_open = True

    assert m.exec_remote_kwargs(["cat"], Opts()) == {"stdin_open": True, "input": b"in", "cwd": "sub",
                                                     "env": {"K": "1"}, "user": "nobody"}
    assert m.exec_remote_kwargs(["true"], None) == {"stdin_open": False}


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


