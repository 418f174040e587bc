"""Credential files an agent reads, redacted through the real gateway (issue 40, items 4 and 5).

`cat .env`, `~/.netrc`, `~/.pgpass`, a kubeconfig, a Docker config with an ECR login: each as
a tool result, sent with the official SDK (JSON and stream) under the default `redact_secrets`.
The upstream must receive every secret replaced by its kind's mark, and the names, hosts,
users and non-secret values exactly as the agent read them.
"""

from __future__ import annotations

import base64
import json
import random
import string

from .support.client import policy_chain
from .support.fake_upstream import FakeUpstream, api_rules
from .support.gateway import GatewayFactory
from .support.sdk import ask, both, sdk, tool_result

CHAIN = policy_chain(("redact_secrets", {}))
_RNG = random.Random(40)


def _random(length: int, alphabet: str = string.ascii_letters + string.digits) -> str:
    return "".join(_RNG.choice(alphabet) for _ in range(length)) + "7q"


# Item 4: labels whose credential word is a short segment, and credential files with no `=`.
ENV = {name: _random(18) for name in ("DB_PASS", "SMTP_PASS", "REDIS_PASS")} | {
    name: _random(32, "0123456789abcdef")
    for name in ("ENCRYPTION_KEY", "MASTER_KEY", "SIGNING_KEY", "PRIVATE_KEY")
}
NETRC_PASSWORD, PGPASS_PASSWORD = _random(20), _random(16)
FILES = (
    "$ cat .env\nAPP_ENV=production\nDB_HOST=db.internal\n"
    + "".join(f"{name}={value}\n" for name, value in ENV.items())
    + "LOG_LEVEL=info\n$ cat ~/.netrc\nmachine api.heroku.com\n  login bob\n"
    f"  password {NETRC_PASSWORD}\n$ cat ~/.pgpass\n"
    f"db.internal:5432:billing:app_user:{PGPASS_PASSWORD}\n"
)
FILE_SECRETS = {
    **{
        value: "generic_secret" if "KEY" in name else "generic_password"
        for name, value in ENV.items()
    },
    NETRC_PASSWORD: "netrc_password",
    PGPASS_PASSWORD: "pgpass_password",
}


# Item 5: credentials wrapped in base64.
_PEM = (
    "-----BEGIN RSA PRIVATE KEY-----\n"
    + "\n".join(_random(62, string.ascii_letters + string.digits + "+/") for _ in range(20))
    + "\n-----END RSA PRIVATE KEY-----\n"
)
CLIENT_KEY = base64.b64encode(_PEM.encode()).decode()
CERTIFICATE = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nMIIC" + b"A" * 300).decode()
# `aws ecr get-login-password` prints about 2,000 characters; the config holds `AWS:` and it.
ECR_AUTH = base64.b64encode(b"AWS:" + base64.b64encode(_random(1500).encode())).decode()
DOCKER_CONFIG = json.dumps(
    {"auths": {"123456789012.dkr.ecr.us-east-1.amazonaws.com": {"auth": ECR_AUTH}}}, indent="\t"
)
DOCKERCONFIGJSON = base64.b64encode(
    json.dumps(
        {"auths": {"ghcr.io": {"username": "bob", "password": _random(24), "auth": "Ym9iOng="}}},
        separators=(",", ":"),
    ).encode()
).decode()
NPM_PASSWORD = base64.b64encode(_random(16).encode()).decode()
WRAPPED = (
    "$ kubectl config view --raw\nusers:\n- name: admin\n  user:\n"
    f"    client-certificate-data: {CERTIFICATE}\n    client-key-data: {CLIENT_KEY}\n"
    f"$ cat ~/.docker/config.json\n{DOCKER_CONFIG}\n"
    f"$ kubectl get secret regcred -o yaml\ndata:\n  .dockerconfigjson: {DOCKERCONFIGJSON}\n"
    f"$ cat .npmrc\n//registry.example.com/:username=ci\n"
    f"//registry.example.com/:_password={NPM_PASSWORD}\n"
)
WRAPPED_SECRETS = {
    CLIENT_KEY: "base64_private_key",
    ECR_AUTH: "docker_config_auth",
    DOCKERCONFIGJSON: "docker_config_base64",
    NPM_PASSWORD: "npm_legacy_password",
}


def sent_text(upstream: FakeUpstream) -> str:
    [sent] = upstream.requests
    content: str = sent.json["messages"][2]["content"][0]["content"]
    return content


def expected(text: str, secrets: dict[str, str]) -> str:
    for secret, kind in secrets.items():
        text = text.replace(secret, f"[REDACTED:{kind}]")
    return text


@both
def test_env_netrc_and_pgpass_lines_reach_the_upstream_redacted(
    make_gateway: GatewayFactory, upstream: FakeUpstream, streaming: bool
) -> None:
    upstream.rules = api_rules
    ask(sdk(make_gateway(policy_config=CHAIN)), streaming, **tool_result(FILES))
    text = sent_text(upstream)
    assert text == expected(FILES, FILE_SECRETS)
    assert "DB_PASS=[REDACTED:generic_password]" in text
    assert "machine api.heroku.com\n  login bob\n" in text
    assert not any(secret.encode() in upstream.requests[0].body for secret in FILE_SECRETS)


@both
def test_base64_wrapped_credentials_reach_the_upstream_redacted(
    make_gateway: GatewayFactory, upstream: FakeUpstream, streaming: bool
) -> None:
    upstream.rules = api_rules
    ask(sdk(make_gateway(policy_config=CHAIN)), streaming, **tool_result(WRAPPED))
    text = sent_text(upstream)
    assert text == expected(WRAPPED, WRAPPED_SECRETS)
    assert f"client-certificate-data: {CERTIFICATE}\n" in text
    assert len(ECR_AUTH) > 2000
    assert not any(secret.encode() in upstream.requests[0].body for secret in WRAPPED_SECRETS)
