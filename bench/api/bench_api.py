#!/usr/bin/python3
"""`make bench-api`: composebox serve and its Python client against the Go library, side by side
in one run.

- exec of `true`, one at a time: the sync Client (against a server started with Client.spawn)
  against Sandbox.Exec in a Go program (bench/api/main.go, driven over a pipe, which times the
  library call only) and against `docker exec` spawned from Python with subprocess; the three
  alternate within every round, in a rotating order;
- 32 execs at once: AsyncClient with asyncio.gather against 32 goroutines calling Sandbox.Exec;
- a 10 MiB file each way: write_file / read_file against Sandbox.WriteFile / ReadFile;
- the server's RSS (VmRSS in /proc/PID/status) with 100 live samples created through the
  client.

Every resource carries composebox's labels and a task name starting with cbxbench-api-; the
samples are removed at the end whatever happens (task cleanup, then the server's own cleanup on
SIGTERM, then a sweep by label with the docker CLI).

Usage: bench_api.py --bin bin/composebox --lib bin/cbxbench-api [--out bench/RESULTS.md] [sizes]
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "clients", "python"))

from composebox import AsyncClient, Client  # noqa: E402

SECTION = "## Server and Python client"
MIB = 1 << 20

# A cheap one-service task on the local base image (the server and the library build it).
COMPOSE = """
services:
  default:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["tail", "-f", "/dev/null"]
    network_mode: none
"""


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def pct(xs, p):
    """Nearest-rank percentile."""
    s = sorted(xs)
    if not s:
        return float("nan")
    k = max(0, min(len(s) - 1, int(-(-p * len(s) // 100)) - 1))
    return s[k]


def loadavg() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def proc_kb(pid: int, field: str) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


class Library:
    """The Go program that calls the library, one JSON line per command."""

    def __init__(self, binary: str, task: str, yaml_path: str) -> None:
        self.proc = subprocess.Popen([binary, "-task", task, "-yaml", yaml_path],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.ready = self._read()
        self.container = self.ready["container"]

    def _read(self) -> dict:
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"library program exited ({self.proc.wait()})")
        d = json.loads(line)
        if "error" in d:
            raise RuntimeError("library: " + d["error"])
        return d

    def call(self, cmd: str) -> dict:
        self.proc.stdin.write(cmd + "\n")
        self.proc.stdin.flush()
        return self._read()

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
            try:
                self.proc.wait(180)
            except subprocess.TimeoutExpired:
                self.proc.terminate()
                self.proc.wait(60)


def sweep(prefix: str) -> list:
    """Remove whatever is left with a task label of this run (only this run's), and say what."""
    left = []
    for kind in ("container", "network", "volume"):
        ls = ["docker", kind, "ls", "-q", "--filter", "label=dev.composebox.managed=true"]
        if kind == "container":
            ls = ["docker", "ps", "-aq", "--filter", "label=dev.composebox.managed=true"]
        ids = subprocess.run(ls, capture_output=True, text=True).stdout.split()
        mine = []
        for i in ids:
            task = subprocess.run(["docker", kind, "inspect", "--format",
                                   '{{index .Config.Labels "dev.composebox.task"}}' if kind == "container"
                                   else '{{index .Labels "dev.composebox.task"}}', i],
                                  capture_output=True, text=True).stdout.strip()
            if task.startswith(prefix):
                mine.append(i)
        if mine:
            left += [f"{kind} {i}" for i in mine]
            rm = ["docker", "rm", "-f"] if kind == "container" else ["docker", kind, "rm"]
            subprocess.run(rm + mine, capture_output=True)
    return left


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True, help="the composebox binary (serve)")
    ap.add_argument("--lib", required=True, help="the library program (bench/api)")
    ap.add_argument("--out", default="", help="Markdown file whose section to replace")
    ap.add_argument("--exec-rounds", type=int, default=100)
    ap.add_argument("--conc", type=int, default=32)
    ap.add_argument("--conc-rounds", type=int, default=5)
    ap.add_argument("--file-rounds", type=int, default=3)
    ap.add_argument("--samples", type=int, default=100)
    ap.add_argument("--sample-concurrency", type=int, default=8)
    a = ap.parse_args()

    # SIGTERM runs the cleanup like Ctrl-C does.
    def on_term(*_):
        raise KeyboardInterrupt("SIGTERM")
    signal.signal(signal.SIGTERM, on_term)

    run = secrets.token_hex(3)
    prefix = f"cbxbench-api-{run}"
    r: dict = {"started": datetime.datetime.now(datetime.timezone.utc), "loads": [], "run": run,
               "cmd": "make bench-api", "args": vars(a)}
    t_start = time.monotonic()
    work = tempfile.mkdtemp(prefix="cbxbench-api-")
    yaml_path = os.path.join(work, "compose.yaml")
    with open(yaml_path, "w") as f:
        f.write(COMPOSE)

    lib = client = None
    status = 0
    try:
        r["loads"].append(("start", loadavg()))
        log(f"== library sample ({prefix}-lib)")
        lib = Library(a.lib, f"{prefix}-lib", yaml_path)
        log("== server (Client.spawn) and its sample")
        client = Client.spawn(a.bin)
        server_pid = client._server.proc.pid  # the spawned server, for its RSS
        socket = client._server.socket
        task = client.task_init(name=f"{prefix}-py", compose_yaml=COMPOSE)
        sample = client.sample_init(task)
        ctr = sample.default.container_name

        def py_exec():
            t0 = time.perf_counter()
            res = client.exec(sample, ["true"])
            d = (time.perf_counter() - t0) * 1000
            assert res.exit_code == 0, res
            return d

        def docker_exec():
            t0 = time.perf_counter()
            subprocess.run(["docker", "exec", ctr, "true"], check=True)
            return (time.perf_counter() - t0) * 1000

        def lib_exec():
            return lib.call("exec")["ms"]

        # 1. exec latency, the three alternating.
        r["loads"].append(("exec", loadavg()))
        log(f"== exec true x{a.exec_rounds} (library, Python client, docker exec)")
        ops = [("lib", lib_exec), ("py", py_exec), ("docker", docker_exec)]
        for _, op in ops:  # warm-up: connections, first exec
            for _ in range(3):
                op()
        ex = {k: [] for k, _ in ops}
        for i in range(a.exec_rounds):
            for j in range(len(ops)):
                k, op = ops[(i + j) % len(ops)]
                ex[k].append(op())
        r["exec"] = ex

        # 2. concurrent execs.
        r["loads"].append(("concurrent", loadavg()))
        log(f"== {a.conc} execs at once x{a.conc_rounds}")

        async def concurrent():
            out = {"lib_wall": [], "lib_ms": [], "py_wall": [], "py_ms": []}
            async with AsyncClient(socket=socket) as ac:
                async def one():
                    t0 = time.perf_counter()
                    res = await ac.exec(sample.project, ["true"], service="default")
                    assert res.exit_code == 0, res
                    return (time.perf_counter() - t0) * 1000

                async def py_round():
                    t0 = time.perf_counter()
                    times = await asyncio.gather(*[one() for _ in range(a.conc)])
                    return (time.perf_counter() - t0) * 1000, times

                await py_round()  # warm-up: opens the pool's connections
                lib.call(f"conc {a.conc}")
                for i in range(a.conc_rounds):
                    for side in (("lib", "py") if i % 2 == 0 else ("py", "lib")):
                        if side == "lib":
                            d = lib.call(f"conc {a.conc}")
                            out["lib_wall"].append(d["wall_ms"])
                            out["lib_ms"] += d["ms"]
                        else:
                            wall, times = await py_round()
                            out["py_wall"].append(wall)
                            out["py_ms"] += times
            return out

        r["conc"] = asyncio.run(concurrent())

        # 3. 10 MiB each way.
        r["loads"].append(("files", loadavg()))
        log(f"== 10 MiB write and read x{a.file_rounds}")
        data = os.urandom(10 * MIB)
        fl = {"lib_write": [], "lib_read": [], "py_write": [], "py_read": []}
        for i in range(a.file_rounds):
            for side in (("lib", "py") if i % 2 == 0 else ("py", "lib")):
                if side == "lib":
                    fl["lib_write"].append(lib.call(f"write /tmp/cbxbench-lib.bin {10 * MIB}")["ms"])
                    d = lib.call("read /tmp/cbxbench-lib.bin")
                    assert d["bytes"] == 10 * MIB, d
                    fl["lib_read"].append(d["ms"])
                else:
                    t0 = time.perf_counter()
                    client.write_file(sample, "/tmp/cbxbench-py.bin", data)
                    fl["py_write"].append((time.perf_counter() - t0) * 1000)
                    t0 = time.perf_counter()
                    back = client.read_file(sample, "/tmp/cbxbench-py.bin")
                    fl["py_read"].append((time.perf_counter() - t0) * 1000)
                    assert back == data, "read back differs"
        r["files"] = fl

        # 4. the server's RSS at 100 live samples.
        r["loads"].append(("rss", loadavg()))
        r["rss_before_kb"] = proc_kb(server_pid, "VmRSS")
        log(f"== {a.samples} live samples through the client (RSS before: {r['rss_before_kb']} kB)")

        async def fill():
            async with AsyncClient(socket=socket) as ac:
                t = await ac.task_init(name=f"{prefix}-rss", compose_yaml=COMPOSE)
                sem = asyncio.Semaphore(a.sample_concurrency)
                done = 0

                async def start(i):
                    nonlocal done
                    async with sem:
                        await ac.sample_init(t, id=f"s{i}")
                        done += 1
                        if done % 20 == 0:
                            log(f"  {done}/{a.samples} live")
                t0 = time.perf_counter()
                try:
                    await asyncio.gather(*[start(i) for i in range(a.samples)])
                    r["fill_s"] = time.perf_counter() - t0
                    r["live"] = len(await ac.sample_list(t))
                    r["rss_kb"] = proc_kb(server_pid, "VmRSS")
                    r["hwm_kb"] = proc_kb(server_pid, "VmHWM")
                    log(f"  {r['live']} live: VmRSS {r['rss_kb']} kB, VmHWM {r['hwm_kb']} kB")
                finally:
                    t1 = time.perf_counter()
                    await ac.task_cleanup(t)
                    r["teardown_s"] = time.perf_counter() - t1

        asyncio.run(fill())
        r["rss_after_kb"] = proc_kb(server_pid, "VmRSS")
        client.task_cleanup(task)
    except BaseException as e:  # noqa: BLE001 - report, clean up, exit non-zero
        status = 130 if isinstance(e, KeyboardInterrupt) else 1
        log(f"bench-api: {type(e).__name__}: {e}")
        if client is not None:
            log("server log tail: " + client.server_log[-2000:])
    finally:
        log("== cleanup")
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        if client is not None:
            client.close()  # closes the lease and stops the server, which removes what it owns
        if lib is not None:
            lib.close()
        left = sweep(prefix)
        if left:
            log(f"bench-api: left behind and now removed: {left}")
            status = status or 1
        try:
            os.remove(yaml_path)
            os.rmdir(work)
        except OSError:
            pass
    if status:
        return status
    r["wall_s"] = time.monotonic() - t_start
    r["loads"].append(("end", loadavg()))
    md = render(r)
    print(md)
    if a.out:
        replace_section(a.out, md)
        log(f"wrote the section to {a.out}")
    return 0


def machine() -> str:
    def sh(*cmd):
        return subprocess.run(cmd, capture_output=True, text=True).stdout.strip()
    with open("/proc/meminfo") as f:
        mem = int(f.readline().split()[1]) / 1048576
    return "\n".join([
        f"cpus (nproc):    {os.cpu_count()}",
        f"memory:          {mem:.1f} GiB",
        f"kernel:          {' '.join(os.uname()[i] for i in (0, 2))}",
        f"docker engine:   {sh('docker', 'version', '--format', '{{.Server.Version}} (API {{.Server.APIVersion}})')}",
        f"storage driver:  {sh('docker', 'info', '--format', '{{.Driver}}')}",
        f"python:          {sys.version.split()[0]} (httpx {__import__('httpx').__version__})",
        f"uptime:          {sh('uptime')}",
    ])


def render(r: dict) -> str:
    ex, cc, fl = r["exec"], r["conc"], r["files"]
    p = {k: (pct(v, 50), pct(v, 95)) for k, v in ex.items()}
    lib50, lib95 = p["lib"]
    py50, py95 = p["py"]
    dk50, dk95 = p["docker"]
    goal1 = py50 <= 1.3 * lib50
    goal2 = py50 < dk50
    mibs = lambda ms_list: 10 / (pct(ms_list, 50) / 1000)  # noqa: E731 - median round's MiB/s
    started = r["started"].strftime("%Y-%m-%d %H:%M UTC")
    a = r["args"]
    loads = ", ".join(f"{k} {v}" for k, v in r["loads"])
    first_load = float(r["loads"][0][1].split()[0])
    busy = any(float(v.split()[0]) > 1.0 for _, v in r["loads"])
    lines = [
        SECTION,
        "",
        f"Run on {started} by `{r['cmd']}` (`bench/api/bench_api.py`, with `bench/api` for the library "
        f"side); the run took {r['wall_s']:.0f} s.",
        "",
        "```",
        machine(),
        f"load average:    {loads} (1, 5, 15 min, at each step)",
        "```",
        "",
    ]
    if busy:
        lines += [f"**The machine had other load during this run** (other sessions' tests on the same {os.cpu_count()} "
                  f"CPUs): the 1-minute load average was {first_load} at the start; see the load "
                  f"averages above. Both sides ran interleaved in the same minutes, so the ratios are "
                  f"fairer than the absolute times.", ""]
    lines += [
        "| metric | Python client via server | baseline | Python / baseline | |",
        "|---|---:|---:|---:|---|",
        f"| exec `true` vs Go library `Sandbox.Exec`, p50 ms | {py50:.1f} | {lib50:.1f} | {py50 / lib50:.2f}× | goal ≤ 1.3×: **{'met' if goal1 else 'MISSED'}** |",
        f"| exec `true` vs Go library, p95 ms | {py95:.1f} | {lib95:.1f} | {py95 / lib95:.2f}× | |",
        f"| exec `true` vs `docker exec` from Python, p50 ms | {py50:.1f} | {dk50:.1f} | {py50 / dk50:.2f}× | goal < 1×: **{'met' if goal2 else 'MISSED'}** |",
        f"| exec `true` vs `docker exec` from Python, p95 ms | {py95:.1f} | {dk95:.1f} | {py95 / dk95:.2f}× | |",
        f"| {a['conc']} execs at once (AsyncClient + gather vs goroutines), wall p50 ms | {pct(cc['py_wall'], 50):.0f} | {pct(cc['lib_wall'], 50):.0f} | {pct(cc['py_wall'], 50) / pct(cc['lib_wall'], 50):.2f}× | |",
        f"| … per exec p50 ms | {pct(cc['py_ms'], 50):.0f} | {pct(cc['lib_ms'], 50):.0f} | {pct(cc['py_ms'], 50) / pct(cc['lib_ms'], 50):.2f}× | |",
        f"| … per exec p95 ms | {pct(cc['py_ms'], 95):.0f} | {pct(cc['lib_ms'], 95):.0f} | {pct(cc['py_ms'], 95) / pct(cc['lib_ms'], 95):.2f}× | |",
        f"| 10 MiB write_file vs WriteFile, MiB/s | {mibs(fl['py_write']):.1f} | {mibs(fl['lib_write']):.1f} | {mibs(fl['py_write']) / mibs(fl['lib_write']):.2f}× | higher is better |",
        f"| 10 MiB read_file vs ReadFile, MiB/s | {mibs(fl['py_read']):.1f} | {mibs(fl['lib_read']):.1f} | {mibs(fl['py_read']) / mibs(fl['lib_read']):.2f}× | higher is better |",
        f"| server RSS at {r['live']} live samples | {r['rss_kb'] / 1024:.0f} MiB | — | — | VmRSS of `composebox serve` |",
        "",
        "Details:",
        "",
        f"- exec: {a['exec_rounds']} rounds, one exec at a time; each round runs the library, the "
        f"Python client and `docker exec` once, in a rotating order, after 3 warm-up execs each. "
        f"The library's time is measured inside the Go program around `Sandbox.Exec`; the "
        f"client's around `Client.exec` (HTTP over the server's Unix socket, JSON both ways); "
        f"`docker exec` around `subprocess.run(['docker', 'exec', CONTAINER, 'true'])` on the "
        f"Python side's container. Percentiles are nearest-rank.",
        f"- concurrent: {a['conc_rounds']} rounds per side, alternating, after a warm-up round each: "
        f"{a['conc']} `AsyncClient.exec` calls under one `asyncio.gather` (one AsyncClient, "
        f"connections kept alive) against {a['conc']} goroutines calling `Sandbox.Exec`, all on "
        f"one sample. Wall per round: Python {', '.join(f'{x:.0f}' for x in cc['py_wall'])} ms; "
        f"library {', '.join(f'{x:.0f}' for x in cc['lib_wall'])} ms. Neither side bounds execs "
        f"at once (`Limits.Execs` is unbounded by default, and `composebox serve` keeps it).",
        f"- files: {a['file_rounds']} rounds per side of a 10 MiB random file written then read "
        f"back at /tmp (Python compares the bytes; the library program checks the length); "
        f"MiB/s of the median round. Python write ms {', '.join(f'{x:.0f}' for x in fl['py_write'])}, "
        f"read ms {', '.join(f'{x:.0f}' for x in fl['py_read'])}; library write ms "
        f"{', '.join(f'{x:.0f}' for x in fl['lib_write'])}, read ms "
        f"{', '.join(f'{x:.0f}' for x in fl['lib_read'])}.",
        f"- RSS: {r['live']} live samples of a one-service task (base image, `network_mode: none`), "
        f"started through `AsyncClient.sample_init` {a['sample_concurrency']} at a time in "
        f"{r['fill_s']:.0f} s, on top of the one sample of the earlier steps; VmRSS of the server "
        f"before {r['rss_before_kb'] / 1024:.0f} MiB, at {r['live']} live {r['rss_kb'] / 1024:.0f} MiB "
        f"(VmHWM {r['hwm_kb'] / 1024:.0f} MiB, which includes the file transfers), after their "
        f"removal ({r['teardown_s']:.0f} s, `task_cleanup`) {r['rss_after_kb'] / 1024:.0f} MiB.",
        "",
        "Goals (issue: exec via Python ≤ 1.3× the library's, and faster than spawning `docker exec`): "
        f"exec via Python is {py50 / lib50:.2f}× the library at p50 ({py95 / lib95:.2f}× at p95): "
        f"**{'met' if goal1 else 'missed'}**; against `docker exec` it is {py50 / dk50:.2f}× at p50 "
        f"({py95 / dk95:.2f}× at p95): **{'met' if goal2 else 'missed'}**.",
        "",
        "Rerun: `make bench-api` (a few minutes; not part of `make test` or `.ci/run`). It replaces "
        "this section and keeps the rest of the file.",
        "",
    ]
    return "\n".join(lines)


def replace_section(path: str, md: str) -> None:
    """Replace the section (up to the next `## ` heading) or append it."""
    try:
        with open(path) as f:
            text = f.read()
    except FileNotFoundError:
        text = ""
    start = text.find(SECTION + "\n")
    if start < 0:
        text = text.rstrip("\n") + "\n\n" + md if text else md
    else:
        nxt = text.find("\n## ", start + len(SECTION))
        text = text[:start] + md + ("\n" + text[nxt + 1:] if nxt >= 0 else "")
    with open(path, "w") as f:
        f.write(text.rstrip("\n") + "\n")


if __name__ == "__main__":
    sys.exit(main())
