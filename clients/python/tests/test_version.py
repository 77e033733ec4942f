"""The client asks the server's version before anything else, and names a server it cannot talk
to (another API, an older revision, no version at all) with both sides' versions. Against a
fake server here; test_e2e_sync.py checks the real one."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, List, Optional, Tuple

import pytest

import composebox
from composebox import AsyncClient, Client, IncompatibleServer


class FakeServer:
    """A loopback HTTP server answering GET /v1/version with ``version`` (a dict as JSON, or
    (status, content type, bytes)), the lease the client opens before its first request on tasks
    (POST, heartbeat, DELETE of lease "L1"), and GET /v1/tasks with no tasks; it records every
    request."""

    def __init__(self, version: Any) -> None:
        self.version = version
        self.requests: List[Tuple[str, str]] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                fake.requests.append((self.command, self.path))
                if self.path == "/v1/version":
                    if isinstance(fake.version, dict):
                        status, ctype, body = 200, "application/json", json.dumps(fake.version).encode()
                    else:
                        status, ctype, body = fake.version
                elif self.path == "/v1/tasks" and self.command == "GET":
                    status, ctype, body = 200, "application/json", b'{"tasks": []}'
                elif self.path == "/v1/leases" and self.command == "POST":
                    status, ctype, body = 201, "application/json", b'{"id": "L1", "ttl_seconds": 60}'
                elif self.path.startswith("/v1/leases/L1"):
                    status, ctype, body = 200, "application/json", b'{"id": "L1", "ttl_seconds": 60}'
                else:
                    status, ctype, body = 500, "application/json", json.dumps(
                        {"kind": "internal", "message": f"unexpected {self.command} {self.path}"}).encode()
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_DELETE = do_PUT = _answer

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,),
                                       daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def fake():
    servers: List[FakeServer] = []

    def start(version: Any) -> FakeServer:
        s = FakeServer(version)
        servers.append(s)
        return s

    yield start
    for s in servers:
        s.close()


def v(api: str = "v1", revision: Optional[int] = composebox.MIN_API_REVISION,
      version: str = "1.2.3") -> Dict[str, Any]:
    d: Dict[str, Any] = {"version": version, "go": "go1.26", "compose": "v2.40.3", "api": api}
    if revision is not None:
        d["api_revision"] = revision
    return d


CLIENT = f"composebox {composebox.__version__} for Python"

INCOMPATIBLE = [
    pytest.param(v(api="v2", revision=3, version="9.1.0"),
                 ["speaks API v2 revision 3", "composebox 9.1.0", CLIENT, "speaks API v1"],
                 id="another-api"),
    pytest.param(v(revision=None, version="b07b534"),
                 ["composebox b07b534", "API v1 without a revision", CLIENT,
                  f"needs revision {composebox.MIN_API_REVISION} or later", "upgrade"],
                 id="no-revision"),
    pytest.param(v(revision=composebox.MIN_API_REVISION - 1),
                 [f"API v1 revision {composebox.MIN_API_REVISION - 1}", "composebox 1.2.3", CLIENT,
                  "upgrade"],
                 id="older-revision"),
    pytest.param((404, "application/json", b'{"kind":"not_found","message":"no route"}'),
                 ["does not serve API v1", "HTTP 404", CLIENT], id="no-v1-routes"),
    pytest.param((200, "text/html", b"<html>hello</html>"),
                 ["is not composebox serve", "<html>hello</html>", CLIENT], id="not-composebox"),
]


@pytest.mark.parametrize("version,words", INCOMPATIBLE)
def test_sync_client_names_a_server_it_cannot_talk_to(fake, version, words):
    server = fake(version)
    with Client(url=server.url) as client:
        with pytest.raises(IncompatibleServer) as e:
            client.task_list()
    for w in words:
        assert w in str(e.value), (w, str(e.value))
    assert server.url in str(e.value)
    assert e.value.client_version == composebox.__version__
    assert e.value.client_api == "v1"
    assert e.value.min_api_revision == composebox.MIN_API_REVISION
    if isinstance(version, dict):
        assert e.value.server.version == version["version"]
        assert e.value.server.api == version["api"]
    # Nothing but the version was asked: no lease, no task list.
    assert server.requests == [("GET", "/v1/version")]


@pytest.mark.asyncio
@pytest.mark.parametrize("version,words", INCOMPATIBLE)
async def test_async_client_names_a_server_it_cannot_talk_to(fake, version, words):
    server = fake(version)
    client = AsyncClient(url=server.url)
    with pytest.raises(IncompatibleServer) as e:
        await client.open()
    for w in words:
        assert w in str(e.value), (w, str(e.value))
    assert server.requests == [("GET", "/v1/version")]
    assert client._closed


def test_a_newer_revision_of_the_same_api_works(fake):
    server = fake(dict(v(revision=composebox.MIN_API_REVISION + 5), feature_from_later="x"))
    with Client(url=server.url) as client:
        got = client.check_server()
        assert got.api == "v1" and got.api_revision == composebox.MIN_API_REVISION + 5
        assert client.task_list() == []
        assert client.task_list() == []
    # The version is asked once per client.
    got = [r for r in server.requests if not r[1].startswith("/v1/leases")]
    assert got == [("GET", "/v1/version"), ("GET", "/v1/tasks"), ("GET", "/v1/tasks")]
    assert server.requests[:2] == [("GET", "/v1/version"), ("POST", "/v1/leases")]


@pytest.mark.asyncio
async def test_async_a_newer_revision_of_the_same_api_works(fake):
    server = fake(v(revision=composebox.MIN_API_REVISION + 1))
    async with AsyncClient(url=server.url) as client:
        assert (await client.check_server()).api_revision == composebox.MIN_API_REVISION + 1
        assert await client.task_list() == []
    got = [r for r in server.requests if not r[1].startswith("/v1/leases")]
    assert got == [("GET", "/v1/version"), ("GET", "/v1/tasks")]
    assert server.requests[:2] == [("GET", "/v1/version"), ("POST", "/v1/leases")]


def test_a_refused_token_is_not_a_version_mismatch(fake):
    server = fake((401, "application/json",
                   b'{"kind":"unauthorized","message":"missing or wrong bearer token"}'))
    with Client(url=server.url) as client:
        with pytest.raises(composebox.Unauthorized):
            client.task_list()
