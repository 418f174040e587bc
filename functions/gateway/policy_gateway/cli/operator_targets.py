"""What an operator command acts on: the names, TTLs and region of one gateway.

With `--stack NAME` they are the stack's function's own environment (what the
deployed gateway reads); without it, this shell's environment and the code's
defaults, as a local gateway started here would read them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .. import settings
from .deployment import Deployment, client
from .operator_errors import OperatorError


@dataclass
class Targets:
    config: settings.Settings
    env: dict[str, str]
    region: str | None
    stack: str | None = None
    _clients: dict[str, Any] = field(default_factory=dict, repr=False)

    def client(self, service: str) -> Any:
        if service not in self._clients:
            self._clients[service] = client(service, self.region)
        return self._clients[service]

    @property
    def source(self) -> str:
        if self.stack:
            return f"stack {self.stack}'s function environment"
        return "this shell's environment (pass --stack NAME for a deployed gateway's)"

    @property
    def init_command(self) -> str:
        if self.stack:
            region = f" --region {self.region}" if self.region else ""
            return f"run `policy-gateway init --stack {self.stack}{region}`"
        return "run `policy-gateway init` (or pass --stack NAME to use a deployed stack's names)"

    @property
    def policy_config_parameter(self) -> str:
        return self.config.policy_config_parameter or settings.DEFAULT_POLICY_CONFIG_PARAMETER

    def existing_parameter(self, name: str, what: str) -> dict[str, Any]:
        """The SSM parameter `name`, or a refusal naming it: only `init` creates one."""
        ssm = self.client("ssm")
        try:
            parameter: dict[str, Any] = ssm.get_parameter(Name=name)["Parameter"]
        except ssm.exceptions.ParameterNotFound:
            raise OperatorError(
                f"SSM parameter {name} ({what}, named by {self.source}) does not exist",
                self.init_command,
            ) from None
        return parameter

    def setting_source(self, name: str) -> str:
        """Where the value of the variable `name` came from, for the operator to judge."""
        if name in self.env:
            return f"{name} in {self.source}"
        return f"the gateway's default: {name} is not set in {self.source}"


def resolve(stack: str | None, region: str | None) -> Targets:
    region = region or settings.aws_region()
    if not stack:
        env = settings.environment()
        return Targets(settings.Settings.from_env(env), env, region)
    deployment = Deployment(stack, region)
    # DescribeStacks first: it is the call that tells an unknown stack from other faults.
    _ = deployment.stack
    try:
        environment = dict(deployment.environment)
    except LookupError as exc:
        raise OperatorError(
            str(exc), "is it a Policy Gateway stack? (sam list resources)"
        ) from None
    return Targets(settings.Settings.from_env(environment), environment, region, stack)
