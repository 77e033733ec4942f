"""The inspect_ai provider, timed with the real inspect_ai (run by `make bench-inspect` in the
test root of scripts/inspect/run.sh; not part of `make test`):

1. Throughput of N execs of `true` at once from one sample, through inspect's sandbox API and
   the provider (a spawned `composebox serve`, the Python client), against the same N execs
   through the Go library (bench/api's program, `conc N`), rounds alternating. The provider
   runs them as inspect does by default (exec's concurrency=True: at most 32 at a time in the
   provider's queue) and with concurrency=False (all sent at once; those past the server's
   per-lease bound are turned away as busy and sent again).
2. First-byte latency of exec_remote: the provider's native streaming exec, against a model of
   inspect's own exec_remote, which polls: its injected sandbox-tools binary cannot be fetched
   offline, so the baseline is what its polling does, run over composebox's one-shot exec at
   inspect's default poll interval (5 s, its floor): start the command in the background
   writing to a file, read the file with one exec per poll. Both for a command that writes at
   once and for one that writes after 1 s.

Usage: bench_inspect.py --lib bin/cbxbench-api [--n 200] [--rounds 5] [--latency-rounds 5] [--out FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

SECTION_BEGIN = "<!-- bench-inspect:begin -->"
SECTION_END = "<!-- bench-inspect:end -->"
POLL_INTERVAL = 5.0  # inspect's MIN_POLL_INTERVAL, the floor of exec_remote's poll interval

COMPOSE = """services:
  default:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["tail", "-f", "/dev/null"]
    network_mode: none
"""


def log(msg: str) -> None:
    print(f"bench-inspect: {msg}", file=sys.stderr, flush=True)


class Library:
    """bench/api's Go program: the same execs through the library."""

    def __init__(self, binary: str, yaml_path: str) -> None:
        self.p = subprocess.Popen([binary, "-task", "cbxbench-inspect-lib", "-yaml", yaml_path],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.ready = self._read()

    def _read(self) -> dict:
        line = self.p.stdout.readline()
        if not line:
            raise RuntimeError("the library program ended")
        return json.loads(line)

    def call(self, cmd: str) -> dict:
        self.p.stdin.write(cmd + "\n")
        self.p.stdin.flush()
        return self._read()

    def close(self) -> None:
        self.p.stdin.close()
        self.p.wait(120)


def p50(xs):
    return statistics.median(xs) if xs else float("nan")


async def provider_round(env, n: int, concurrency: bool) -> float:
    t0 = time.perf_counter()
    results = await asyncio.gather(*[env.exec(["true"], concurrency=concurrency) for _ in range(n)])
    wall = time.perf_counter() - t0
    bad = [r for r in results if not r.success]
    if bad:
        raise RuntimeError(f"{len(bad)} of {n} execs failed: {bad[0]}")
    return wall


async def first_byte_native(env, delay: float) -> float:
    from inspect_ai.util import ExecStdout

    t0 = time.perf_counter()
    proc = await env.exec_remote(["sh", "-c", f"sleep {delay}; echo x"] if delay else ["echo", "x"])
    t = float("nan")
    async for ev in proc:
        if isinstance(ev, ExecStdout) and t != t:
            t = time.perf_counter() - t0
    return t


async def first_byte_polling(env, delay: float, i: int) -> float:
    out = f"/tmp/poll-{i}.out"
    t0 = time.perf_counter()
    await env.exec(["sh", "-c", f"(sleep {delay}; echo x) >{out} 2>&1 &"])
    while True:
        r = await env.exec(["cat", out])
        if r.stdout:
            return time.perf_counter() - t0
        await asyncio.sleep(POLL_INTERVAL)


async def bench(args) -> dict:
    from inspect_ai.util._sandbox.registry import registry_find_sandboxenv
    from composebox.inspect import _state

    d = tempfile.mkdtemp(prefix="cbxbench-inspect-")
    yaml_path = os.path.join(d, "compose.yaml")
    with open(yaml_path, "w") as f:
        f.write(COMPOSE)
    Env = registry_find_sandboxenv("composebox")
    config = {"compose": yaml_path, "name": "cbxbench"}
    lib = Library(args.lib, yaml_path)
    await Env.task_init("startup", config)
    r: dict = {"n": args.n, "rounds": args.rounds, "provider_queue": [], "provider_direct": [],
               "library": [], "busy_retries": 0}
    try:
        env = (await Env.sample_init("bench", config, {}))["default"]
        await provider_round(env, 8, True)  # warm the connections
        # The library's calls block: off the event loop, whose lease heartbeat must keep beating.
        await asyncio.to_thread(lib.call, "conc 8")
        for i in range(args.rounds):
            r["provider_queue"].append(await provider_round(env, args.n, True))
            before = _state.client.busy_retries
            r["provider_direct"].append(await provider_round(env, args.n, False))
            r["busy_retries"] += _state.client.busy_retries - before
            r["library"].append((await asyncio.to_thread(lib.call, f"conc {args.n}"))["wall_ms"] / 1000)
            log(f"round {i + 1}: provider {r['provider_queue'][-1]:.2f} s (queue), "
                f"{r['provider_direct'][-1]:.2f} s (direct), library {r['library'][-1]:.2f} s")
        for delay in (0.0, 1.0):
            native, polling = [], []
            for i in range(args.latency_rounds):
                native.append(await first_byte_native(env, delay))
                polling.append(await first_byte_polling(env, delay, i))
            r[f"first_byte_{delay:g}"] = {"native": native, "polling": polling}
            log(f"first byte after {delay:g} s: native p50 {p50(native) * 1000:.0f} ms, "
                f"polling p50 {p50(polling) * 1000:.0f} ms")
    finally:
        await Env.task_cleanup("shutdown", config, True)
        lib.close()
    return r


def render(r: dict) -> str:
    n = r["n"]

    def rate(walls):
        return n / p50(walls)

    lines = [
        "## inspect_ai provider",
        "",
        SECTION_BEGIN,
        f"`make bench-inspect` on {platform.node() or 'this machine'} "
        f"({os.cpu_count()} cores, load {os.getloadavg()[0]:.1f} at the end), the real inspect_ai "
        "in the test root. Rounds alternate, p50 of each side.",
        "",
        f"**{n} execs of `true` at once from one sample** ({r['rounds']} rounds):",
        "",
        "| path | wall p50 | execs/s | vs the Go library |",
        "|---|---|---|---|",
    ]
    lib = rate(r["library"])
    for label, key in (("Go library (bench/api, `conc`)", "library"),
                       ("provider, exec(concurrency=True): the provider's queue of 32", "provider_queue"),
                       ("provider, exec(concurrency=False): busy answers waited out", "provider_direct")):
        lines.append(f"| {label} | {p50(r[key]):.2f} s | {rate(r[key]):.0f} | {rate(r[key]) / lib:.2f}x |")
    lines += ["", f"Every exec succeeded; the direct rounds were turned away as busy and sent again "
              f"{r['busy_retries']} times in all.", "",
              "**exec_remote, time to the first byte of output** (p50):", "",
              "| command | native (streamed) | polling model (5 s interval) |", "|---|---|---|"]
    for delay in (0, 1):
        fb = r[f"first_byte_{delay:g}"]
        lines.append(f"| writes after {delay} s | {p50(fb['native']) * 1000:.0f} ms | "
                     f"{p50(fb['polling']) * 1000:.0f} ms |")
    lines += ["", "The polling model is inspect's exec_remote without its injected binary (which "
              "cannot be fetched offline): one exec per poll at its 5 s floor.", SECTION_END, ""]
    return "\n".join(lines)


def replace_section(path: str, md: str) -> None:
    try:
        with open(path) as f:
            text = f.read()
    except FileNotFoundError:
        text = ""
    head = "## inspect_ai provider\n"
    start = text.find(head)
    if start < 0:
        text = text.rstrip("\n") + "\n\n" + md
    else:
        end = text.find(SECTION_END, start)
        end = end + len(SECTION_END) if end >= 0 else len(text)
        text = text[:start] + md.rstrip("\n") + text[end:]
    with open(path, "w") as f:
        f.write(text.rstrip("\n") + "\n")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True, help="bench/api's program (the Go library's side)")
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--latency-rounds", type=int, default=5)
    ap.add_argument("--out", default="", help="Markdown file whose section to replace")
    args = ap.parse_args()
    r = asyncio.run(bench(args))
    md = render(r)
    print(md)
    if args.out:
        replace_section(args.out, md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
