import base64
import json

import pytest

from composebox import _common as c
from composebox.errors import OutputLimitExceeded, Timeout
from composebox.types import Connection, ExecResult, Sample


def test_exec_result_bytes_and_text():
    r = ExecResult.from_json({"exit_code": 3, "stdout": base64.b64encode(b"ok\xff\n").decode(),
                              "stderr": "", "stdout_truncated": True, "stdout_bytes": 9,
                              "stderr_bytes": 0, "duration_seconds": 0.25})
    assert r.stdout == b"ok\xff\n"
    assert r.stdout_text == "ok\ufffd\n"
    assert r.stderr == b"" and r.stderr_text == ""
    assert r.exit_code == 3 and r.returncode == 3 and not r.success
    assert r.stdout_truncated and r.stdout_bytes == 9 and r.duration == 0.25


def test_sample_default_and_lookup():
    s = Sample.from_json({"project": "cbx-t-1", "id": "1", "task": "t1", "lease": "l",
                          "default_service": "web", "detached": False, "sandboxes": [
                              {"service": "db", "container": "c1", "container_name": "n1",
                               "working_dir": "/", "user": "", "default": False},
                              {"service": "web", "container": "c2", "container_name": "n2",
                               "working_dir": "/srv", "user": "app", "default": True}]})
    assert s.default.service == "web"
    assert s.engine == ""  # an older server says nothing of engines
    assert Sample.from_json({"project": "p", "engine": "gpu-1", "sandboxes": []}).engine == "gpu-1"
    assert s.sandbox("db").container == "c1"
    assert s.services == ["db", "web"]
    with pytest.raises(KeyError):
        s.sandbox("nope")


def test_connection_ports():
    conn = Connection.from_json({"container_id": "id", "container_name": "n", "command": "docker exec -it n sh",
                                 "ports": [{"container_port": 80, "protocol": "tcp",
                                            "host_ip": "127.0.0.1", "host_port": 32768}]})
    assert conn.ports[0].host_port == 32768


def test_exec_request_rejects_shell_strings_and_empty():
    with pytest.raises(TypeError):
        c.exec_request("echo hi")
    with pytest.raises(ValueError):
        c.exec_request([])
    with pytest.raises(ValueError):
        c.exec_request(["true"], timeout=0)


def test_exec_request_fields():
    body = c.with_input(c.exec_request(["cat"], cwd="sub", env={"A": 1}, user="nobody",
                                       timeout=5, output_limit=10, strict_limit=True), "hé")
    assert body == {"cmd": ["cat"], "cwd": "sub", "env": {"A": "1"}, "user": "nobody",
                    "timeout_seconds": 5.0, "output_limit": 10, "strict_limit": True,
                    "input": base64.b64encode("hé".encode()).decode()}
    assert "input" not in c.with_input(c.exec_request(["true"]), None)


def test_stream_head_is_one_json_line():
    head = c.stream_request_head({"cmd": ["echo", "a\nb"]})
    assert head.endswith(b"\n") and head.count(b"\n") == 1
    assert json.loads(head) == {"cmd": ["echo", "a\nb"]}


def test_parse_exec_events():
    ev = c.parse_exec_event(json.dumps({"type": "stdout", "data": base64.b64encode(b"\x00x").decode()}).encode())
    assert ev.type == "stdout" and ev.data == b"\x00x"
    ev = c.parse_exec_event(b'{"type":"exit","exit_code":2,"stdout_bytes":5,"duration_seconds":1.5}')
    assert ev.type == "exit" and ev.result.exit_code == 2 and ev.result.stdout_bytes == 5
    with pytest.raises(Timeout):
        c.parse_exec_event(b'{"type":"error","error":{"kind":"timeout","message":"exec: timed out"}}')
    with pytest.raises(OutputLimitExceeded):
        c.parse_exec_event(b'{"type":"error","error":{"kind":"output_limit","message":"x"}}')


def test_sync_chunks_accepts_bytes_str_files_and_iterables(tmp_path):
    import io

    assert list(c.sync_chunks(b"ab")) == [b"ab"]
    assert list(c.sync_chunks("é")) == ["é".encode()]
    assert list(c.sync_chunks(b"")) == []
    assert b"".join(c.sync_chunks(io.BytesIO(b"x" * (c.CHUNK + 5)))) == b"x" * (c.CHUNK + 5)
    assert b"".join(c.sync_chunks(io.StringIO("text"))) == b"text"
    assert list(c.sync_chunks([b"a", "b", b""])) == [b"a", b"b"]


@pytest.mark.asyncio
async def test_async_chunks_accepts_async_iterables():
    async def gen():
        yield b"a"
        yield "b"

    assert [x async for x in c.async_chunks(gen())] == [b"a", b"b"]
    assert [x async for x in c.async_chunks(b"xyz")] == [b"xyz"]


def test_task_request_only_sends_given_fields():
    assert c.task_request(name="t", compose_yaml="services: {}") == {"name": "t", "compose_yaml": "services: {}"}
    with pytest.raises(ValueError):
        c.task_request(compose_yaml="x", path="/y")
    body = c.task_request(path="/p", env={"X": 1}, prebuilt=True, ready_timeout=3)
    assert body == {"path": "/p", "env": {"X": "1"}, "prebuilt": True, "ready_timeout_seconds": 3.0}


def test_endpoint_defaults(monkeypatch):
    monkeypatch.delenv("COMPOSEBOX_URL", raising=False)
    monkeypatch.delenv("COMPOSEBOX_SOCKET", raising=False)
    monkeypatch.setenv("XDG_RUNTIME_DIR", "/run/user/7")
    e = c.Endpoint()
    assert e.socket == "/run/user/7/composebox/api.sock"
    assert "Authorization" not in e.headers()
    e = c.Endpoint(url="http://127.0.0.1:9/", token="tok")
    assert e.base_url == "http://127.0.0.1:9"
    assert e.headers()["Authorization"] == "Bearer tok"
    with pytest.raises(ValueError):
        c.Endpoint(socket="/s", url="http://x")
