"""A sandbox spec can come from a dataset row: it may only narrow what the operator allows.
Each test is the attacker's row, run through a real `inspect eval`; each asserts by outcome
that nothing ran on the host and nothing was sent: the marker a planted program would write is
absent, the listener the row points at got no connection, and a sample that would have held
the engine's socket never started."""

from __future__ import annotations

import http.server
import json
import os
import socket
import stat
import subprocess
import threading

import pytest

from conftest import HERE, projects

HOSTILE = os.path.join(HERE, "evaltasks", "hostile.py")


def run_rows(tmp_path, name, rows):
    dataset = tmp_path / "rows.jsonl"
    dataset.write_text("".join(json.dumps(r) + "\n" for r in rows))
    env = dict(os.environ, CBX_HOSTILE_DATASET=str(dataset), CBX_TEST_NAME=name,
               PYTHONPATH=os.path.join(HERE, "evaltasks"))
    return subprocess.run(["inspect", "eval", HOSTILE + "@hostile", "--log-dir", str(tmp_path / "logs"),
                           "--log-format", "json", "--display", "plain"],
                          capture_output=True, text=True, env=env, cwd=str(tmp_path), timeout=600)


def test_row_naming_a_binary_runs_nothing(tmp_path, name):
    # A program named `serve` where the eval runs: `binary: /bin/sh` would run `sh serve ...`.
    marker = tmp_path / "PWNED"
    serve = tmp_path / "serve"
    serve.write_text(f"#!/bin/sh\ntouch {marker}\n")
    serve.chmod(serve.stat().st_mode | stat.S_IXUSR)
    r = run_rows(tmp_path, name, [{"id": "x", "input": "echo hi", "sandbox": {"binary": "/bin/sh"}}])
    out = r.stdout + r.stderr
    assert r.returncode != 0, out[-2000:]
    assert "'binary' cannot come from a sandbox spec" in out, out[-3000:]
    assert not marker.exists(), "the planted program ran"
    assert projects("inspect-" + name) == []


class Listener:
    """A TCP listener (HTTP) and a Unix socket that record every connection."""

    def __init__(self, tmp_path) -> None:
        self.hits: list = []
        hits = self.hits

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                hits.append(("http", self.command, self.path, self.headers.get("Authorization")))
                self.send_response(200)
                self.end_headers()

            do_POST = do_DELETE = do_GET

            def log_message(self, *a):
                pass

        self.http = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.http.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}"
        self.sock_path = str(tmp_path / "listener.sock")
        self.unix = socket.socket(socket.AF_UNIX)
        self.unix.bind(self.sock_path)
        self.unix.listen(8)
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                conn, _ = self.unix.accept()
            except OSError:
                return
            self.hits.append(("unix", conn.recv(4096)))
            conn.close()

    def close(self):
        self.http.shutdown()
        self.unix.close()


def test_rows_naming_a_server_or_a_token_file_send_nothing(tmp_path, name):
    secret = tmp_path / "host-secret"
    secret.write_text("s3cr3t-host-credential\n")
    lst = Listener(tmp_path)
    try:
        for spec in ({"url": lst.url, "token_file": str(secret)},
                     {"url": lst.url},
                     {"socket": lst.sock_path},
                     {"compose_yaml": "services: {default: {image: x}}", "token_file": str(secret)}):
            r = run_rows(tmp_path, name, [{"id": "x", "input": "echo hi", "sandbox": spec}])
            out = r.stdout + r.stderr
            assert r.returncode != 0, out[-2000:]
            assert "cannot come from a sandbox spec" in out, out[-3000:]
            assert "s3cr3t" not in out
        assert lst.hits == [], f"the row's server got: {lst.hits}"
    finally:
        lst.close()
    assert projects("inspect-" + name) == []


SOCKET_COMPOSE = """services:
  default:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["tail", "-f", "/dev/null"]
    network_mode: none
    volumes:
      - /var/run/docker.sock:/var/run/docker.sock
"""


def test_row_widening_the_policy_is_refused(tmp_path, name):
    # The row asks for the engine's socket and grants itself the opt-in: the operator's
    # ceiling (the provider's server runs with no opt-in) refuses it before any sample starts.
    rows = [{"id": "sock", "input": "test -S /var/run/docker.sock && echo GOT-SOCKET; echo done",
             "sandbox": {"compose_yaml": SOCKET_COMPOSE, "name": name,
                         "policy": {"allow": ["docker-socket"]}}}]
    r = run_rows(tmp_path, name, rows)
    out = r.stdout + r.stderr
    logs = "".join(p.read_text() for p in (tmp_path / "logs").glob("*.json"))
    assert "GOT-SOCKET" not in out + logs, "the sample reached the engine's socket"
    # Refused at task_init, which inspect runs before any sample: the eval fails, naming why.
    assert r.returncode != 0, out[-3000:]
    assert "PolicyViolation" in out or "policy_violation" in out, out[-3000:]
    assert projects("inspect-" + name) == []
