"""What every `policy-gateway doctor` check works with: the stack, and how it answers.

A check is a plain function of a `Checkup` that returns what it found, or
raises `Problem` with what is wrong and how to fix it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..deployment import Deployment


class Problem(Exception):
    """A failed check: what is wrong, and how to fix it."""

    def __init__(self, wrong: str, fix: str) -> None:
        super().__init__(wrong)
        self.wrong = wrong
        self.fix = fix


@dataclass
class Result:
    name: str
    ok: bool
    detail: str
    fix: str = ""

    def lines(self) -> list[str]:
        lines = [f"{'OK  ' if self.ok else 'FAIL'}  {self.name}: {self.detail}"]
        if self.fix:
            lines.append(f"      fix: {self.fix}")
        return lines


class Checkup:
    """The deployed stack under examination, and where its URL answers."""

    def __init__(self, deployment: Deployment, url: str | None = None) -> None:
        self.deployment = deployment
        self.url = url
        self.init_command = f"policy-gateway init --stack {deployment.stack_name}" + (
            f" --region {deployment.region}" if deployment.region else ""
        )

    def template_value(self, value: Any) -> Any:
        """A template value as deployed, or None where it needs more than a Ref to know."""
        if isinstance(value, str | int | float):
            return str(value)
        if isinstance(value, list):
            items = [self.template_value(item) for item in value]
            return None if None in items else items
        if isinstance(value, dict) and list(value) == ["Ref"]:
            if value["Ref"] == "AWS::StackName":
                return self.deployment.stack_name
            return self.deployment.parameter(value["Ref"])
        return None


def aws_error(exc: Exception) -> str:
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        error = response.get("Error", {})
        return f"{error.get('Code', type(exc).__name__)}: {error.get('Message', exc)}"
    return f"{type(exc).__name__}: {exc}"
