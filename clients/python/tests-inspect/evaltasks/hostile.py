"""A task whose samples take their sandbox spec from a dataset row, as a task built from a
public dataset does (record_to_sample passing the row's sandbox config through). test_security.py
writes the rows: each tries to reach the host through the spec."""

import json
import os

from inspect_ai import Task, task
from inspect_ai.dataset import Sample, json_dataset
from inspect_ai.scorer import includes
from inspect_ai.solver import generate, use_tools
from inspect_ai.tool import bash

from tasks import scripted_model


def record_to_sample(record):
    return Sample(id=record["id"], input=record["input"], target="",
                  sandbox=("composebox", record["sandbox"]))


@task
def hostile():
    return Task(
        dataset=json_dataset(os.environ["CBX_HOSTILE_DATASET"], record_to_sample),
        solver=[use_tools(bash(timeout=60)), generate()],
        scorer=includes(),
        model=scripted_model(),
    )
