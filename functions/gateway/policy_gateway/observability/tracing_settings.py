"""Where spans go: the tracing part of the configuration, read once when tracing is first set up.

settings.py holds every other variable the gateway reads; these are read here
and only here. The OTEL_* names are OpenTelemetry's standard ones; the SDK
itself also reads OTEL_TRACES_SAMPLER(_ARG), OTEL_RESOURCE_ATTRIBUTES,
OTEL_EXPORTER_OTLP_HEADERS and the other OTLP exporter settings.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import import_module

from ..settings import ENV_LAMBDA_TASK_ROOT

ENV_XRAY_DAEMON_ADDRESS = "AWS_XRAY_DAEMON_ADDRESS"
ENV_OTEL_SERVICE_NAME = "OTEL_SERVICE_NAME"
ENV_OTEL_SDK_DISABLED = "OTEL_SDK_DISABLED"
ENV_OTLP_ENDPOINT = "OTEL_EXPORTER_OTLP_ENDPOINT"
ENV_OTLP_TRACES_ENDPOINT = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
ENV_TRACE_DISABLED = "POWERTOOLS_TRACE_DISABLED"

# Where Lambda's X-Ray endpoint listens when AWS_XRAY_DAEMON_ADDRESS is unset
# (the X-Ray daemon's own default).
DEFAULT_XRAY_DAEMON_ADDRESS = "127.0.0.1:2000"

# Spans over OTLP/HTTP (outside Lambda) need this module, which pyproject.toml's
# `otlp` extra installs; the function in Lambda sends over UDP without it.
OTLP_EXPORTER_MODULE = "opentelemetry.exporter.otlp.proto.http.trace_exporter"
OTLP_EXTRA = "otlp"


@dataclass(frozen=True)
class TracingSettings:
    """Where spans go (tracer_provider.py), read once when tracing is first set up.

    On in Lambda (spans to its X-Ray endpoint over UDP), or elsewhere once an
    OTLP endpoint is named (the OTLP/HTTP exporter reads the rest of its
    OTEL_* settings itself); off whenever OTEL_SDK_DISABLED or
    POWERTOOLS_TRACE_DISABLED says so.
    """

    enabled: bool
    in_lambda: bool
    xray_daemon_address: str

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> TracingSettings:
        env = os.environ if env is None else env
        disabled = any(
            env.get(switch, "").strip().lower() in ("1", "true", "yes")
            for switch in (ENV_OTEL_SDK_DISABLED, ENV_TRACE_DISABLED)
        )
        in_lambda = bool(env.get(ENV_LAMBDA_TASK_ROOT))
        named = any(env.get(name) for name in (ENV_OTLP_ENDPOINT, ENV_OTLP_TRACES_ENDPOINT))
        return cls(
            enabled=not disabled and (in_lambda or named),
            in_lambda=in_lambda,
            xray_daemon_address=env.get(ENV_XRAY_DAEMON_ADDRESS) or DEFAULT_XRAY_DAEMON_ADDRESS,
        )


class ExporterMissing(Exception):
    """Spans are to go over OTLP/HTTP, and its exporter cannot be imported."""


def check_exporter() -> None:
    """ExporterMissing when tracing outside Lambda is on and the OTLP/HTTP exporter is absent.

    Checked before the server opens its port: found only when the gateway is
    built, the gateway would never be ready and every call would fail.
    """
    config = TracingSettings.from_env()
    if not config.enabled or config.in_lambda:
        return
    try:
        import_module(OTLP_EXPORTER_MODULE)
    except ImportError as exc:
        raise ExporterMissing(
            f"{ENV_OTLP_ENDPOINT} (or {ENV_OTLP_TRACES_ENDPOINT}) turns "
            "tracing on, but the OTLP/HTTP exporter "
            f"cannot be imported ({exc.name or exc}): install it with "
            f"pip install 'policy-gateway[{OTLP_EXTRA}]', or unset the endpoint"
        ) from None
