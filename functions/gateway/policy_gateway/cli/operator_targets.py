"""What an operator command acts on: the names, TTLs and region of one gateway.

With `--stack NAME` they are the stack's function's own environment (what the
deployed gateway reads); without it, this shell's environment and the code's
defaults, as a local gateway started here would read them.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Any

from .. import settings
from .deployment import Deployment, client, region
from .operator_errors import OperatorError

# The names `init` creates without --custom-names (a stack's own are known too).
KNOWN_PARAMETERS = (settings.DEFAULT_FLAG_PARAMETER, settings.DEFAULT_POLICY_CONFIG_PARAMETER)
# difflib's ratio above which a missing name is taken for a typo of a known one.
SUGGEST_CUTOFF = 0.8


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

    @property
    def parameters(self) -> dict[str, str]:
        """The flag's and the chain's parameter names, each with the variable that names it."""
        return {
            self.config.flag_parameter: settings.ENV_FLAG_PARAMETER,
            self.policy_config_parameter: settings.ENV_POLICY_CONFIG_PARAMETER,
        }

    def unknown_names(self) -> list[str]:
        """The names `init` would create that neither the code's defaults nor a stack use:
        most likely a typo in this shell's environment."""
        if self.stack:
            return []
        return [name for name in self.parameters if name not in KNOWN_PARAMETERS]

    @staticmethod
    def nearest(name: str) -> str | None:
        """The default name closest to `name`, when one is close enough to be meant."""
        close = difflib.get_close_matches(name, KNOWN_PARAMETERS, n=1, cutoff=SUGGEST_CUTOFF)
        return close[0] if close else None

    def existing_parameter(self, name: str, what: str) -> dict[str, Any]:
        """The SSM parameter `name`, or a refusal naming it and the likely fix."""
        ssm = self.client("ssm")
        try:
            parameter: dict[str, Any] = ssm.get_parameter(Name=name)["Parameter"]
        except ssm.exceptions.ParameterNotFound:
            raise OperatorError(
                f"SSM parameter {name} ({what}, named by {self.source}) does not exist",
                self._missing_step(name),
            ) from None
        return parameter

    def _missing_step(self, name: str) -> str:
        # A stack's own names, and the defaults, are right: they are just not created yet.
        if name not in self.unknown_names():
            return self.init_command
        close = self.nearest(name)
        if close:
            return f"did you mean {close}? set {self.parameters[name]} to it"
        return (
            "run `policy-gateway init --custom-names` to create this name "
            "(or pass --stack NAME to use a deployed stack's names)"
        )

    def setting_source(self, name: str) -> str:
        """Where the value of the variable `name` came from, for the operator to judge."""
        if name in self.env:
            return f"{name} in {self.source}"
        return f"the gateway's default: {name} is not set in {self.source}"


def resolve(stack: str | None, explicit_region: str | None) -> Targets:
    resolved = region(explicit_region)
    if not stack:
        env = settings.environment()
        return Targets(settings.Settings.from_env(env), env, resolved)
    deployment = Deployment(stack, resolved)
    # DescribeStacks first: it is the call that tells an unknown stack from other faults.
    _ = deployment.stack
    try:
        environment = dict(deployment.environment)
    except LookupError as exc:
        raise OperatorError(
            str(exc), "is it a Policy Gateway stack? (sam list resources)"
        ) from None
    return Targets(settings.Settings.from_env(environment), environment, resolved, stack)
