"""The tasks test_eval.py runs with `inspect eval`, as a user's task file would be written. The
model is inspect's mockllm/model, scripted: it calls inspect's bash() tool with each command of
the sample's input (one a line), then answers with the last tool result. The sandbox is
composebox, on this directory's compose files, named $CBX_TEST_NAME."""

import asyncio
import os

from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.model import ModelOutput, ModelUsage, get_model
from inspect_ai.scorer import includes
from inspect_ai.solver import Generate, TaskState, generate, solver, use_tools
from inspect_ai.tool import bash
from inspect_ai.util import sandbox

HERE = os.path.dirname(os.path.abspath(__file__))
NAME = os.environ.get("CBX_TEST_NAME", "evaltasks")


def scripted_model():
    def outputs(input, tools, tool_choice, config):
        commands = [line for line in input[0].text.splitlines() if line.strip()]
        results = [m for m in input if m.role == "tool"]
        if len(results) < len(commands):
            out = ModelOutput.for_tool_call(model="mockllm/model", tool_name="bash",
                                            tool_arguments={"command": commands[len(results)]})
        else:
            out = ModelOutput.from_content(model="mockllm/model", content=results[-1].text)
        # mockllm would count tokens with tiktoken, which downloads its encoding: offline, say them.
        out.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)
        return out

    return get_model("mockllm/model", custom_outputs=outputs)


def sandbox_spec(compose: str):
    return ("composebox", {"compose": os.path.join(HERE, compose), "name": NAME})


@task
def one_service():
    return Task(
        dataset=[
            Sample(id="low", input="echo level=$LEVEL", target="level=3", metadata={"level": 3}),
            Sample(id="high", input="echo level=$LEVEL > /tmp/l\ncat /tmp/l", target="level=9",
                   metadata={"level": 9}),
        ],
        solver=[use_tools(bash(timeout=60)), generate()],
        scorer=includes(),
        sandbox=sandbox_spec("one-service.yaml"),
        model=scripted_model(),
    )


@task
def two_services():
    return Task(
        dataset=[
            # (Retried for a few seconds, quietly, so that the completion is the flag alone: on
            # a loaded Kubernetes node a sibling's name was seen not to resolve yet at the
            # sample's first exec.)
            Sample(id=f"s{i}", target=f"FLAG-{i}", metadata={"flag": f"FLAG-{i}"},
                   input="for i in 1 2 3 4 5 6 7 8 9 10; do wget -qO- http://web:8080/flag 2>/dev/null && break; sleep 1; done")
            for i in range(3)
        ],
        solver=[use_tools(bash(timeout=60)), generate()],
        scorer=includes(),
        sandbox=sandbox_spec("two-services.yaml"),
        model=scripted_model(),
    )


@task
def time_limited():
    return Task(
        dataset=[Sample(id="slow", input="sleep 120", target="never")],
        solver=[use_tools(bash(timeout=300)), generate()],
        scorer=includes(),
        sandbox=sandbox_spec("one-service.yaml"),
        model=scripted_model(),
        time_limit=5,
    )


@solver
def many_execs(n: int = 200):
    """n execs at once from one sample, half of them outside the provider's exec queue
    (concurrency=False), so that the server's per-lease bound turns some away as busy."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        results = await asyncio.gather(*[
            sandbox().exec(["sh", "-c", f"echo {i}"], concurrency=i % 2 == 0) for i in range(n)])
        ok = sum(1 for i, r in enumerate(results) if r.success and r.stdout == f"{i}\n")
        from composebox.inspect import _state

        state.metadata["execs_ok"] = ok
        state.metadata["busy_retries"] = _state.client.busy_retries
        state.output = ModelOutput.from_content(model="mockllm/model", content=f"ok={ok}")
        return state

    return solve


@task
def concurrent_execs():
    return Task(
        dataset=[Sample(id="burst", input="-", target="ok=200")],
        solver=many_execs(200),
        scorer=includes(),
        sandbox=sandbox_spec("one-service.yaml"),
        model=scripted_model(),
    )
