"""Secrets and near-misses generated from each family's documented format, never from a rule.

Each family is described here as its provider documents it (prefix, random part's alphabet and
length, built-in checksum), independently of the detector's patterns: a sample is random text
of that format, checksum-valid where the provider has a checksum, so a test that runs the rules
over these holds the rules to the formats, not to themselves. Each sample is then placed as an
agent sends it (`placed`): a .env line, a YAML and a JSON config file, a shell session
(`export`, `curl -H`), a JSON tool result.

Near-misses (`near_misses`) are what a rule must not take: a family's format with the random
part too short, filled with placeholders or carrying a wrong checksum, and text every clean
corpus has (git hashes, UUIDs, base64 image data, template references).
"""

from __future__ import annotations

import base64
import json
import random
import string
import uuid
import zlib
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from urllib.parse import quote

A62 = string.ascii_letters + string.digits
B64URL = A62 + "-_"
HEX = "0123456789abcdef"
DIGITS = string.digits
UPPER = string.ascii_uppercase + string.digits
LOWER = string.ascii_lowercase + string.digits
LETTERS = string.ascii_letters
BECH32 = "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L"


@dataclass(frozen=True)
class Random:
    """A run of `alphabet`, `low` to `high` characters long, as the provider issues it."""

    alphabet: str
    low: int
    high: int = 0

    def draw(self, rng: random.Random, length: int | None = None) -> str:
        size = length if length is not None else rng.randint(self.low, self.high or self.low)
        return "".join(rng.choice(self.alphabet) for _ in range(size))


Part = str | Random


def _base62(number: int) -> str:
    digits = string.digits + string.ascii_uppercase + string.ascii_lowercase
    out = ""
    while number:
        number, digit = divmod(number, 62)
        out = digits[digit] + out
    return out.rjust(6, "0")


def crc_suffixed(token: str) -> str:
    """GitHub's token format (npm's too): the random part followed by its CRC32 in base62."""
    prefix, _, body = token.partition("_")
    return f"{prefix}_{body}{_base62(zlib.crc32(body.encode()))}"


def _base36(number: int, width: int) -> str:
    digits = ""
    while number:
        number, digit = divmod(number, 36)
        digits = (string.digits + string.ascii_lowercase)[digit] + digits
    return digits.rjust(width, "0")


def gitlab_routable(token: str) -> str:
    """GitLab's routable token (lib/authn/token_field/generator/routable_token.rb): the drawn
    16 random characters stand for the random bytes; a routing payload (cell, organization,
    user ids in base 36) and its length byte follow; base64url without padding, `.01.`, the
    base64's length in two base-36 digits, then the CRC32 of all that in seven."""
    prefix, _, random_part = token.partition("-")
    routing = "c:1\no:2s\nu:3f9a"
    raw = random_part.encode() + routing.encode() + bytes([len(routing)])
    encoded = base64.urlsafe_b64encode(raw).decode().rstrip("=")
    head = f"{prefix}-{encoded}.01.{_base36(len(encoded), 2)}"
    return head + _base36(zlib.crc32(head.encode()), 7)


def atlassian_crc(token: str) -> str:
    """An Atlassian API token's last eight characters: the CRC32 of the rest, upper-case hex."""
    return f"{token}{zlib.crc32(token.encode()):08X}"


@dataclass(frozen=True)
class Family:
    """A token family: its parts in order; `label` names it in config (upper-cased for .env)."""

    kind: str
    parts: tuple[Part, ...]
    label: str = ""
    labelled: bool = False
    """Found only under a label naming the provider (unprefixed keys)."""
    finish: Callable[[str], str] | None = None
    """Completes a drawn token (appends a checksum)."""
    url: bool = False
    """The first part is a URL whose host is not secret; the rest of the URL is."""

    @property
    def env_name(self) -> str:
        return (self.label or self.kind).upper()

    def draw(self, rng: random.Random, lengths: dict[int, int] | None = None) -> str:
        lengths = lengths or {}
        text = "".join(
            part if isinstance(part, str) else part.draw(rng, lengths.get(index))
            for index, part in enumerate(self.parts)
        )
        return self.finish(text) if self.finish else text


def R(alphabet: str, low: int, high: int = 0) -> Random:
    return Random(alphabet, low, high)


def _uuid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


_UUID = R(HEX, 8), "-", R(HEX, 4), "-", R(HEX, 4), "-", R(HEX, 4), "-", R(HEX, 12)

FAMILIES: tuple[Family, ...] = (
    # ai
    Family("openai_api_key", ("sk-", R(A62, 20), "T3BlbkFJ", R(A62, 20))),
    Family("openai_api_key", ("sk-proj-", R(B64URL, 20, 160), "T3BlbkFJ", R(B64URL, 20, 160))),
    Family("openrouter_api_key", ("sk-or-v1-", R(HEX, 64))),
    Family("huggingface_token", ("hf_", R(LETTERS, 34)), "hf_token"),
    Family("huggingface_org_token", ("api_org_", R(LETTERS, 34))),
    Family("replicate_api_token", ("r8_", R(A62, 37))),
    Family("groq_api_key", ("gsk_", R(A62, 52))),
    Family("perplexity_api_key", ("pplx-", R(A62, 48))),
    Family("xai_api_key", ("xai-", R(A62, 80))),
    Family("langsmith_api_key", ("lsv2_pt_", R(HEX, 32), "_", R(HEX, 10))),
    Family("langfuse_secret_key", ("sk-lf-", *_UUID)),
    Family("elevenlabs_api_key", ("sk_", R(HEX, 48))),
    Family("cohere_api_key", (R(A62, 40),), "co_api_key", labelled=True),
    Family("mistral_api_key", (R(A62, 32),), "mistral_api_key", labelled=True),
    Family("wandb_api_key", (R(HEX, 40),), "wandb_api_key", labelled=True),
    # vcs
    Family("gitlab_personal_access_token", ("glpat-", R(B64URL, 20))),
    Family("gitlab_personal_access_token", ("glpat-", R(A62, 16)), finish=gitlab_routable),
    Family("gitlab_deploy_token", ("gldt-", R(B64URL, 20))),
    Family("gitlab_deploy_token", ("gldt-", R(A62, 16)), finish=gitlab_routable),
    Family("gitlab_pipeline_trigger_token", ("glptt-", R(HEX, 40))),
    Family("gitlab_runner_token", ("glrt-", R(B64URL, 20))),
    Family("gitlab_runner_token", ("glrt-", R(A62, 16)), finish=gitlab_routable),
    Family("gitlab_runner_token", ("glrtr-", R(B64URL, 20))),
    Family("gitlab_runner_registration_token", ("GR1348941", R(B64URL, 20))),
    Family("gitlab_oauth_app_secret", ("gloas-", R(HEX, 64))),
    Family("gitlab_ci_job_token", ("glcbt-", R(B64URL, 20, 40))),
    Family("gitlab_incoming_email_token", ("glimt-", R(B64URL, 25))),
    Family("gitlab_feed_token", ("glft-", R(B64URL, 20))),
    Family("gitlab_scim_token", ("glsoat-", R(B64URL, 20))),
    Family("gitlab_feature_flags_token", ("glffct-", R(B64URL, 20))),
    Family("gitlab_agent_token", ("glagent-", R(B64URL, 50))),
    Family("gitlab_workspace_token", ("glwt-", R(B64URL, 20))),
    Family("atlassian_api_token", ("ATATT3xFfGF0", R(B64URL, 171), "="), finish=atlassian_crc),
    Family("bitbucket_app_password", ("ATBB", R(A62, 32))),
    # cloud
    Family("google_api_key", ("AIza", R(B64URL, 35))),
    Family("google_oauth_client_secret", ("GOCSPX-", R(B64URL, 28))),
    Family("google_oauth_access_token", ("ya29.", R(B64URL, 30, 400))),
    Family("azure_ad_client_secret", (R(A62, 3), R(DIGITS, 1), "Q~", R(A62 + "_~.-", 31, 34))),
    Family(
        "azure_devops_pat",
        (R(A62, 52), "JQQJ99", R(A62, 1), R("ABCDEFGHIJKL", 1), R(A62, 12), "AAAAAZDO", R(A62, 4)),
    ),
    Family("digitalocean_personal_access_token", ("dop_v1_", R(HEX, 64))),
    Family("digitalocean_oauth_token", ("doo_v1_", R(HEX, 64))),
    Family("digitalocean_refresh_token", ("dor_v1_", R(HEX, 64))),
    Family("alibaba_access_key_id", ("LTAI", R(A62, 12, 20))),
    Family("tencent_cloud_secret_id", ("AKID", R(A62, 32))),
    Family("heroku_api_key", ("HRKU-AA", R(B64URL, 58))),
    Family("cloudflare_origin_ca_key", ("v1.0-", R(HEX, 24), "-", R(HEX, 146))),
    Family("cloudflare_api_token", (R(B64URL, 40),), "cloudflare_api_token", labelled=True),
    Family("flyio_access_token", ("fo1_", R(B64URL, 43))),
    Family("netlify_access_token", ("nfp_", R(A62, 36))),
    Family("netlify_access_token", ("nfc_", R(A62, 36))),
    Family("openshift_user_token", ("sha256~", R(B64URL, 43))),
    Family("vault_token", ("hvs.", R(B64URL, 90, 100))),
    Family("vault_token", ("hvr.", R(B64URL, 90, 100))),
    Family("vault_batch_token", ("hvb.", R(B64URL, 138, 200))),
    Family("vault_legacy_token", ("s.", R(A62, 24)), "vault_token", labelled=True),
    Family(
        "vault_legacy_token", ("s.", R(A62, 24), ".", R(A62, 4, 5)), "vault_token", labelled=True
    ),
    Family("vault_legacy_token", ("r.", R(A62, 24)), "vault_token", labelled=True),
    Family("vault_legacy_token", ("b.AAAAAQ", R(B64URL, 100, 200)), "vault_token", labelled=True),
    Family("terraform_cloud_token", (R(A62, 14), ".atlasv1.", R(B64URL, 60, 70))),
    Family("pulumi_access_token", ("pul-", R(HEX, 40))),
    Family("doppler_token", ("dp.pt.", R(A62, 40, 44))),
    Family("doppler_token", ("dp.st.", R(A62, 40, 44))),
    Family("aws_session_token", ("FwoGZXIvYXdzE", R(A62 + "/+", 300)), labelled=True),
    Family("amazon_mws_auth_token", ("amzn.mws.", *_UUID)),
    # messaging
    Family("slack_bot_token", ("xoxb-", R(DIGITS, 12), "-", R(DIGITS, 13), "-", R(A62, 24))),
    Family(
        "slack_user_token",
        ("xoxp-", R(DIGITS, 12), "-", R(DIGITS, 12), "-", R(DIGITS, 13), "-", R(HEX, 32)),
    ),
    Family("slack_app_token", ("xapp-1-", R(UPPER, 11), "-", R(DIGITS, 13), "-", R(HEX, 64))),
    Family("slack_config_token", ("xoxe.xoxp-1-", R(A62, 160, 170))),
    Family("slack_refresh_token", ("xoxe-1-", R(A62, 140, 150))),
    Family("slack_legacy_token", ("xoxs-", R(DIGITS, 12), "-", R(A62, 20, 80))),
    Family(
        "slack_session_token",
        ("xoxc-", R(DIGITS, 12), "-", R(DIGITS, 12), "-", R(DIGITS, 13), "-", R(HEX, 64)),
    ),
    Family(
        "slack_webhook_url",
        (
            "https://hooks.slack.com/services/",
            "T",
            R(UPPER, 10),
            "/B",
            R(UPPER, 10),
            "/",
            R(A62, 24),
        ),
        url=True,
    ),
    Family(
        "slack_webhook_url",
        (
            "https://hooks.slack.com/workflows/",
            "T",
            R(UPPER, 10),
            "/A",
            R(UPPER, 10),
            "/",
            R(DIGITS, 18),
            "/",
            R(A62, 24),
        ),
        url=True,
    ),
    Family(
        "microsoft_teams_webhook_url",
        (
            "https://contoso.webhook.office.com/webhookb2/",
            *_UUID,
            "@",
            *_UUID,
            "/IncomingWebhook/",
            R(HEX, 32),
            "/",
            *_UUID,
        ),
        url=True,
    ),
    Family(
        "discord_webhook_url",
        ("https://discord.com/api/webhooks/", R(DIGITS, 19), "/", R(B64URL, 60, 68)),
        url=True,
    ),
    Family("discord_bot_token", ("M", R(A62, 23, 25), ".", R(B64URL, 6), ".", R(B64URL, 27, 38))),
    Family("telegram_bot_token", (R(DIGITS, 10), ":AA", R(B64URL, 33))),
    Family("twilio_api_key", ("SK", R(HEX, 32))),
    Family("twilio_auth_token", (R(HEX, 32),), "twilio_auth_token", labelled=True),
    Family("sendgrid_api_key", ("SG.", R(B64URL, 22), ".", R(B64URL, 43))),
    Family("mailgun_api_key", ("key-", R(HEX, 32))),
    Family("mailchimp_api_key", (R(HEX, 32), "-us", R(DIGITS, 2))),
    Family("brevo_api_key", ("xkeysib-", R(HEX, 64), "-", R(A62, 16))),
    Family("brevo_smtp_key", ("xsmtpsib-", R(HEX, 64), "-", R(A62, 16))),
    # payments
    Family("stripe_secret_key", ("sk_live_", R(A62, 24, 99))),
    Family("stripe_secret_key", ("sk_test_", R(A62, 24))),
    Family("stripe_restricted_key", ("rk_live_", R(A62, 24, 99))),
    Family("stripe_webhook_secret", ("whsec_", R(A62, 32))),
    Family("square_access_token", ("EAAA", R(B64URL, 60))),
    Family("square_oauth_secret", ("sq0csp-", R(B64URL, 43))),
    Family(
        "braintree_access_token",
        ("access_token$production$", R(LOWER, 16), "$", R(HEX, 32)),
    ),
    Family("shopify_access_token", ("shpat_", R(HEX, 32))),
    Family("shopify_custom_app_token", ("shpca_", R(HEX, 32))),
    Family("shopify_private_app_token", ("shppa_", R(HEX, 32))),
    Family("shopify_shared_secret", ("shpss_", R(HEX, 32))),
    Family("plaid_access_token", ("access-production-", *_UUID)),
    Family("flutterwave_secret_key", ("FLWSECK-", R(HEX, 32), "-X")),
    Family("easypost_api_key", ("EZAK", R(A62, 54))),
    Family("shippo_api_token", ("shippo_live_", R(HEX, 40))),
    Family("duffel_api_token", ("duffel_live_", R(B64URL, 43))),
    # devtools
    Family("npm_access_token", ("npm_", R(A62, 30)), finish=crc_suffixed),
    Family("pypi_api_token", ("pypi-AgEIcHlwaS5vcmc", R(B64URL, 70, 400))),
    Family("pypi_test_api_token", ("pypi-AgENdGVzdC5weXBpLm9yZw", R(B64URL, 70, 200))),
    Family("rubygems_api_key", ("rubygems_", R(HEX, 48))),
    Family("clojars_api_token", ("CLOJARS_", R(LOWER, 60))),
    Family("nuget_api_key", ("oy2", R(LOWER, 43))),
    Family("docker_hub_token", ("dckr_pat_", R(B64URL, 27))),
    Family("jfrog_api_key", ("AKCp", R(A62, 69))),
    Family("jfrog_reference_token", ("cmVmdGtuOjAxOj", R(A62, 50))),
    Family("postman_api_key", ("PMAK-", R(HEX, 24), "-", R(HEX, 34))),
    Family("sonarqube_token", ("squ_", R(HEX, 40))),
    Family("circleci_personal_token", ("CCIPAT_", R(A62, 22), "_", R(HEX, 40))),
    Family("buildkite_api_token", ("bkua_", R(HEX, 40))),
    Family("prefect_api_key", ("pnu_", R(A62, 36))),
    Family("readme_api_key", ("rdme_", R(LOWER, 70))),
    Family("launchdarkly_access_token", ("api-", *_UUID)),
    Family("launchdarkly_sdk_key", ("sdk-", *_UUID)),
    Family("linear_api_key", ("lin_api_", R(A62, 40))),
    Family("airtable_personal_access_token", ("pat", R(A62, 14), ".", R(HEX, 64))),
    Family("typeform_api_token", ("tfp_", R(B64URL, 59))),
    Family("figma_access_token", ("figd_", R(B64URL, 40))),
    Family("contentful_access_token", ("CFPAT-", R(B64URL, 43))),
    Family("hubspot_private_app_token", ("pat-na1-", *_UUID)),
    Family("notion_integration_token", ("ntn_", R(DIGITS, 11), R(A62, 35))),
    Family("notion_integration_token", ("secret_", R(A62, 43))),
    Family(
        "asana_personal_access_token", ("2/", R(DIGITS, 16), "/", R(DIGITS, 16), ":", R(HEX, 32))
    ),
    Family("mapbox_secret_token", ("sk.eyJ1Ijoi", R(B64URL, 50, 90), ".", R(B64URL, 22))),
    Family("onepassword_service_account_token", ("ops_eyJ", R(A62 + "+/", 250, 1200))),
    Family(
        "onepassword_secret_key",
        (
            "A3-",
            R(UPPER, 6),
            "-",
            R(UPPER, 11),
            "-",
            R(UPPER, 5),
            "-",
            R(UPPER, 5),
            "-",
            R(UPPER, 5),
        ),
    ),
    Family("databricks_token", ("dapi", R(HEX, 32))),
    Family("okta_api_token", ("00", R(B64URL, 40)), "okta_api_token", labelled=True),
    Family("dynatrace_api_token", ("dt0c01.", R(UPPER, 24), ".", R(UPPER, 64))),
    Family("newrelic_user_api_key", ("NRAK-", R(UPPER, 27))),
    Family("newrelic_insert_key", ("NRII-", R(B64URL, 32))),
    Family("datadog_api_key", (R(HEX, 32),), "dd_api_key", labelled=True),
    Family("grafana_cloud_api_token", ("glc_", R(A62, 32, 400))),
    Family("grafana_service_account_token", ("glsa_", R(A62, 32), "_", R(HEX, 8))),
    Family("sentry_org_token", ("sntrys_eyJ", R(A62, 60, 400))),
    Family("sentry_user_token", ("sntryu_", R(HEX, 64))),
    # databases
    Family("planetscale_token", ("pscale_tkn_", R(B64URL, 43))),
    Family("planetscale_password", ("pscale_pw_", R(B64URL, 43))),
    Family("planetscale_oauth_token", ("pscale_oauth_", R(B64URL, 32, 64))),
    Family("supabase_access_token", ("sbp_", R(HEX, 40))),
    Family("supabase_secret_key", ("sb_secret_", R(B64URL, 31))),
    Family("clickhouse_cloud_api_secret", ("4b1d", R(A62, 38))),
    # keys
    Family("age_secret_key", ("AGE-SECRET-KEY-1", R(BECH32, 58))),
    # core kinds (their rules live in rules/core.py)
    Family("anthropic_api_key", ("sk-ant-api03-", R(B64URL, 93), "AA")),
    Family("aws_access_key_id", ("AKIA", R(UPPER, 16))),
    Family("aws_access_key_id", ("ABIA", R(UPPER, 16))),
    Family("aws_secret_access_key", (R(A62 + "/+", 40),), "aws_secret_access_key", labelled=True),
    Family("github_token", ("ghp_", R(A62, 30)), finish=crc_suffixed),
    Family("github_token", ("github_pat_", R(A62, 22), "_", R(A62, 59))),
)


@dataclass(frozen=True)
class Sample:
    """Text a rule of `kind` must find, and the `secrets` in it each finding must cover."""

    kind: str
    context: str
    text: str
    secrets: tuple[str, ...]


@dataclass(frozen=True)
class Value:
    """A credential as written in a file (`value`) and the part of it that is secret."""

    kind: str
    value: str
    secret: str
    label: str
    labelled: bool = True
    document: bool = False
    more: tuple[str, ...] = ()
    """Further secrets in the same value (a Kubernetes Secret's every entry)."""

    @property
    def secrets(self) -> tuple[str, ...]:
        return (self.secret, *self.more)


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _luhn_complete(partial: str) -> str:
    total = 0
    for position, char in enumerate(reversed(partial)):
        digit = int(char)
        if position % 2 == 0:
            digit *= 2
            digit -= 9 if digit > 9 else 0
        total += digit
    return partial + str((10 - total % 10) % 10)


def _iban(country: str, bban: str) -> str:
    numeric = "".join(str(int(c, 36)) for c in bban + country + "00")
    return f"{country}{98 - int(numeric) % 97:02d}{bban}"


def _password(rng: random.Random, length: int) -> str:
    """A generated password: letters, digits and the punctuation password managers use."""
    pool = A62 + "!#%*+-_.@"
    return (
        rng.choice(LETTERS)
        + rng.choice(DIGITS)
        + "".join(rng.choice(pool) for _ in range(length - 2))
    )


def _kubernetes(rng: random.Random, kubectl_order: bool) -> Value:
    values = [base64.b64encode(Random(A62, 16, 24).draw(rng).encode()).decode() for _ in range(2)]
    data = f"data:\n  password: {values[0]}\n  api-token: {values[1]}\n"
    head = "apiVersion: v1\n"
    tail = "metadata:\n  name: billing-db\n  namespace: prod\ntype: Opaque\n"
    doc = (
        f"{head}{data}kind: Secret\n{tail}"
        if kubectl_order
        else f"{head}kind: Secret\n{tail}{data}"
    )
    return Value("kubernetes_secret", doc, values[0], "", document=True, more=(values[1],))


def _putty(rng: random.Random) -> Value:
    private = "\n".join(Random(A62 + "+/", 64).draw(rng) for _ in range(14))
    doc = (
        "PuTTY-User-Key-File-3: ssh-rsa\nEncryption: none\nComment: deploy@ci\n"
        f"Public-Lines: 2\n{Random(A62, 64).draw(rng)}\n{Random(A62, 40).draw(rng)}\n"
        f"Private-Lines: 14\n{private}\nPrivate-MAC: {Random(HEX, 64).draw(rng)}\n"
    )
    return Value("putty_private_key", doc, private.split("\n")[0], "", document=True)


def _service_account(rng: random.Random) -> Value:
    key_id = Random(HEX, 40).draw(rng)
    doc = json.dumps(
        {
            "type": "service_account",
            "project_id": "billing-prod",
            "private_key_id": key_id,
            "client_id": Random(DIGITS, 21).draw(rng),
            "token_uri": "https://oauth2.googleapis.com/token",
        },
        indent=2,
    )
    return Value("gcp_service_account_key", doc, key_id, "", document=True)


COMMAND_LINES = (
    ("cli_password_flag", "docker login -u deploy --password {} registry.example.com", "login"),
    ("cli_password_flag", "mysqldump --user=backup --password={} billing", "backup_command"),
    # MySQL's short option takes its password attached: `-p<password>`.
    ("cli_password_short_flag", "mysql -h db.internal -u app -p{} billing", "db_command"),
    ("cli_password_short_flag", "podman login -u deploy -p {} registry.example.com", "login"),
    ("cli_password_short_flag", "sshpass -p {} ssh -p 2222 bastion.internal uptime", "ssh"),
    ("cli_password_short_flag", "redis-cli -h cache.internal -p 6379 -a {} ping", "cache"),
    # The shell's operators end an unquoted word; a newline is one escaped in a JSON tool result.
    ("cli_password_short_flag", "mysql -uroot -p{}<schema.sql", "db_restore"),
    ("cli_password_short_flag", "cd /srv/backups\nmysqldump -uroot -p{}|gzip>b.sql.gz", "backup"),
    # An argument list, on one line or one item a line, and a YAML list of arguments.
    ("cli_password_short_flag", '["mysql", "-h", "db.internal", "-uroot", "-p{}", "app"]', "argv"),
    ("cli_password_flag", '[\n  "pg_dump",\n  "--password",\n  "{}"\n]', "argv_lines"),
    ("cli_password_flag", "args:\n  - --password\n  - {}\n  - --verbose\n", "yaml_args"),
    ("cli_password_flag", "./deploy.sh --pass {} --env prod", "deploy"),
    ("cli_password_flag", "./deploy.sh --pwd={} --env prod", "deploy"),
    ("cli_password_short_flag", "oc login -u developer -p {} https://api.crc.testing:6443", "oc"),
    ("cli_password_short_flag", "helm registry login ghcr.io -u bob -p {}", "helm"),
    ("cli_password_short_flag", "skopeo login -u bob -p {} quay.io", "skopeo"),
    ("cli_password_short_flag", "cf login -a https://api.cf.example.com -u bob -p {}", "cf"),
    (
        "cli_password_short_flag",
        "az login --service-principal -u 3f1c2a4e-0b6d-4c1e-9a7f-2d5b8e6c1a90 -p {} --tenant t1",
        "az",
    ),
    ("cli_password_short_flag", 'mongosh "mongodb://db.internal:27017" -u admin -p {}', "mongo"),
)
"""Commands that take a password as an option, written as each command's manual has it."""


def _command_lines(rng: random.Random) -> Iterator[Value]:
    """Passwords and tokens given on a command line."""
    for kind, command, label in COMMAND_LINES:
        # `%s` in a value is a format's placeholder, never taken (validators._TEMPLATE_MARKS).
        password = _password(rng, 16).replace("@", "!").replace("%", "!")
        yield Value(kind, command.format(password), password, label)
    # Quoted, a password may hold spaces.
    spaced = f"{_password(rng, 8)} {_password(rng, 8)}".replace("@", "!")
    login = f"docker login -u deploy --password '{spaced}' registry.example.com"
    yield Value("cli_password_flag", login, spaced, "login_quoted")
    ssh = f'sshpass -p "{spaced}" ssh bastion.internal uptime'
    yield Value("cli_password_short_flag", ssh, spaced, "ssh_quoted")
    token = "s." + Random(A62, 24).draw(rng)
    yield Value("vault_legacy_token", f"vault login {token}", token, "login_command")
    token = "s." + Random(A62, 24).draw(rng)
    header = (
        f'curl -H "X-Vault-Token: {token}" https://vault.internal:8200/v1/auth/token/lookup-self'
    )
    yield Value("vault_legacy_token", header, token, "vault_request")


SEGMENT_LABELS = (
    ("generic_password", "db_pass"),
    ("generic_password", "smtp_pass"),
    ("generic_password", "redis_pass"),
    ("generic_password", "mysql_pw"),
    ("generic_secret", "encryption_key"),
    ("generic_secret", "master_key"),
    ("generic_secret", "signing_key"),
    ("generic_secret", "private_key"),
    ("generic_secret", "redis_auth"),
)
"""The most common `.env` names of a credential whose word is a short segment (issue 40)."""


def _credential_files(rng: random.Random) -> Iterator[Value]:
    """`.env` names made of segments, ~/.netrc and ~/.pgpass."""
    for kind, label in SEGMENT_LABELS:
        password = _password(rng, 18)
        yield Value(kind, password, password, label)
    password = _password(rng, 16).replace("@", "!")
    netrc = (
        "machine api.heroku.com\n  login bob\n  password "
        f"{password}\nmachine git.heroku.com login bob password {password}\n"
    )
    yield Value("netrc_password", netrc, password, "", document=True)
    first, second = _password(rng, 16), _password(rng, 20)
    pgpass = f"db.internal:5432:billing:app_user:{first}\n*:*:*:replicator:{second}\n"
    yield Value("pgpass_password", pgpass, first, "", document=True, more=(second,))


def _bedrock(rng: random.Random) -> Iterator[Value]:
    """Amazon Bedrock API keys: long-term `ABSK` + base64 of `BedrockAPIKey-<id>-at-<account>:
    <secret>`; short-term `bedrock-api-key-` + base64 of a presigned URL on bedrock's host."""
    account = Random(DIGITS, 12).draw(rng)
    long_term = (
        f"BedrockAPIKey-{Random(LOWER, 4).draw(rng)}-at-{account}:{Random(A62, 40).draw(rng)}"
    )
    key = "ABSK" + base64.b64encode(long_term.encode()).decode()
    yield Value("aws_bedrock_api_key", key, key, "aws_bearer_token_bedrock", labelled=False)
    presigned = (
        "bedrock.amazonaws.com/?Action=CallWithBearerToken&X-Amz-Algorithm=AWS4-HMAC-SHA256"
        f"&X-Amz-Credential=ASIA{Random(UPPER, 16).draw(rng)}%2F20250701%2Fus-east-1%2Fbedrock"
        f"%2Faws4_request&X-Amz-Date=20250701T120000Z&X-Amz-Expires=43200"
        f"&X-Amz-Security-Token={quote(Random(A62 + '+/', 600).draw(rng), safe='')}"
        f"&X-Amz-Signature={Random(HEX, 64).draw(rng)}&X-Amz-SignedHeaders=host&Version=1"
    )
    key = "bedrock-api-key-" + base64.b64encode(presigned.encode()).decode()
    yield Value("aws_bedrock_api_key", key, key, "aws_bearer_token_bedrock", labelled=False)


def _vault_table(rng: random.Random) -> Value:
    """What `vault login` prints for a pre-1.10 server."""
    token = "s." + Random(A62, 24).draw(rng)
    table = (
        "Success! You are now authenticated.\n\nKey                  Value\n"
        "---                  -----\n"
        f"token                {token}\ntoken_accessor       {Random(A62, 24).draw(rng)}\n"
        'token_duration       768h\ntoken_renewable      true\ntoken_policies       ["default"]\n'
    )
    return Value("vault_legacy_token", table, token, "", document=True)


def _basic(rng: random.Random, user: str) -> str:
    return base64.b64encode(f"{user}:{_password(rng, 18)}".encode()).decode()


def _registry_auths(rng: random.Random) -> Iterator[Value]:
    """Docker's config.json `auth` and .npmrc's `_auth`: base64 of `user:password`."""
    auth = _basic(rng, "deploy")
    config = json.dumps({"auths": {"registry.example.com": {"auth": auth}}}, separators=(",", ":"))
    yield Value("docker_config_auth", config, auth, "docker_auth_config")
    hub, ghcr = _basic(rng, "bob"), _basic(rng, "bob-ci")
    pretty = {
        "auths": {"https://index.docker.io/v1/": {"auth": hub}, "ghcr.io": {"auth": ghcr}},
        "credsStore": "",
    }
    doc = json.dumps(pretty, indent="\t") + "\n"
    yield Value("docker_config_auth", doc, hub, "", document=True, more=(ghcr,))
    auth = _basic(rng, "deploy")
    line = f"//registry.example.com/:_auth={auth}"
    yield Value("npm_legacy_auth", line, auth, "npmrc_line")
    auth = _basic(rng, "ci")
    npmrc = (
        "registry=https://registry.example.com/\n"
        f"//registry.example.com/:_auth = {auth}\n"
        "//registry.example.com/:always-auth=true\n"
    )
    yield Value("npm_legacy_auth", npmrc, auth, "", document=True)
    yield from _wrapped_in_base64(rng)


def _ecr_password(rng: random.Random) -> str:
    """What `aws ecr get-login-password` prints: base64 of a JSON envelope (payload, data key,
    version, type, expiration) of about 2,000 characters."""
    envelope = {
        "payload": Random(A62 + "+/", 1100).draw(rng),
        "datakey": Random(A62 + "+/", 400).draw(rng),
        "version": "2",
        "type": "DATA_KEY",
        "expiration": rng.randint(1_700_000_000, 1_800_000_000),
    }
    return base64.b64encode(json.dumps(envelope).encode()).decode()


def _pem(rng: random.Random, title: str, lines: int) -> str:
    body = "\n".join(Random(A62 + "+/", 64).draw(rng) for _ in range(lines))
    return f"-----BEGIN {title}-----\n{body}\n-----END {title}-----\n"


def _wrapped_in_base64(rng: random.Random) -> Iterator[Value]:
    """Credentials inside base64 (issue 40, item 5): a kubeconfig's `client-key-data`, a key
    as `base64` wraps it, an ECR login in a Docker config, a `.dockerconfigjson`, a Python
    dict's repr of a registry entry, npm's `_password`."""
    b64 = base64.b64encode
    key = b64(_pem(rng, "RSA PRIVATE KEY", 25).encode()).decode()
    certificate = b64(_pem(rng, "CERTIFICATE", 18).encode()).decode()
    kubeconfig = (
        "apiVersion: v1\nclusters:\n- cluster:\n"
        f"    certificate-authority-data: {certificate}\n    server: https://10.0.0.1:6443\n"
        "  name: prod\nusers:\n- name: admin\n  user:\n"
        f"    client-certificate-data: {certificate}\n    client-key-data: {key}\n"
    )
    yield Value("base64_private_key", kubeconfig, key, "", document=True)
    key = b64(_pem(rng, "OPENSSH PRIVATE KEY", 12).encode()).decode()
    wrapped = "\n".join(key[i : i + 76] for i in range(0, len(key), 76))
    lines = tuple(wrapped.split("\n"))
    document = f"$ base64 id_ed25519\n{wrapped}\n"
    yield Value("base64_private_key", document, lines[0], "", document=True, more=lines[1:])
    key = b64(_pem(rng, "EC PRIVATE KEY", 4).encode()).decode()
    yield Value("base64_private_key", key, key, "tls_key_b64", labelled=False)
    ecr = b64(f"AWS:{_ecr_password(rng)}".encode()).decode()
    config = json.dumps({"auths": {"123456789012.dkr.ecr.us-east-1.amazonaws.com": {"auth": ecr}}})
    yield Value("docker_config_auth", config, ecr, "docker_auth_config")
    auth = _basic(rng, "deploy")
    yield Value("docker_config_auth", repr({"auth": auth, "email": ""}), auth, "registry_entry")
    config = json.dumps(
        {
            "auths": {
                "ghcr.io": {
                    "username": "bob",
                    "password": _password(rng, 20),
                    "auth": _basic(rng, "bob"),
                }
            }
        },
        separators=(",", ":"),
    )
    encoded = b64(config.encode()).decode()
    yield Value("docker_config_base64", encoded, encoded, "dockerconfigjson", labelled=False)
    password = b64(_password(rng, 16).encode()).decode()
    line = f"//registry.example.com/:username=ci\n//registry.example.com/:_password={password}\n"
    yield Value("npm_legacy_password", line, password, "npmrc_password")


def _specials(rng: random.Random) -> Iterator[Value]:
    """Families whose secret sits inside a larger value or document."""
    header = _b64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    claims = _b64url(json.dumps({"sub": _uuid(rng), "iat": rng.randint(10**9, 2 * 10**9)}).encode())
    jwt = f"{header}.{claims}.{_b64url(rng.randbytes(32))}"
    yield Value("jwt", jwt, jwt, "session_jwt", labelled=False)
    sig = quote(base64.b64encode(rng.randbytes(32)).decode(), safe="")
    sas = f"https://acct.blob.core.windows.net/c/b.txt?sv=2022-11-02&sp=r&se=2030-01-01&sig={sig}"
    yield Value("azure_sas_token", sas, sig, "blob_url", labelled=False)
    account_key = base64.b64encode(rng.randbytes(64)).decode()
    yield Value(
        "azure_storage_account_key",
        f"DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={account_key};EndpointSuffix=core.windows.net",
        account_key,
        "storage_connection_string",
        labelled=False,
    )
    shared = base64.b64encode(rng.randbytes(32)).decode()
    yield Value(
        "azure_shared_access_key",
        f"Endpoint=sb://bus.servicebus.windows.net/;SharedAccessKeyName=root;SharedAccessKey={shared}",
        shared,
        "servicebus_connection",
        labelled=False,
    )
    password = _password(rng, 20)
    yield Value("generic_password", password, password, "db_password")
    yield from _credential_files(rng)
    yield from _bedrock(rng)
    yield _vault_table(rng)
    client_secret = Random(A62, 32).draw(rng)
    yield Value("generic_secret", client_secret, client_secret, "oauth_client_secret")
    url_password = quote(_password(rng, 18), safe="-_.~")  # RFC 3986 userinfo
    yield Value(
        "url_password",
        f"postgres://app_user:{url_password}@db.internal:5432/billing",
        url_password,
        "database_url",
        labelled=False,
    )
    curl_password = _password(rng, 16).replace("@", "!")
    yield Value(
        "curl_basic_auth",
        f"curl -sS -u deploy:{curl_password} https://ci.internal/api/builds",
        curl_password,
        "deploy_command",
    )
    basic = base64.b64encode(f"svc-billing:{_password(rng, 18)}".encode()).decode()
    yield Value("basic_auth_header", f"Basic {basic}", basic, "authorization")
    yield from _command_lines(rng)
    yield from _registry_auths(rng)
    yield _kubernetes(rng, kubectl_order=False)
    yield _kubernetes(rng, kubectl_order=True)
    yield _putty(rng)
    yield _service_account(rng)
    for title in ("RSA PRIVATE KEY", "OPENSSH PRIVATE KEY", "PGP PRIVATE KEY BLOCK"):
        body = "\n".join(Random(A62 + "+/", 64).draw(rng) for _ in range(6))
        pem = f"-----BEGIN {title}-----\n{body}\n-----END {title}-----\n"
        yield Value("private_key", pem, body.split("\n")[0], "", document=True)
    bearer = Random(A62, 40).draw(rng) + "1"
    yield Value("bearer_token", f"Bearer {bearer}", bearer, "authorization")
    mailbox = ".".join(Random(string.ascii_lowercase, 5).draw(rng) for _ in range(2))
    yield Value(
        "email", f"{mailbox}@corp-mail.net", f"{mailbox}@corp-mail.net", "contact", labelled=False
    )
    yield from _pii(rng)


def _pii(rng: random.Random) -> Iterator[Value]:
    visa = _luhn_complete("4" + Random(DIGITS, 14).draw(rng))
    yield Value("payment_card", visa, visa, "card_number", labelled=False)
    mastercard = _luhn_complete("5" + rng.choice("12345") + Random(DIGITS, 13).draw(rng))
    grouped = " ".join(mastercard[i : i + 4] for i in range(0, 16, 4))
    yield Value("payment_card", grouped, grouped, "card_number", labelled=False)
    amex = _luhn_complete("37" + Random(DIGITS, 12).draw(rng))
    yield Value(
        "payment_card",
        f"{amex[:4]}-{amex[4:10]}-{amex[10:]}",
        f"{amex[:4]}-{amex[4:10]}-{amex[10:]}",
        "card_number",
        labelled=False,
    )
    german = _iban("DE", Random(DIGITS, 18).draw(rng))
    yield Value("iban", german, german, "iban", labelled=False)
    british = _iban(
        "GB", Random(string.ascii_uppercase, 4).draw(rng) + Random(DIGITS, 14).draw(rng)
    )
    spaced = " ".join(british[i : i + 4] for i in range(0, len(british), 4))
    yield Value("iban", spaced, spaced, "iban", labelled=False)
    area = rng.choice([a for a in range(1, 900) if a != 666])
    ssn = f"{area:03d}-{rng.randint(1, 99):02d}-{rng.randint(1, 9999):04d}"
    yield Value("us_ssn", ssn, ssn, "ssn", labelled=False)
    area_code, exchange = rng.randint(200, 999), rng.randint(200, 999)
    nanp = f"+1{area_code}{exchange}{Random(DIGITS, 4).draw(rng)}"
    yield Value("phone", nanp, nanp, "phone", labelled=False)
    london = f"+44 20 7946 {Random(DIGITS, 4).draw(rng)}"
    yield Value("phone", london, london, "phone", labelled=False)


def values(seed: int = 0) -> list[Value]:
    """One credential of every family (two or three where a family has several forms)."""
    rng = random.Random(seed)
    drawn = [
        Value(
            f.kind,
            token,
            token[len(str(f.parts[0])) :] if f.url else token,
            f.label or f.kind,
            labelled=f.labelled,
        )
        for f in FAMILIES
        for token in [f.draw(rng)]
    ]
    return drawn + list(_specials(rng))


def placed(value: Value) -> list[Sample]:
    """The value as an agent sends it: .env, YAML, JSON config, shell session, JSON tool result."""
    secrets = value.secrets
    if value.document:
        return [
            Sample(value.kind, "file", value.value, secrets),
            Sample(value.kind, "shell", f"$ cat secret.yaml\n{value.value}$ echo done\n", secrets),
            Sample(value.kind, "tool_result", f"Read 1 file.\n\n{value.value}\n", secrets),
        ]
    env, key, v = value.label.upper(), value.label.lower(), value.value
    shell = f"$ export {env}='{v}'\n$ ./deploy.sh --check\n"
    if not value.labelled:
        shell += f'$ curl -sS -H "X-Credential: {v}" https://api.internal.test/v1/items\n'
    return [
        Sample(
            value.kind,
            "env",
            f"# service settings\nAPP_ENV=production\n{env}={v}\nLOG_LEVEL=info\n",
            secrets,
        ),
        Sample(
            value.kind,
            "yaml",
            f'service:\n  name: billing\n  {key}: "{v}"\n  port: 8080\n',
            secrets,
        ),
        Sample(
            value.kind,
            "json",
            json.dumps({"service": "billing", key: v, "port": 8080}, indent=2),
            secrets,
        ),
        Sample(value.kind, "shell", shell, secrets),
        Sample(
            value.kind,
            "tool_result",
            json.dumps({"ok": True, "result": {"settings": {key: v}, "count": 3}}),
            secrets,
        ),
    ]


def bare(value: Value) -> list[Sample]:
    """A strict-format value with no label naming it: in log lines, a URL, a JSON value whose
    key names nothing, a YAML list item. (A URL family's value is the URL itself.)"""
    v, secrets = value.value, value.secrets
    url = (
        f"POST {v} HTTP/1.1"
        if v.startswith("https://")
        else f"GET https://api.internal.test/v1/items/{v}?page=2"
    )
    return [
        Sample(value.kind, "log", f"2025-01-07T10:00:00Z [DEBUG] using key={v}\n", secrets),
        Sample(value.kind, "log_dash", f"billing token - '{v}'\nretrying in 2s\n", secrets),
        Sample(value.kind, "url", f"{url}\nHost: api.internal.test\n", secrets),
        Sample(value.kind, "json_value", json.dumps({"id": 7, "data": v, "next": None}), secrets),
        Sample(value.kind, "yaml_list", f"steps:\n  - checkout\n  - {v}\n  - deploy\n", secrets),
    ]


def strict_formats(seed: int = 0) -> list[Value]:
    """The values found by their format alone: no label names them (docs/policies.md's
    catalogue says "no" in its label column)."""
    return [
        value
        for value in values(seed)
        if not value.labelled and not value.document and value.kind not in PERSONAL_DATA
    ]


PERSONAL_DATA = ("payment_card", "iban", "us_ssn", "phone")
"""Opt-in, and no secret: a number in a URL's path is an id there, so not looked for in one."""


def true_positives(seed: int = 0) -> list[Sample]:
    return [sample for value in values(seed) for sample in placed(value)]


# Near-misses ------------------------------------------------------------------------------------


def _neutral(text: str) -> list[str]:
    """Places that name no credential: a commit message, a JSON id, a YAML reference."""
    return [
        f"commit {text} fixed the parser\n",
        json.dumps({"id": text, "state": "merged"}),
        f"ref: {text}\n",
    ]


def _labelled(label: str, text: str) -> list[str]:
    return [
        f"{label.upper()}={text}\n",
        f'{label.lower()}: "{text}"\n',
        json.dumps({label.lower(): text}),
    ]


def _longest_random(family: Family) -> int:
    """The index of the family's longest random part (the last of equals)."""
    runs = [(p.high or p.low, i) for i, p in enumerate(family.parts) if isinstance(p, Random)]
    return max(runs)[1]


def family_near_misses(family: Family, rng: random.Random) -> Iterator[str]:
    """The family's format too short, filled with placeholders, or with a wrong checksum."""
    longest = _longest_random(family)
    part = family.parts[longest]
    assert isinstance(part, Random)
    if not family.labelled:
        yield from _neutral(family.draw(rng, {longest: part.low - 1}))
    placeholder = "".join(p if isinstance(p, str) else "x" * p.low for p in family.parts)
    example = "".join(
        p if isinstance(p, str) else ("EXAMPLE" * p.low)[: p.low] for p in family.parts
    )
    yield from _labelled(family.env_name, placeholder)
    yield from _labelled(family.env_name, example)
    if family.finish:
        good = family.draw(rng)
        wrong = good[:-1] + ("A" if good[-1] != "A" else "B")
        yield from _neutral(wrong)


def _png_base64(rng: random.Random, size: int) -> str:
    return base64.b64encode(b"\x89PNG\r\n\x1a\n" + rng.randbytes(size)).decode()


TEMPLATE_REFERENCES = (
    "${API_TOKEN}",
    "{{ secrets.API_TOKEN }}",
    "{{ .Values.apiToken }}",
    "<your-api-key>",
    "os.environ['API_TOKEN']",
    "process.env.API_TOKEN",
    "changeme",
    "********************",
    "xxxxxxxxxxxxxxxxxxxxxxxx",
    "YOUR_API_KEY_HERE",
    "your-secret-here",
    "EXAMPLEKEY1234567890",
    "None",
    "self.password",
    "get_secret_value()",
    "/run/secrets/db_password",
    "https://vault.internal/v1/secret/data/app",
)


def corpus_near_misses(rng: random.Random) -> Iterator[str]:
    """Text every clean corpus holds: hashes, UUIDs, image data, references to secrets."""
    for _ in range(5):
        yield from _neutral(f"{rng.getrandbits(160):040x}")
        yield from _neutral(_uuid(rng))
    yield json.dumps(
        {"type": "image", "source": {"type": "base64", "data": _png_base64(rng, 3000)}}
    )
    yield f"![chart](data:image/png;base64,{_png_base64(rng, 2000)})"
    for label in ("api_token", "db_password", "client_secret", "API_KEY", "aws_session_token"):
        for reference in TEMPLATE_REFERENCES:
            yield from _labelled(label, reference)
    yield "curl -u $USER:$PASSWORD https://ci.internal/api\n"
    yield "curl -u admin:<password> https://ci.internal/api\n"
    yield "postgres://user:password@localhost:5432/db\n"
    yield "redis://:${REDIS_PASSWORD}@cache:6379/0\n"
    yield "Authorization: Basic authentication is not supported\n"
    yield "phone: +1 (555) 0100, ssn: 000-12-3456, card: 4111 1111 1111 1112\n"
    yield "version 1234-5678-9012-3456 and build 2024-01-1234\n"
    yield "ctx.quantize(Decimal('+35236450.6'), rounding=ROUND_UP)\n"
    yield from _command_near_misses()
    yield from _segment_near_misses()
    yield from _base64_near_misses(rng)


def _segment_near_misses() -> Iterator[str]:
    """A credential word inside another word or not ending the label, and lines shaped like a
    .pgpass line that are not one (compiler and linter output, /etc/passwd)."""
    value = "Xk3v9Lq2Zr8wT5"
    for label in ("bypass", "passenger", "PASSPORT", "compass_dir", "author", "AUTH_TYPE"):
        yield from _labelled(label, value)
    yield "app.py:12:5: E501 line too long (89 > 79 characters)\n"
    yield "main.c:12:5: error: expected ';' before '}' token\n"
    yield "daemon:*:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n"
    yield "root:x:0:0:root:/root:/bin/bash\n"
    yield "DB_PASS=/run/secrets/db_pass\nSMTP_PASS=${SMTP_PASSWORD}\nREDIS_PASS=changeme\n"
    yield "machine api.example.com login bob password ${NETRC_PASSWORD}\n"


def _base64_near_misses(rng: random.Random) -> Iterator[str]:
    """Base64 that holds no credential: a certificate, a Docker config without credentials."""
    certificate = base64.b64encode(_pem(rng, "CERTIFICATE", 10).encode()).decode()
    yield f"    certificate-authority-data: {certificate}\n"
    empty = json.dumps({"auths": {"ghcr.io": {}}, "credsStore": "desktop"}, separators=(",", ":"))
    yield f".dockerconfigjson: {base64.b64encode(empty.encode()).decode()}\n"
    yield "//registry.example.com/:_password=${NPM_PASSWORD}\n"
    yield f"_password={base64.b64encode(b'changeme').decode()}\n"


def _command_near_misses() -> Iterator[str]:
    """Options that are no password: a port, stdin, a prompt, a reference, a help text."""
    yield "docker login -u deploy --password-stdin registry.example.com\n"
    yield 'echo "$CR_PAT" | docker login ghcr.io -u bob --password-stdin\n'
    yield "docker login -u deploy -p $REGISTRY_PASSWORD registry.example.com\n"
    yield "ssh -p 2222 -i ~/.ssh/id_ed25519 bastion.internal\n"
    yield "docker run -d -p 8080:80 -p 8443:443 nginx\n"
    yield "docker run -d --name mysql -p3306:3306 mysql:8\n"
    yield json.dumps({"out": "docker login ghcr.io\ndocker run -p 8080:80 nginx"})
    yield "  --password DB_PASS   the variable that holds it\n"
    yield "connect(user, '--password=self.db_pass')\n"
    yield "vault-agent --password /run/secrets/db_pw2 --config agent.hcl\n"
    yield "mysql -h db -u root -p billing\n"
    yield "mysql -u root -p${MYSQL_ROOT_PASSWORD} billing\n"
    yield 'redis-cli -h cache -p 6379 -a "$REDIS_PASSWORD" ping\n'
    yield "sshpass -p '<password>' ssh -p 2222 bastion.internal\n"
    yield "psql --password --host db.internal billing\n"
    yield "  -p, --password string   Password\n      --password-stdin    Read it from stdin\n"
    yield "Pass the --password flag, or set MYSQL_PWD.\n"
    yield "mysqldump --user=backup --password=changeme billing\n"
    yield 'parser.add_argument("--password", "-p", help="the password")\n'
    yield "//registry.npmjs.org/:_authToken=${NPM_TOKEN}\n"
    yield "_auth=${NPM_AUTH}\n"
    placeholder = base64.b64encode(b"user:password").decode()
    yield f"//registry.example.com/:_auth={placeholder}\n"
    yield json.dumps({"auths": {"registry.example.com": {"auth": placeholder}}}, indent=2)
    yield '{"auth": "${DOCKER_AUTH}", "email": ""}\n'
    yield "return s.substring(0, 24);\n"
    yield "String upper = s.toUpperCase(Locale.ROOT);\n"
    yield "oc login -u developer -p developer https://api.crc.testing:6443\n"
    yield "mongosh --port 27017 --quiet\n"
    yield json.dumps(["ssh", "-p", "2222", "bastion.internal"])
    yield json.dumps(["docker", "run", "-p", "8080:80", "nginx"])
    yield "args:\n  - --password\n  - $(DB_PASSWORD)\n"
    yield json.dumps(["pg_dump", "--password", "--host", "db.internal"], indent=2)
    yield "vault login -method=userpass username=bob\n"
    yield "export VAULT_TOKEN=$(vault print token)\n"
    yield "vault_token = s.getVaultTokenFromTheEnvironment()\n"


def false_positives(seed: int = 0, skip: Collection[str] = ()) -> list[str]:
    """Near misses of every family but those of the kinds in `skip`, then clean corpora's."""
    rng = random.Random(seed)
    texts = [
        text
        for family in FAMILIES
        if family.kind not in skip
        for text in family_near_misses(family, rng)
    ]
    return texts + list(corpus_near_misses(rng))
