"""The gateway's configuration: every environment variable it reads, read here and only here.

The one exception is where spans go, observability/tracing_settings.py, read
only once tracing is set up. template.yaml's function environment and the
operators' runbooks use these names, and tests assert that the template agrees
with them. The environment only: the variables, their defaults and the values
they may take. The metric identity and the span keys are in names.py; a
constant that is not configuration lives with the module that uses it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from .names import METRICS_NAMESPACE, SERVICE_NAME

# Environment variable names (documented in the README).
ENV_UPSTREAM_BASE_URL = "UPSTREAM_BASE_URL"
ENV_UPSTREAM_MAX_RETRIES = "UPSTREAM_MAX_RETRIES"
ENV_UPSTREAM_CONNECT_TIMEOUT = "UPSTREAM_CONNECT_TIMEOUT_SECONDS"
ENV_UPSTREAM_READ_TIMEOUT = "UPSTREAM_READ_TIMEOUT_SECONDS"
ENV_UPSTREAM_MAX_ANSWER_BYTES = "UPSTREAM_MAX_ANSWER_BYTES"
ENV_FLAG_PARAMETER = "FALLBACK_FLAG_PARAMETER"
ENV_FLAG_TTL = "FALLBACK_FLAG_TTL_SECONDS"
ENV_POLICY_CONFIG = "POLICY_CONFIG"
ENV_POLICY_CONFIG_PARAMETER = "POLICY_CONFIG_PARAMETER"
ENV_POLICY_CONFIG_TTL = "POLICY_CONFIG_TTL_SECONDS"
ENV_DEADLINE_MARGIN = "DEADLINE_MARGIN_SECONDS"
ENV_AUTH_MODE = "AUTH_MODE"
ENV_GATEWAY_KEYS_SECRET = "GATEWAY_KEYS_SECRET"
ENV_UPSTREAM_API_KEY_SECRET = "UPSTREAM_API_KEY_SECRET"
ENV_SECRETS_TTL = "SECRETS_TTL_SECONDS"
ENV_UPSTREAM_PROVIDER = "UPSTREAM_PROVIDER"
ENV_BEDROCK_REGION = "BEDROCK_REGION"
ENV_BEDROCK_MODEL_MAP = "BEDROCK_MODEL_MAP"
# The AWS SDKs' own service-specific endpoint variable (service id "Bedrock Runtime").
ENV_BEDROCK_ENDPOINT_URL = "AWS_ENDPOINT_URL_BEDROCK_RUNTIME"
# Set by Lambda itself: the function's Region, BEDROCK_REGION's default.
ENV_AWS_REGION = "AWS_REGION"
# The older name, the only one botocore reads itself.
ENV_AWS_DEFAULT_REGION = "AWS_DEFAULT_REGION"
ENV_SERVICE_NAME = "POWERTOOLS_SERVICE_NAME"
ENV_METRICS_NAMESPACE = "POWERTOOLS_METRICS_NAMESPACE"
ENV_ALLOW_FILES_API = "ALLOW_FILES_API"
ENV_GATEWAY_PUBLIC_URL = "GATEWAY_PUBLIC_URL"
# Set by Lambda itself; the adapter's context headers are trusted only then.
ENV_LAMBDA_TASK_ROOT = "LAMBDA_TASK_ROOT"
ENV_SERVER_LOG_LEVEL = "UVICORN_LOG_LEVEL"
ENV_FALLBACK_BUDGET = "FALLBACK_BUDGET"
ENV_FALLBACK_BUDGET_WINDOW = "FALLBACK_BUDGET_WINDOW_SECONDS"
ENV_FALLBACK_BUDGET_TABLE = "FALLBACK_BUDGET_TABLE"
# Issue 42: the DynamoDB table the limits count in (unset: each process counts its own).
ENV_LIMITS_TABLE = "LIMITS_TABLE"
# Issue 43: where recorded conversations go (records/store.py): a bucket, else a folder.
ENV_RECORDS_BUCKET = "RECORDS_BUCKET"
ENV_RECORDS_DIR = "RECORDS_DIR"
# The Lambda Web Adapter's own SnapStart variables (adapter >= v1.1.0): the paths it
# POSTs before the snapshot and after a restore. The gateway serves its hooks (lifecycle.py)
# at whatever they name, so the template sets them once for both.
ENV_SNAPSTART_BEFORE_CHECKPOINT_PATH = "AWS_LWA_SNAPSTART_BEFORE_CHECKPOINT_PATH"
ENV_SNAPSTART_AFTER_RESTORE_PATH = "AWS_LWA_SNAPSTART_AFTER_RESTORE_PATH"
# Outside Lambda the hook routes answer 404 unless this is `true` (tests, the bench).
ENV_SNAPSTART_HOOKS = "SNAPSTART_HOOKS"
# Bytes of detector findings kept per process (gateway_policies/detect/memo.py); 0 = off.
ENV_POLICY_MEMO_BYTES = "POLICY_MEMO_BYTES"

DEFAULT_UPSTREAM_BASE_URL = "https://api.anthropic.com"
DEFAULT_UPSTREAM_MAX_RETRIES = 2
DEFAULT_UPSTREAM_CONNECT_TIMEOUT = 5.0
DEFAULT_UPSTREAM_READ_TIMEOUT = 600.0
# The largest non-streaming answer read (decoded), well above the largest Messages
# answer (128k output tokens of escaped text is a few MB), well below what a policy
# parse of tiny blocks (about ten times the bytes) could hold in a 512 MB function.
DEFAULT_UPSTREAM_MAX_ANSWER_BYTES = 16 * 1024 * 1024
DEFAULT_FLAG_PARAMETER = "/policy-gateway/passthrough-fallback-enabled"
DEFAULT_FLAG_TTL = 30.0
DEFAULT_POLICY_CONFIG_PARAMETER = "/policy-gateway/policy-config"
DEFAULT_POLICY_CONFIG_TTL = 30.0
DEFAULT_DEADLINE_MARGIN = 3.0
# At most this many fallbacks per caller per window; 0 means no fallback at all.
DEFAULT_FALLBACK_BUDGET = 10
DEFAULT_FALLBACK_BUDGET_WINDOW = 3600
DEFAULT_SNAPSTART_BEFORE_CHECKPOINT_PATH = "/_lifecycle/before-checkpoint"
DEFAULT_SNAPSTART_AFTER_RESTORE_PATH = "/_lifecycle/after-restore"
# About 100,000 texts' findings (an entry is a digest and its spans, ~160 bytes): a few
# hundred sessions' worth of blocks, a few percent of the template's MemorySize.
DEFAULT_POLICY_MEMO_BYTES = 16 * 1024 * 1024

# `passthrough`: the client's own Anthropic credentials go upstream.
# `gateway_key`: clients present a gateway key, the gateway holds the Anthropic key.
AUTH_PASSTHROUGH = "passthrough"
AUTH_GATEWAY_KEY = "gateway_key"
AUTH_MODES = (AUTH_PASSTHROUGH, AUTH_GATEWAY_KEY)
DEFAULT_AUTH_MODE = AUTH_PASSTHROUGH
DEFAULT_GATEWAY_KEYS_SECRET = "policy-gateway/gateway-keys"
DEFAULT_UPSTREAM_API_KEY_SECRET = "policy-gateway/anthropic-api-key"
DEFAULT_SECRETS_TTL = 60.0

# The Files API is refused unless the operator turns it on: no policy can see
# an uploaded file, and a later message may reference it by id.
DEFAULT_ALLOW_FILES_API = False
# `anthropic`: the Messages API at UPSTREAM_BASE_URL. `bedrock`: Claude on Amazon
# Bedrock (bedrock-runtime), signed with the function's AWS credentials.
PROVIDER_ANTHROPIC = "anthropic"
PROVIDER_BEDROCK = "bedrock"
UPSTREAM_PROVIDERS = (PROVIDER_ANTHROPIC, PROVIDER_BEDROCK)
DEFAULT_UPSTREAM_PROVIDER = PROVIDER_ANTHROPIC


@dataclass(frozen=True)
class Settings:
    """Configuration read once, when the app is created."""

    upstream_base_url: str = DEFAULT_UPSTREAM_BASE_URL
    upstream_max_retries: int = DEFAULT_UPSTREAM_MAX_RETRIES
    upstream_connect_timeout: float = DEFAULT_UPSTREAM_CONNECT_TIMEOUT
    upstream_read_timeout: float = DEFAULT_UPSTREAM_READ_TIMEOUT
    upstream_max_answer_bytes: int = DEFAULT_UPSTREAM_MAX_ANSWER_BYTES
    flag_parameter: str = DEFAULT_FLAG_PARAMETER
    flag_ttl: float = DEFAULT_FLAG_TTL
    policy_config: str | None = None
    policy_config_parameter: str | None = None
    policy_config_ttl: float = DEFAULT_POLICY_CONFIG_TTL
    deadline_margin: float = DEFAULT_DEADLINE_MARGIN
    auth_mode: str = DEFAULT_AUTH_MODE
    gateway_keys_secret: str = DEFAULT_GATEWAY_KEYS_SECRET
    upstream_api_key_secret: str = DEFAULT_UPSTREAM_API_KEY_SECRET
    secrets_ttl: float = DEFAULT_SECRETS_TTL
    allow_files_api: bool = DEFAULT_ALLOW_FILES_API
    public_url: str | None = None
    """The gateway's own base URL as clients reach it, for the batch `results_url`s it hands out."""
    trust_lambda_context: bool = False
    """Read x-amzn-lambda-context / x-amzn-request-context. Only in Lambda is the
    adapter the one who sets them; elsewhere a client could pick the call id and
    the deadline."""
    local_hosts: frozenset[str] = frozenset()
    """The only `Host`s answered (empty: any): those naming the loopback address `serve`
    listens on outside Lambda, against a page's DNS rebinding (auth/web_pages.py)."""
    server_log_level: str = "warning"
    warm_secrets: bool = True
    """Read gateway_key mode's secrets at start-up. `serve` turns it off when its embedded
    stand-in holds none yet (`init --secrets` creates them): a first start then logs no
    error about a secret nobody created; the first call reads them as usual."""
    """uvicorn's own log level under `serve` (its access log stays off)."""
    fallback_budget: int = DEFAULT_FALLBACK_BUDGET
    fallback_budget_window: int = DEFAULT_FALLBACK_BUDGET_WINDOW
    fallback_budget_table: str | None = None
    limits_table: str | None = None
    records_bucket: str | None = None
    records_dir: str | None = None
    # The TTL caches' time source (flag, chain, secrets); tests hand in a clock
    # they advance, so a TTL passes without the test sleeping through it.
    clock: Callable[[], float] = field(default=time.monotonic, compare=False)
    upstream_provider: str = DEFAULT_UPSTREAM_PROVIDER
    bedrock_region: str | None = None
    bedrock_model_map: str | None = None
    bedrock_endpoint_url: str | None = None
    snapstart_before_checkpoint_path: str = DEFAULT_SNAPSTART_BEFORE_CHECKPOINT_PATH
    snapstart_after_restore_path: str = DEFAULT_SNAPSTART_AFTER_RESTORE_PATH
    refresh_in_background: bool = False
    """Re-read the chain and the flag ahead of their TTL without calls: outside Lambda
    (`serve`), where the process runs between calls; in Lambda nothing does."""
    snapstart_hooks: bool = False
    """Serve the SnapStart hooks: always in Lambda (the adapter calls them), elsewhere
    only when SNAPSTART_HOOKS=true, so that a laptop's gateway has no such routes."""
    policy_memo_bytes: int = DEFAULT_POLICY_MEMO_BYTES

    def __post_init__(self) -> None:
        # A typo here must stop the gateway at start-up: guessing a mode could
        # open the gateway to anyone or lock everyone out.
        if self.auth_mode not in AUTH_MODES:
            raise ValueError(f"{ENV_AUTH_MODE} must be one of {AUTH_MODES}, got {self.auth_mode!r}")
        if self.public_url is not None:
            parts = urlsplit(self.public_url)
            usable = parts.scheme in ("http", "https") and parts.netloc
            if not usable or parts.query or parts.fragment:
                raise ValueError(
                    f"{ENV_GATEWAY_PUBLIC_URL} must be an http(s) URL without a query or fragment, "
                    f"got {self.public_url!r}"
                )
        # Likewise a budget that cannot be meant: a negative one would read as
        # "no limit" to some and "no fallback" to others.
        if self.fallback_budget < 0:
            raise ValueError(f"{ENV_FALLBACK_BUDGET} must be 0 or more, got {self.fallback_budget}")
        if self.fallback_budget_window < 1:
            raise ValueError(
                f"{ENV_FALLBACK_BUDGET_WINDOW} must be at least 1 (seconds), "
                f"got {self.fallback_budget_window}"
            )
        if self.upstream_max_answer_bytes < 1:
            raise ValueError(
                f"{ENV_UPSTREAM_MAX_ANSWER_BYTES} must be at least 1, "
                f"got {self.upstream_max_answer_bytes}"
            )
        if self.policy_memo_bytes < 0:
            raise ValueError(
                f"{ENV_POLICY_MEMO_BYTES} must be 0 (off) or more, got {self.policy_memo_bytes}"
            )
        if self.upstream_provider not in UPSTREAM_PROVIDERS:
            raise ValueError(
                f"{ENV_UPSTREAM_PROVIDER} must be one of {UPSTREAM_PROVIDERS}, "
                f"got {self.upstream_provider!r}"
            )

    @property
    def bedrock(self) -> bool:
        return self.upstream_provider == PROVIDER_BEDROCK

    @property
    def parameters_ttl(self) -> float:
        """The flag and a chain parameter are read in one call: every shorter TTL of the two."""
        if self.policy_config_parameter:
            return min(self.flag_ttl, self.policy_config_ttl)
        return self.flag_ttl

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env
        return cls(
            upstream_base_url=env.get(ENV_UPSTREAM_BASE_URL) or DEFAULT_UPSTREAM_BASE_URL,
            upstream_max_retries=int(
                env.get(ENV_UPSTREAM_MAX_RETRIES, DEFAULT_UPSTREAM_MAX_RETRIES)
            ),
            upstream_connect_timeout=float(
                env.get(ENV_UPSTREAM_CONNECT_TIMEOUT, DEFAULT_UPSTREAM_CONNECT_TIMEOUT)
            ),
            upstream_read_timeout=float(
                env.get(ENV_UPSTREAM_READ_TIMEOUT, DEFAULT_UPSTREAM_READ_TIMEOUT)
            ),
            upstream_max_answer_bytes=int(
                env.get(ENV_UPSTREAM_MAX_ANSWER_BYTES, DEFAULT_UPSTREAM_MAX_ANSWER_BYTES)
            ),
            flag_parameter=env.get(ENV_FLAG_PARAMETER) or DEFAULT_FLAG_PARAMETER,
            flag_ttl=float(env.get(ENV_FLAG_TTL, DEFAULT_FLAG_TTL)),
            policy_config=env.get(ENV_POLICY_CONFIG) or None,
            policy_config_parameter=env.get(ENV_POLICY_CONFIG_PARAMETER) or None,
            policy_config_ttl=float(env.get(ENV_POLICY_CONFIG_TTL, DEFAULT_POLICY_CONFIG_TTL)),
            deadline_margin=float(env.get(ENV_DEADLINE_MARGIN, DEFAULT_DEADLINE_MARGIN)),
            auth_mode=(env.get(ENV_AUTH_MODE) or DEFAULT_AUTH_MODE).strip().lower(),
            gateway_keys_secret=env.get(ENV_GATEWAY_KEYS_SECRET) or DEFAULT_GATEWAY_KEYS_SECRET,
            upstream_api_key_secret=(
                env.get(ENV_UPSTREAM_API_KEY_SECRET) or DEFAULT_UPSTREAM_API_KEY_SECRET
            ),
            secrets_ttl=float(env.get(ENV_SECRETS_TTL, DEFAULT_SECRETS_TTL)),
            allow_files_api=_switch(ENV_ALLOW_FILES_API, env.get(ENV_ALLOW_FILES_API)),
            public_url=(env.get(ENV_GATEWAY_PUBLIC_URL) or "").strip().rstrip("/") or None,
            trust_lambda_context=bool(env.get(ENV_LAMBDA_TASK_ROOT)),
            refresh_in_background=not env.get(ENV_LAMBDA_TASK_ROOT),
            server_log_level=env.get(ENV_SERVER_LOG_LEVEL) or "warning",
            fallback_budget=int(env.get(ENV_FALLBACK_BUDGET, DEFAULT_FALLBACK_BUDGET)),
            fallback_budget_window=int(
                env.get(ENV_FALLBACK_BUDGET_WINDOW, DEFAULT_FALLBACK_BUDGET_WINDOW)
            ),
            fallback_budget_table=env.get(ENV_FALLBACK_BUDGET_TABLE) or None,
            limits_table=env.get(ENV_LIMITS_TABLE) or None,
            records_bucket=(env.get(ENV_RECORDS_BUCKET) or "").strip() or None,
            records_dir=(env.get(ENV_RECORDS_DIR) or "").strip() or None,
            upstream_provider=(env.get(ENV_UPSTREAM_PROVIDER) or DEFAULT_UPSTREAM_PROVIDER)
            .strip()
            .lower(),
            bedrock_region=env.get(ENV_BEDROCK_REGION) or aws_region(env),
            bedrock_model_map=env.get(ENV_BEDROCK_MODEL_MAP) or None,
            bedrock_endpoint_url=env.get(ENV_BEDROCK_ENDPOINT_URL) or None,
            snapstart_before_checkpoint_path=env.get(ENV_SNAPSTART_BEFORE_CHECKPOINT_PATH)
            or DEFAULT_SNAPSTART_BEFORE_CHECKPOINT_PATH,
            snapstart_after_restore_path=env.get(ENV_SNAPSTART_AFTER_RESTORE_PATH)
            or DEFAULT_SNAPSTART_AFTER_RESTORE_PATH,
            snapstart_hooks=bool(env.get(ENV_LAMBDA_TASK_ROOT))
            or _switch(ENV_SNAPSTART_HOOKS, env.get(ENV_SNAPSTART_HOOKS)),
            policy_memo_bytes=int(env.get(ENV_POLICY_MEMO_BYTES, DEFAULT_POLICY_MEMO_BYTES)),
        )


def service_name(env: Mapping[str, str] | None = None) -> str:
    """The `service` of every metric, log line and span: the stack's name when deployed.

    Read where each is set up, at import (metrics, logs) or at the build
    (traces), all three from here so they can never disagree.
    """
    env = os.environ if env is None else env
    return env.get(ENV_SERVICE_NAME) or SERVICE_NAME


def aws_region(env: Mapping[str, str] | None = None) -> str | None:
    """The region the environment names, as the AWS SDKs read it: AWS_REGION, then
    AWS_DEFAULT_REGION (botocore reads only the latter, while Lambda and most shells set
    the former). None leaves the profile's region to botocore."""
    env = os.environ if env is None else env
    return env.get(ENV_AWS_REGION) or env.get(ENV_AWS_DEFAULT_REGION) or None


# Read only by `policy-gateway init --secrets`, to fill the upstream key secret
# of a run without a stack; the gateway itself reads its key from the secret.
ENV_ANTHROPIC_API_KEY = "ANTHROPIC_API_KEY"


def anthropic_api_key(env: Mapping[str, str] | None = None) -> str | None:
    env = os.environ if env is None else env
    return env.get(ENV_ANTHROPIC_API_KEY) or None


def metrics_namespace(env: Mapping[str, str] | None = None) -> str:
    env = os.environ if env is None else env
    return env.get(ENV_METRICS_NAMESPACE) or METRICS_NAMESPACE


def _switch(name: str, value: str | None) -> bool:
    """`true` / `false` (any case; unset or empty is false). Anything else stops the start:
    a security switch must not be guessed from `yes` or `1`."""
    text = (value or "false").strip().lower()
    if text not in ("true", "false"):
        raise ValueError(f"{name} must be true or false, got {value!r}")
    return text == "true"


def environment() -> dict[str, str]:
    """A copy of this process's environment: the operator commands say where a value came from."""
    return dict(os.environ)
