"""A live sample's egress through the sync and async clients, against the real server and
engine: a sample started with an allowlist, a name not on it refused by the sample's gateway
(NXDOMAIN, no outside host needed) and reported as an egress_denied event and in the state;
the list closed and set again; a list beyond the server's --egress refused naming the flag."""

import queue
import threading

import pytest

import composebox
from composebox import AsyncClient, Client

from . import e2e

ALLOWED = "pkgs.test"
# A sample on a network of its own: the allowlist puts it behind a gateway.
NETWORKED = """
services:
  default:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["tail", "-f", "/dev/null"]
"""
SERVE = [*e2e.backend_flags(), "--egress", ALLOWED]
# On a cluster without a kube-dns Service (make k8s's), the backend learns the cluster DNS's
# address from COMPOSEBOX_K8S_DNS: the gateway forwards the sample's own names there.
SERVE_ENV = {"COMPOSEBOX_K8S_DNS": e2e.cluster_dns()} if e2e.KUBERNETES and e2e.cluster_dns() else None


def lookup(client, s, name):
    # busybox nslookup; the gateway answers a name not on the list NXDOMAIN without asking
    # anyone, so this returns at once whatever the host's network.
    return client.exec(s, ["sh", "-c", f"timeout 20 nslookup {name} 2>&1"]).stdout_text


def next_denial(q, name, seen):
    """The next egress_denied event for name; every event before it goes to seen."""
    while True:
        ev = q.get(timeout=60)
        if ev is None:
            raise AssertionError(f"the event stream ended before a denial of {name}: {seen}")
        seen.append(ev)
        if ev.kind == "egress_denied" and ev.denial is not None and ev.denial.name == name:
            return ev


def test_denial_event_and_set_close(bin_path, task_name):
    with Client.spawn(bin_path, args=SERVE, env=SERVE_ENV) as client:
        assert client.version().api_revision >= 5
        events = client.events()
        q = queue.Queue()

        def follow():
            try:
                for ev in events:
                    q.put(ev)
            except Exception:
                pass
            q.put(None)

        threading.Thread(target=follow, daemon=True).start()
        task = client.task_init(name=task_name, compose_yaml=NETWORKED, policy={"egress": [ALLOWED]})
        try:
            s = client.sample_init(task)
            seen = []
            assert "NXDOMAIN" in lookup(client, s, "notlisted.test")
            ev = next_denial(q, "notlisted.test", seen)
            assert ev.project == s.project and ev.service == "default"
            assert ev.denial.protocol == "dns" and ev.denial.service == "default"
            assert "notlisted.test" in ev.message

            st = client.sample_egress(s)
            assert st.project == s.project
            assert st.allow is None and st.services == {"default": [ALLOWED]}
            assert st.ceiling == [ALLOWED]
            assert any(d.name == "notlisted.test" and d.protocol == "dns" for d in st.denials), st

            # Closed: the listed name is refused by name too.
            st = client.sample_set_egress(s, [])
            assert st.allow == []
            assert "NXDOMAIN" in lookup(client, s, ALLOWED)
            next_denial(q, ALLOWED, seen)
            # Every denial of the closed list is in before this one (the gateway logs them in
            # order).
            lookup(client, s, "drained.test")
            next_denial(q, "drained.test", seen)

            # Open again: the listed name is not refused any more (a refusal of it would come
            # before the marker's, which follows it).
            assert client.sample_set_egress(s, [ALLOWED]).allow == [ALLOWED]
            seen.clear()
            lookup(client, s, ALLOWED)
            lookup(client, s, "marker.test")
            next_denial(q, "marker.test", seen)
            assert not [e for e in seen if e.denial is not None and e.denial.name == ALLOWED], seen

            # Beyond the server's --egress: refused, naming the flag; the list stays.
            with pytest.raises(composebox.PolicyViolation) as info:
                client.sample_set_egress(s, ["other.test"])
            assert "composebox serve --egress other.test" in str(info.value)
            assert client.sample_egress(s).allow == [ALLOWED]
            with pytest.raises(composebox.InvalidConfig):
                client.sample_set_egress(s, ["a b"])
        finally:
            # The stream ends with the client's lease, when the client closes.
            client.task_cleanup(task)


def test_sample_without_allowlist_has_no_egress(bin_path, task_name):
    with Client.spawn(bin_path) as client:
        task = client.task_init(name=task_name, compose_yaml=NETWORKED)
        try:
            s = client.sample_init(task)
            with pytest.raises(composebox.NotFound):
                client.sample_egress(s)
        finally:
            client.task_cleanup(task)


@pytest.mark.asyncio
async def test_async_denial_event_and_set_close(bin_path, task_name):
    async with AsyncClient.spawn(bin_path, args=SERVE, env=SERVE_ENV) as client:
        events = await client.events()
        task = await client.task_init(name=task_name, compose_yaml=NETWORKED, policy={"egress": [ALLOWED]})
        try:
            s = await client.sample_init(task)
            st = await client.sample_set_egress(s, [])
            assert st.allow == [] and st.project == s.project
            r = await client.exec(s, ["sh", "-c", f"timeout 20 nslookup {ALLOWED} 2>&1"])
            assert "NXDOMAIN" in r.stdout_text
            async for ev in events:
                if ev.kind == "egress_denied" and ev.denial is not None and ev.denial.name == ALLOWED:
                    assert ev.project == s.project and ev.denial.protocol == "dns"
                    break
            st = await client.sample_egress(s)
            assert st.allow == [] and any(d.name == ALLOWED for d in st.denials)
            assert (await client.sample_set_egress(s, [ALLOWED])).allow == [ALLOWED]
        finally:
            await events.aclose()
            await client.task_cleanup(task)


def test_old_server_is_named():
    from composebox import _common as c
    from composebox.types import Version
    old = Version(version="0.2.0", go="", compose="", api="v1", api_revision=4)
    with pytest.raises(composebox.IncompatibleServer) as info:
        c.check_egress_revision(old, "the server at unix:/x")
    assert "revision 4" in str(info.value) and "revision 5" in str(info.value)
    c.check_egress_revision(Version(version="", go="", compose="", api="v1", api_revision=5), "x")
    with pytest.raises(TypeError):
        c.egress_request("pkgs.test")
