"""`policy-gateway init --secrets`: gateway_key mode's two secrets, for a gateway without a stack.

A stack creates its own (template.yaml: GatewayKeysSecret, UpstreamApiKeySecret);
a local run's embedded stand-in has none, so `init --secrets` creates them
where they are absent, never overwriting one:

- the gateway keys (GATEWAY_KEYS_SECRET): one freshly generated key named
  `local`, printed once, for clients to present as `x-api-key`, and stored as
  its digest, as `policy-gateway keys` stores keys;
- the gateway's Anthropic key (UPSTREAM_API_KEY_SECRET): ANTHROPIC_API_KEY
  when it is set, else a placeholder that only the upstream simulator accepts.

A running gateway sees them within seconds: a secret it failed to read is
read again after a short back-off (parameters.RETRY_FIRST_SECONDS), not a TTL.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from .. import settings
from ..auth.gateway_keys import GatewayKey, key_digest, keys_document
from .key_changes import new_key

LOCAL_KEY_NAME = "local"
PLACEHOLDER_UPSTREAM_KEY = "sk-ant-placeholder-only-the-simulator-accepts"


def _create(client: Any, name: str, value: str, description: str) -> bool:
    """True if the secret was created; False if one by that name exists (it is kept)."""
    try:
        client.create_secret(Name=name, SecretString=value, Description=description)
    except client.exceptions.ResourceExistsException:
        print(f"kept     {name} (exists; never overwritten)")
        return False
    return True


def create_local_secrets(args: argparse.Namespace) -> int:
    """The two secrets, where absent; `init` refuses `--secrets` with `--stack` before this."""
    import boto3

    config = settings.Settings.from_env()
    from .deployment import region

    client = boto3.client("secretsmanager", region_name=region(args.region))
    key = new_key()
    keys = keys_document([GatewayKey(key_digest(key), LOCAL_KEY_NAME, created=time.time())])
    if _create(
        client, config.gateway_keys_secret, keys, "Policy Gateway: the keys clients present"
    ):
        # Printed once, here: the secret keeps it, no log ever does.
        print(f"created  {config.gateway_keys_secret}: key {LOCAL_KEY_NAME!r} = {key}")
    upstream = settings.anthropic_api_key() or PLACEHOLDER_UPSTREAM_KEY
    if _create(
        client,
        config.upstream_api_key_secret,
        upstream,
        "Policy Gateway: the Anthropic API key the gateway calls with",
    ):
        source = (
            f"from {settings.ENV_ANTHROPIC_API_KEY}"
            if upstream != PLACEHOLDER_UPSTREAM_KEY
            else "a placeholder only the simulator accepts; set "
            f"{settings.ENV_ANTHROPIC_API_KEY} "
            "before init to store your key"
        )
        print(f"created  {config.upstream_api_key_secret} ({source})")
    return 0


def missing_secrets(config: settings.Settings) -> list[str]:
    """The names of the two secrets that do not exist yet (`init --secrets` creates them).

    Only a definite "not found" counts: any other failure (an endpoint configured elsewhere
    that refuses these credentials) leaves the gateway to read and report them as usual.
    """
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError

    from .deployment import region

    client = boto3.client("secretsmanager", region_name=region(None))
    missing = []
    for name in (config.gateway_keys_secret, config.upstream_api_key_secret):
        try:
            client.describe_secret(SecretId=name)
        except client.exceptions.ResourceNotFoundException:
            missing.append(name)
        except (BotoCoreError, ClientError):
            return []
    return missing
