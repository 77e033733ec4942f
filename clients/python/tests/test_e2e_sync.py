"""The sync client against the real server and engine."""

import io
import json
import os
import selectors
import shutil
import subprocess
import threading
import time

import pytest

import composebox
from composebox import Client

from . import e2e


@pytest.fixture
def client(bin_path):
    with Client.spawn(bin_path) as c:
        yield c


@pytest.fixture
def sample(client, task_name):
    task = client.task_init(name=task_name, compose_yaml=e2e.compose())
    s = client.sample_init(task, metadata={"level": "7"})
    yield s
    client.task_cleanup(task)


def test_version_and_openapi(client):
    v = client.version()
    assert v.api == "v1"
    assert v.api_revision >= composebox.MIN_API_REVISION
    assert client.check_server() == v
    doc = client.openapi()
    assert "/v1/samples/{project}/sandboxes/{service}/exec" in doc["paths"]
    assert doc["info"]["version"] == f"v1 revision {v.api_revision}"


class _RecordingServer(composebox._common.SpawnedServer):
    made: list = []

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.made.append(self)


@pytest.mark.parametrize("what", ["older-server", "other-api"])
def test_spawn_refuses_a_server_it_does_not_know_and_stops_it(bin_path, monkeypatch, what):
    """The real server against a client that needs a revision the server does not have, or
    another API: the client says so with both versions, and its spawned server is stopped."""
    real = subprocess.run([bin_path, "version", "--json"], capture_output=True, text=True, check=True)
    server_version = json.loads(real.stdout)["version"]
    if what == "older-server":
        monkeypatch.setattr(composebox._common, "MIN_API_REVISION", 10 ** 6)
        words = ["is older than this client", "upgrade composebox serve",
                 f"needs revision {10 ** 6} or later"]
    else:
        monkeypatch.setattr(composebox._common, "API_VERSION", "v9")
        words = ["speaks API v1 revision", "speaks API v9"]
    _RecordingServer.made = []
    monkeypatch.setattr(composebox._common, "SpawnedServer", _RecordingServer)
    with pytest.raises(composebox.IncompatibleServer) as e:
        Client.spawn(bin_path)
    for w in words + [f"(composebox {server_version})", f"composebox {composebox.__version__} for Python"]:
        assert w in str(e.value), (w, str(e.value))
    assert e.value.server.api == "v1" and e.value.server.version == server_version
    [server] = _RecordingServer.made
    assert server.proc.poll() is not None


def test_task_and_sample_lifecycle_leaves_nothing(client, task_name):
    task = client.task_init(name=task_name, compose_yaml=e2e.compose())
    assert task.name == task_name
    assert task.default_service == "default"
    assert sorted(task.services) == ["default", "side"]
    assert [t.id for t in client.task_list() if t.id == task.id] == [task.id]

    s = client.sample_init(task, metadata={"level": "7"})
    assert s.default_service == "default"
    assert s.sandboxes[0].service == "default"
    assert s.default.working_dir == "/work"
    assert client.sample_get(s.project).project == s.project
    assert [x.project for x in client.sample_list(task)] == [s.project]
    assert e2e.resources(task_name), "a live sample should have containers"

    # SAMPLE_METADATA_LEVEL reached the compose file.
    r = client.exec(s, ["sh", "-c", "echo $LEVEL"])
    assert r.stdout_text == "7\n"

    client.sample_cleanup(s)
    assert e2e.resources(task_name) == []
    with pytest.raises(composebox.NotFound):
        client.sample_get(s.project)
    client.task_cleanup(task)
    with pytest.raises(FileNotFoundError):
        client.task_get(task.id)


def test_exec(client, sample):
    r = client.exec(sample, ["sh", "-c", "printf 'out\\377'; echo err >&2; exit 3"])
    assert r.exit_code == 3 and not r.success
    assert r.stdout == b"out\xff"
    assert r.stdout_text == "out\ufffd"
    assert r.stderr_text == "err\n"

    r = client.exec(sample, ["cat"], input=b"\x00\x01stdin")
    assert r.stdout == b"\x00\x01stdin"
    r = client.exec(sample, ["sh", "-c", "pwd; id -u; echo $K"], cwd="/tmp", env={"K": "v"},
                    user="65534")
    assert r.stdout_text == "/tmp\n65534\nv\n"
    r = client.exec(sample, ["hostname"], service="side")
    assert r.success
    r = client.exec(sample.project, ["no-such-command"])
    assert r.exit_code == 127


def test_exec_timeout_keeps_partial_output(client, sample):
    # The timeout leaves the command time to write before it is killed, even on a loaded host.
    with pytest.raises(TimeoutError) as e:
        client.exec(sample, ["sh", "-c", "echo started; sleep 30"], timeout=5)
    assert isinstance(e.value, composebox.Timeout)
    assert e.value.result is not None and e.value.result.stdout == b"started\n"


def test_exec_strict_output_limit(client, sample):
    with pytest.raises(composebox.OutputLimitExceeded):
        client.exec(sample, ["sh", "-c", "yes | head -c 100000"], output_limit=1000,
                    strict_limit=True)
    r = client.exec(sample, ["sh", "-c", "yes | head -c 100000"], output_limit=1000)
    assert r.stdout_truncated and len(r.stdout) == 1000 and r.stdout_bytes == 100000


def test_exec_stream(client, sample):
    events = []
    with client.exec_stream(sample, ["sh", "-c", "echo one; echo two >&2; echo three; exit 4"]) as st:
        for ev in st:
            events.append(ev)
    assert events[-1].type == "exit"
    assert st.result.exit_code == 4
    out = b"".join(e.data for e in events if e.type == "stdout")
    err = b"".join(e.data for e in events if e.type == "stderr")
    assert out == b"one\nthree\n" and err == b"two\n"


def test_exec_stream_streams_stdin_and_waits(client, sample):
    chunks = (b"x" * 1000 for _ in range(300))
    r = client.exec_stream(sample, ["wc", "-c"], input=chunks).wait()
    assert r.stdout_text.strip() == "300000"
    st = client.exec_stream(sample, ["sh", "-c", "echo gone; sleep 30"], timeout=5)
    seen = []
    with pytest.raises(TimeoutError):
        for ev in st:
            seen.append(ev)
    assert b"".join(e.data for e in seen) == b"gone\n"


def test_file_round_trip(client, sample):
    binary = bytes(range(256)) * 1000 + b"\xc3\x28"
    client.write_file(sample, "/tmp/sub/dir/bin.dat", binary)
    assert client.read_file(sample, "/tmp/sub/dir/bin.dat") == binary
    client.write_file(sample, "rel.txt", "héllo\r\n")
    assert client.read_file(sample, "/work/rel.txt") == "héllo\r\n".encode()
    assert client.read_text(sample, "rel.txt") == "héllo\r\n"
    client.write_file(sample, "stream.dat", io.BytesIO(b"s" * 300000))
    assert b"".join(client.read_file_stream(sample, "stream.dat")) == b"s" * 300000
    client.write_file(sample, "gen.dat", (bytes([i]) * 10 for i in range(5)))
    assert client.read_file(sample, "gen.dat") == b"".join(bytes([i]) * 10 for i in range(5))
    client.write_file(sample, "empty", b"")
    assert client.read_file(sample, "empty") == b""
    client.write_file(sample, "/srv/side.txt", b"side", service="side")
    assert client.read_file(sample, "/srv/side.txt", service="side") == b"side"
    with pytest.raises(FileNotFoundError):
        client.read_file(sample, "/srv/side.txt")


def test_file_errors(client, sample):
    with pytest.raises(FileNotFoundError) as e:
        client.read_file(sample, "/no/such/file")
    assert isinstance(e.value, composebox.NotFound)
    assert "/no/such/file" in str(e.value)
    with pytest.raises(IsADirectoryError):
        client.read_file(sample, "/tmp")
    client.write_file(sample, "big", b"z" * 5000)
    with pytest.raises(composebox.OutputLimitExceeded):
        client.read_file(sample, "big", limit=100)
    # Past the server's first 64 KiB the answer has started: the limit cuts the body instead.
    client.write_file(sample, "bigger", b"q" * (300 * 1024))
    with pytest.raises(composebox.OutputLimitExceeded):
        client.read_file(sample, "bigger", limit=200 * 1024)
    assert len(client.read_file(sample, "bigger", limit=300 * 1024)) == 300 * 1024
    with pytest.raises(IsADirectoryError):
        client.write_file(sample, "/tmp", b"x")


def test_non_root_sandbox_gets_permission_errors(client, task_name):
    task = client.task_init(name=task_name, compose_yaml=e2e.compose(user="65534:65534"))
    s = client.sample_init(task)
    assert client.exec(s, ["id", "-u"]).stdout_text == "65534\n"
    client.exec(s, ["sh", "-c", "echo secret > /root-only; chmod 600 /root-only"], user="0")
    with pytest.raises(PermissionError) as e:
        client.read_file(s, "/root-only")
    assert isinstance(e.value, composebox.PermissionDenied) and "/root-only" in str(e.value)
    with pytest.raises(PermissionError):
        client.write_file(s, "/etc/new-file", b"x")
    client.write_file(s, "/tmp/mine", b"ok")
    assert client.exec(s, ["stat", "-c", "%u", "/tmp/mine"]).stdout_text == "65534\n"
    client.task_cleanup(task)


def test_connection(client, sample):
    conn = client.connection(sample)
    assert conn.container_name == sample.default.container_name
    if e2e.KUBERNETES:
        # A sandbox is a pod (its id is namespace/pod, the namespace the sample's project) that
        # kubectl enters: the command must name the namespace to reach it.
        ns, pod = conn.container_id.split("/")
        assert ns == sample.project and pod == conn.container_name, conn
        assert conn.command.startswith(f"kubectl exec -it -n {ns} {pod} -- "), conn.command
    else:
        assert conn.container_name in conn.command and conn.command.startswith("docker exec -it")


def test_detach_then_cleanup(client, task_name):
    task = client.task_init(name=task_name, compose_yaml=e2e.compose())
    s = client.sample_init(task)
    d = client.sample_detach(s)
    assert d.detached
    client.task_cleanup(task)
    # A detached sample survives its task's cleanup...
    assert e2e.resources(task_name)
    # ...until it is removed by name.
    r = subprocess.run([client._server.binary, "down", s.project], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert e2e.resources(task_name) == []


def test_closing_the_client_removes_its_samples(bin_path, task_name):
    with Client.spawn(bin_path) as c:
        task = c.task_init(name=task_name, compose_yaml=e2e.compose())
        c.sample_init(task)
        assert e2e.resources(task_name)
    assert e2e.resources(task_name) == []


def test_heartbeat_keeps_a_short_lease_alive(bin_path, task_name):
    with Client.spawn(bin_path, lease_ttl=3) as c:
        task = c.task_init(name=task_name, compose_yaml=e2e.compose())
        s = c.sample_init(task)
        hb = c._heartbeat
        # Past more than one TTL: the sample is still there because the heartbeat thread ran.
        deadline = time.monotonic() + 60
        while hb.beats < 5 and time.monotonic() < deadline:
            hb._stop.wait(0.1)
        assert hb.beats >= 5, hb.error
        assert c.exec(s, ["true"]).success
        # Without the heartbeat the lease expires and the server removes the sample.
        hb.stop()
        deadline = time.monotonic() + 90
        while e2e.resources(task_name) and time.monotonic() < deadline:
            hb._stop.wait(0.2)
        assert e2e.resources(task_name) == []


def test_spawn_finds_the_binary_on_path_and_stops_it(bin_path, monkeypatch):
    monkeypatch.delenv("COMPOSEBOX_BIN", raising=False)
    monkeypatch.setenv("PATH", os.path.dirname(os.path.abspath(bin_path)) + os.pathsep + os.environ["PATH"])
    if os.path.basename(bin_path) != "composebox":
        pytest.skip("the binary is not named composebox")
    c = Client.spawn()
    proc = c._server.proc
    assert c.version().api == "v1"
    c.close()
    assert proc.poll() is not None
    with pytest.raises(composebox.PrerequisiteError):
        Client.spawn("/nonexistent/composebox")


def test_errors_are_typed(client, task_name):
    with pytest.raises(composebox.InvalidConfig):
        client.task_init(name=task_name, compose_yaml="services: [not, a, map]")
    with pytest.raises(composebox.PolicyViolation):
        client.task_init(name=task_name, compose_yaml="""
services:
  default:
    image: ${COMPOSEBOX_BASE_IMAGE}
    privileged: true
""")
    with pytest.raises(composebox.NotFound):
        client.exec("cbx-nope-0000", ["true"], service="default")


def test_sample_whose_containers_are_gone_is_unavailable(client, sample):
    """Its containers removed under it (its pods deleted, on Kubernetes), a sample is
    unavailable, on either backend, not unknown: inspect's provider turns that into
    SandboxUnavailableError."""
    e2e.remove_containers([sample.sandbox(s).container for s in sample.services])
    with pytest.raises(composebox.SandboxUnavailable):
        client.exec(sample.project, ["true"], service="default")
    with pytest.raises(composebox.SandboxUnavailable):
        client.read_file(sample.project, "/etc/hostname", service="default")


def test_build_failure_is_build_failed(client, task_name, tmp_path):
    # A Dockerfile whose step fails: the server answers build_failed with the step and the
    # tail of the build log, which the client raises as BuildFailed.
    (tmp_path / "compose.yaml").write_text("""
services:
  default:
    build:
      context: .
      args:
        COMPOSEBOX_BASE_IMAGE: ${COMPOSEBOX_BASE_IMAGE}
    command: ["tail", "-f", "/dev/null"]
""")
    (tmp_path / "Dockerfile").write_text(
        "ARG COMPOSEBOX_BASE_IMAGE\nFROM ${COMPOSEBOX_BASE_IMAGE}\n"
        "RUN echo python-e2e-output; exit 5\n")
    with pytest.raises(composebox.BuildFailed) as info:
        client.task_init(name=task_name, path=str(tmp_path))
    e = info.value
    assert e.kind == "build_failed" and e.status == 422
    assert "RUN echo python-e2e-output; exit 5" in e.step
    assert "python-e2e-output" in e.log


def test_doctor_and_events(client, task_name):
    report = client.doctor()
    assert isinstance(report.ok, bool) and report.checks
    # The report is the backend's the server runs samples on.
    names = {c.name: c.status for c in report.checks}
    assert names.get("kubernetes" if e2e.KUBERNETES else "daemon") == "pass", report
    events = client.events()
    seen = []
    done = threading.Event()

    def follow():
        for ev in events:
            seen.append(ev)
            if ev.kind == "sample_removed":
                done.set()
                return

    t = threading.Thread(target=follow, daemon=True)
    t.start()
    task = client.task_init(name=task_name, compose_yaml=e2e.compose())
    s = client.sample_init(task)
    client.sample_cleanup(s)
    assert done.wait(30), [e.kind for e in seen]
    kinds = [e.kind for e in seen if e.project == s.project]
    assert "sample_started" in kinds and "sample_removed" in kinds
    events.close()
    client.task_cleanup(task)


CEILING_COMPOSE = """
services:
  default:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["tail", "-f", "/dev/null"]
    network_mode: none
    environment:
      V: ${CBX_PY_CEILING_SECRET:-unset}
"""


def test_server_ceiling(bin_path, task_name, monkeypatch):
    """A request may ask only for what the server's flags allow: beyond it, PolicyViolation
    naming the serve flag, and the server's variable is in no answer; with the flag, it runs."""
    secret = "py-ceiling-secret-" + task_name
    monkeypatch.setenv("CBX_PY_CEILING_SECRET", secret)
    with Client.spawn(bin_path) as c:
        with pytest.raises(composebox.PolicyViolation) as info:
            c.task_init(name=task_name, compose_yaml=CEILING_COMPOSE, pass_env=["CBX_PY_CEILING_SECRET"],
                        policy={"allow": ["docker-socket"], "allow_capabilities": ["ALL"]})
        e = info.value
        assert e.status == 422
        for flag in ("composebox serve --pass-env CBX_PY_CEILING_SECRET",
                     "composebox serve --allow docker-socket", "composebox serve --allow-cap ALL"):
            assert flag in str(e), str(e)
        assert secret not in str(e) and secret not in json.dumps(e.detail)
        assert c.task_list() == []
    with Client.spawn(bin_path, args=["--pass-env", "CBX_PY_CEILING_SECRET"]) as c:
        task = c.task_init(name=task_name, compose_yaml=CEILING_COMPOSE, pass_env=["CBX_PY_CEILING_SECRET"])
        s = c.sample_init(task)
        assert c.exec(s, ["sh", "-c", 'echo "$V"']).stdout == (secret + "\n").encode()
        c.task_cleanup(task)


def test_loopback_tcp_with_token(bin_path, tmp_path, task_name):
    token_file = tmp_path / "token"
    proc = subprocess.Popen([bin_path, "serve", "--listen", "127.0.0.1:0", "--json",
                             "--token-file", str(token_file)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        # --json prints one JSON object once the server accepts requests.
        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ)
        text, info, deadline = "", None, time.monotonic() + 60
        while info is None:
            assert sel.select(timeout=max(0.0, deadline - time.monotonic())), \
                f"serve printed no JSON object within 60 s: {text!r}"
            line = proc.stdout.readline()
            assert line, f"serve exited: {text!r}"
            text += line.decode()
            try:
                info = json.loads(text)
            except ValueError:
                pass
        assert info["url"].startswith("http://127.0.0.1:")
        with Client(url=info["url"], token_file=info["token_file"]) as c:
            task = c.task_init(name=task_name, compose_yaml=e2e.compose())
            s = c.sample_init(task)
            assert c.exec(s, ["echo", "tcp"]).stdout == b"tcp\n"
        assert e2e.resources(task_name) == []
        with Client(url=info["url"], token="wrong") as c:
            with pytest.raises(composebox.Unauthorized):
                c.task_list()
    finally:
        proc.terminate()
        proc.wait(60)


POOLABLE = """
services:
  default:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["tail", "-f", "/dev/null"]
    network_mode: none
"""


def test_warm_pool_is_taken_transparently(client, task_name):
    task = client.task_init(name=task_name, compose_yaml=POOLABLE, warm=2)
    assert task.pool is not None and task.pool.poolable and task.pool.target == 2
    deadline = time.monotonic() + 180
    while client.task_get(task).pool.ready < 2:
        assert time.monotonic() < deadline, f"pool never filled: {client.task_get(task).pool}"
        time.sleep(0.2)
    s = client.sample_init(task, id="taken-1")
    assert s.id == "taken-1"
    assert client.exec(s, ["echo", "warm"]).stdout_text == "warm\n"
    # The pool starts a replacement for the sample taken, and never holds more than asked.
    pool = client.task_get(task).pool
    assert pool.ready + pool.filling <= 2
    client.task_cleanup(task)
    assert e2e.resources(task_name) == []

    metadata_task = client.task_init(name=task_name, compose_yaml=e2e.compose(), warm=2)
    assert metadata_task.pool is not None and not metadata_task.pool.poolable
    assert "SAMPLE_METADATA" in metadata_task.pool.reason
    client.task_cleanup(metadata_task)


def test_killed_parent_takes_its_spawned_server_with_it(bin_path, task_name, tmp_path,
                                                         request):
    # A parent that spawns a server, starts a sample and is SIGKILLed: the server sees its
    # stdin pipe close, stops and removes the sample.
    script = tmp_path / "parent.py"
    script.write_text(f"""
import sys
sys.path.insert(0, {os.path.join(e2e.REPO, 'clients', 'python')!r})
from composebox import Client
c = Client.spawn({bin_path!r})
task = c.task_init(name={task_name!r}, compose_yaml={POOLABLE!r})
c.sample_init(task)
print(c._server.proc.pid, c._server.dir, flush=True)
sys.stdin.read()
""")
    parent = subprocess.Popen(["/usr/bin/python3", str(script)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        pid, server_dir = parent.stdout.readline().split()
        server_pid = int(pid)
        # The killed parent cannot remove its server's private directory (socket, log).
        request.addfinalizer(lambda: shutil.rmtree(server_dir, ignore_errors=True))
        assert e2e.resources(task_name), "the parent's sample should be running"
    finally:
        parent.kill()
        parent.wait(30)
    deadline = time.monotonic() + 120
    while (_alive(server_pid) or e2e.resources(task_name)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _alive(server_pid), "the spawned server outlived its killed parent"
    assert e2e.resources(task_name) == []


def _alive(pid: int) -> bool:
    """Whether pid runs (a zombie nobody reaped has ended)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
