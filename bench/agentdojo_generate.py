"""Generate figure (15)'s AgentDojo data: run once by hand, never by `make`.

AgentDojo (PyPI `agentdojo`, MIT licence, ETH Zurich SPY Lab) pulls in several
model SDKs, so it never enters the project's locks: install it in a throwaway
virtualenv outside the project, and run this file with that interpreter:

    python3 -m venv /tmp/adojo && /tmp/adojo/bin/pip install agentdojo==0.1.35
    /tmp/adojo/bin/python bench/agentdojo_generate.py

For each suite (workspace, travel, banking, slack) of benchmark version
VERSION it writes bench/data/agentdojo/<suite>.json.gz:

- every user task: its prompt and its ground-truth calls, each with the
  result the suite's tools give for it, run on the default environment in
  which every injection vector holds a canary `<CANARY---name--->` (as
  AgentDojo finds a task's injection candidates);
- every injection task: its goal and its ground-truth calls with their results
  (on the default environment);
- the vectors' default (benign) texts, the system prompt, and the
  "important_instructions" attack's text with `{goal}` left to fill.

bench/flow.py puts a conversation together from these: the system prompt, the
user task's prompt, its calls and their results with each canary replaced by
the attack (or, for the benign runs, by the vector's default), then the
injection task's calls as the upstream's answer.
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path
from typing import Any

from agentdojo.agent_pipeline.agent_pipeline import (  # type: ignore[import-not-found]
    load_system_message,
)
from agentdojo.agent_pipeline.ground_truth_pipeline import (  # type: ignore[import-not-found]
    GroundTruthPipeline,
)
from agentdojo.attacks.important_instructions_attacks import (  # type: ignore[import-not-found]
    ImportantInstructionsAttack,
)
from agentdojo.functions_runtime import FunctionsRuntime  # type: ignore[import-not-found]
from agentdojo.task_suite.load_suites import get_suite  # type: ignore[import-not-found]

VERSION = "v1.2.2"
SUITES = ("workspace", "travel", "banking", "slack")
USER = "Emma Johnson"
MODEL = "Claude"
OUT = Path(__file__).parent / "data" / "agentdojo"


def _plain(value: Any) -> Any:
    """A tool argument as JSON can carry it (dates and enums as text)."""
    return json.loads(json.dumps(value, default=str))


def _calls(messages: Any) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = []
    for message in messages:
        if message["role"] == "assistant":
            for call in message["tool_calls"] or []:
                calls.append({"name": call.function, "input": _plain(dict(call.args))})
        elif message["role"] == "tool":
            calls[-1]["result"] = "".join(part["content"] for part in message["content"])
    return calls


def _ground_truth(suite: Any, task: Any, prompt: str, vectors: dict[str, str]) -> Any:
    """A task's ground-truth calls and their results, the vectors holding these texts."""
    environment = suite.load_and_inject_default_environment(vectors)
    runtime = FunctionsRuntime(suite.tools)
    _, _, _, messages, _ = GroundTruthPipeline(task).query(prompt, runtime, environment)
    return _calls(messages)


def suite_data(name: str) -> dict[str, Any]:
    suite = get_suite(VERSION, name)
    defaults = suite.get_injection_vector_defaults()
    canaries = {vector: f"<CANARY---{vector}--->" for vector in defaults}
    user_tasks = {
        task_id: {"prompt": task.PROMPT, "calls": _ground_truth(suite, task, task.PROMPT, canaries)}
        for task_id, task in suite.user_tasks.items()
    }
    injection_tasks = {
        task_id: {"goal": task.GOAL, "calls": _ground_truth(suite, task, task.GOAL, defaults)}
        for task_id, task in suite.injection_tasks.items()
    }
    attack = ImportantInstructionsAttack._JB_STRING.replace("{user}", USER).replace(
        "{model}", MODEL
    )
    return {
        "suite": name,
        "version": VERSION,
        "system": load_system_message(None),
        "attack": attack,
        "defaults": defaults,
        "canaries": canaries,
        "user_tasks": user_tasks,
        "injection_tasks": injection_tasks,
    }


def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    for name in SUITES:
        data = json.dumps(suite_data(name), ensure_ascii=False, sort_keys=True)
        with gzip.open(OUT / f"{name}.json.gz", "wt", encoding="utf-8", compresslevel=9) as out:
            out.write(data)
        print(f"{name}: {len(data):,} characters", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
