"""Real evals: the `inspect` CLI runs evaltasks/tasks.py with the scripted mockllm/model and the
composebox provider, which spawns its own server. Logs are written as JSON (the .eval format
needs zipfile_zstd, a stand-in here) and read back with inspect's own reader."""

from __future__ import annotations

import glob
import os
import subprocess
from typing import List

import pytest

from inspect_ai.log import read_eval_log

from conftest import HERE, ENGINES, projects

TASKS = os.path.join(HERE, "evaltasks", "tasks.py")


def inspect_eval(tmp_path, name: str, *args: str, extra_env=None) -> subprocess.CompletedProcess:
    env = dict(os.environ, CBX_TEST_NAME=name, INSPECT_LOG_LEVEL="warning")
    env.update(extra_env or {})
    return subprocess.run(["inspect", "eval", *args, "--log-dir", str(tmp_path / "logs"),
                           "--log-format", "json", "--display", "plain", "--no-log-images"],
                          capture_output=True, text=True, env=env, cwd=str(tmp_path), timeout=900)


def logs(tmp_path) -> List:
    return [read_eval_log(p) for p in sorted(glob.glob(str(tmp_path / "logs" / "*.json")))]


def check_samples(log, n: int) -> None:
    assert log.status == "success", (log.eval.task, log.error)
    assert len(log.samples) == n
    for s in log.samples:
        # The tool loop ran: a bash call per command, then the answer with its output.
        tool_msgs = [m for m in s.messages if m.role == "tool"]
        assert tool_msgs and not any(m.error for m in tool_msgs), s.messages
        assert s.scores["includes"].value == "C", (log.eval.task, s.id, s.output.completion, s.target)


@pytest.mark.backends
def test_eval_one_service_with_metadata_and_a_tool_loop(tmp_path, name, standin_log):
    r = inspect_eval(tmp_path, name, f"{TASKS}@one_service", "--max-samples", "2")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    (log,) = logs(tmp_path)
    check_samples(log, 2)
    # The sample metadata reached the compose file (SAMPLE_METADATA_LEVEL).
    assert {s.output.completion.strip() for s in log.samples} == {"level=3", "level=9"}
    # An eval calls stand-ins off the sandbox paths only: mmh3 to hash its events
    # (inspect_ai/event/_pool.py), and acp where it maps events for an ACP client
    # (inspect_ai/agent/_acp); test_self_check.py asserts that sandbox paths call none.
    callers = {line.rsplit(" called from ", 1)[1].rsplit(":", 1)[0]
               for line in standin_log.read_text().splitlines()}
    allowed = ("/inspect_ai/event/_pool.py", "/inspect_ai/agent/_acp/")
    assert all(any(a in c for a in allowed) for c in callers), callers
    assert projects("inspect-" + name) == []


@pytest.mark.backends
def test_eval_two_services(tmp_path, name):
    if ENGINES:
        pytest.skip("the private engines of this suite run without iptables rules of their own, "
                    "and the host's FORWARD policy drops traffic between their containers")
    r = inspect_eval(tmp_path, name, f"{TASKS}@two_services", "--max-samples", "3")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    (log,) = logs(tmp_path)
    check_samples(log, 3)
    # Each sample's web service serves its own flag (SAMPLE_METADATA_FLAG).
    assert sorted(s.output.completion.strip() for s in log.samples) == ["FLAG-0", "FLAG-1", "FLAG-2"]
    assert projects("inspect-" + name) == []


@pytest.mark.backends
def test_eval_time_limit_ends_the_sample_and_removes_its_sandbox(tmp_path, name):
    r = inspect_eval(tmp_path, name, f"{TASKS}@time_limited")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    (log,) = logs(tmp_path)
    assert log.status == "success", log.error
    (s,) = log.samples
    assert s.limit is not None and s.limit.type == "time", s.limit
    assert s.total_time is not None and s.total_time < 60, s.total_time


def test_eval_no_sandbox_cleanup_keeps_samples_until_inspect_cleans_up(tmp_path, name):
    r = inspect_eval(tmp_path, name, f"{TASKS}@one_service", "--no-sandbox-cleanup")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    kept = projects("inspect-" + name)
    assert len(kept) == 2 and {p["status"] for p in kept} == {"detached"}, kept
    for p in kept:
        assert p["name"] in r.stdout, r.stdout[-3000:]
    assert "inspect sandbox cleanup composebox" in r.stdout
    c = subprocess.run(["inspect", "sandbox", "cleanup", "composebox"], capture_output=True, text=True)
    assert c.returncode == 0, c.stderr
    assert projects("inspect-" + name) == []


def test_eval_200_concurrent_execs_all_succeed(tmp_path, name):
    r = inspect_eval(tmp_path, name, f"{TASKS}@concurrent_execs")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    (log,) = logs(tmp_path)
    (s,) = log.samples
    assert s.metadata["execs_ok"] == 200, s.metadata
    assert s.scores["includes"].value == "C"
    # Half of them skipped the provider's queue and met the server's bound: they were turned
    # away as busy, waited and sent again, and none failed.
    assert s.metadata["busy_retries"] > 0, s.metadata
