"""Cloud platforms: Google Cloud, Azure, DigitalOcean, Alibaba, Tencent, Heroku, Cloudflare,
Fly.io, Netlify, OpenShift, Vault, Terraform, Pulumi, Doppler, AWS beyond the core kinds, and
Kubernetes secrets (AWS access key ids and secret keys are core kinds)."""

from __future__ import annotations

from ..rule import Rule
from ..shapes import UUID, UUID_WIDTH, hex_run, labelled, token
from ..validators import azure_signature, plausible_token

_B64 = "A-Za-z0-9+/"
# Service (`s.`) and recovery (`r.`) tokens are 24 base62; a batch token (`b.`) is an encrypted
# blob of a hundred characters or more.
_VAULT_LEGACY = r"(?:[sr]\.[A-Za-z0-9]{24}(?:\.[A-Za-z0-9]{4,5})?|b\.[A-Za-z0-9_-]{80,300})"
_VAULT_LEGACY_WIDTH = 2 + 300

# A Secret manifest's values: the `data:` (base64) or `stringData:` entries, up to 16 of them,
# before or after its `kind: Secret` line (kubectl prints keys in alphabetical order: `data`
# first). Each entry is an indented `key: value` line; the run of entries ends the match.
_K8S_ENTRIES = r"(?P<secret>(?:\r?\n[ \t]{1,8}[A-Za-z0-9._-]{1,63}:[ \t]{0,4}[^\r\n]{1,256}){1,16})"
_K8S_ENTRIES_WIDTH = 16 * (2 + 8 + 63 + 1 + 4 + 256)
_K8S_KIND = r"kind:[ \t]{0,4}[\"']?Secret[\"']?[ \t]{0,4}(?:\r?\n|$)"
_K8S_KIND_WIDTH = 5 + 4 + 1 + 6 + 1 + 4 + 2
_K8S_BETWEEN = r"(?:[^\x00]{0,1024}?\n)?"
_K8S_BETWEEN_WIDTH = 1025
_K8S_DATA = r"(?:data|stringData):[ \t]{0,4}"
_K8S_DATA_WIDTH = 11 + 4

RULES: tuple[Rule, ...] = (
    token("google_api_key", r"AIza[0-9A-Za-z_-]{35}", 39, ("aiza",)),
    token("google_oauth_client_secret", r"GOCSPX-[A-Za-z0-9_-]{28}", 35, ("gocspx-",)),
    token("google_oauth_access_token", r"ya29\.[A-Za-z0-9_-]{30,400}", 405, ("ya29.",)),
    # The key file's `private_key` is a PEM block (a core kind); its id names the file.
    Rule(
        kind="gcp_service_account_key",
        pattern=(
            r"\\?\"private_key_id\\?\"[ \t]{0,4}:[ \t]{0,4}\\?\"(?P<secret>"
            + hex_run(40)
            + r")\\?\""
        ),
        max_length=2 + 14 + 2 + 4 + 1 + 4 + 2 + 40 + 2,
        keywords=("private_key_id",),
    ),
    Rule(
        kind="azure_storage_account_key",
        pattern=rf"AccountKey=(?P<secret>[{_B64}]{{86}}==)(?:[^{_B64}=]|$)",
        max_length=11 + 88 + 1,
        keywords=("accountkey=",),
    ),
    Rule(
        kind="azure_shared_access_key",
        pattern=rf"SharedAccessKey=(?P<secret>[{_B64}]{{43}}=)(?:[^{_B64}=]|$)",
        max_length=16 + 44 + 1,
        keywords=("sharedaccesskey=",),
    ),
    Rule(
        kind="azure_sas_token",
        pattern=r"[?&]sig=(?P<secret>[A-Za-z0-9%+/]{43,64}(?:%3[Dd]|=)?)(?:[&\"'<> \t\r\n\\]|$)",
        max_length=5 + 64 + 3 + 1,
        keywords=("sig=",),
        validator=azure_signature,
    ),
    # Entra ID client secrets: three characters, a digit and "Q~", then 31 to 34 more.
    token(
        "azure_ad_client_secret",
        r"[A-Za-z0-9_~.-]{3}[0-9]Q~[A-Za-z0-9_~.-]{31,34}",
        40,
        ("q~",),
        alphabet="A-Za-z0-9_~.-",
    ),
    # Azure DevOps' 84-character PATs (learn.microsoft.com/purview/sit-defn-azure-devops-
    # personal-access-token: base62, "AZDO" at 76-80), laid out as Microsoft's common annotated
    # security key (github.com/microsoft/security-utilities, SEC101/201): 52 random, "JQQJ99",
    # one character, a year letter A-L, 12 of platform data, "AAAA", "AZDO", a 4-character
    # checksum (Marvin32, not checked here).
    token(
        "azure_devops_pat",
        r"[A-Za-z0-9]{52}JQQJ99[A-Za-z0-9][A-L][A-Za-z0-9]{12}AAAAAZDO[A-Za-z0-9]{4}",
        84,
        ("jqqj99",),
    ),
    token("digitalocean_personal_access_token", r"dop_v1_" + hex_run(64), 71, ("dop_v1_",)),
    token("digitalocean_oauth_token", r"doo_v1_" + hex_run(64), 71, ("doo_v1_",)),
    token("digitalocean_refresh_token", r"dor_v1_" + hex_run(64), 71, ("dor_v1_",)),
    token("alibaba_access_key_id", r"LTAI[A-Za-z0-9]{12,20}", 24, ("ltai",)),
    token("tencent_cloud_secret_id", r"AKID[A-Za-z0-9]{32}", 36, ("akid",)),
    # Not documented by Heroku; the format trufflehog's and gitleaks' detectors agree on.
    token("heroku_api_key", r"HRKU-AA[A-Za-z0-9_-]{58}", 65, ("hrku-aa",)),
    token(
        "cloudflare_origin_ca_key", r"v1\.0-" + hex_run(24) + "-" + hex_run(146), 176, ("v1.0-",)
    ),
    labelled(
        "cloudflare_api_token",
        r"(?:cloudflare|cf)_?api_?(?:token|key)",
        20,
        "[a-z0-9_-]{40}",
        40,
        ("cloudflare", "cf"),
    ),
    token("flyio_access_token", r"fo1_[A-Za-z0-9_-]{43}", 47, ("fo1_",)),
    # answers.netlify.com/t/106146: `nf` and a letter for the token's kind (personal, CLI,
    # OAuth, app, build), 40 characters in all; the alphabet is not stated (trufflehog: `_`).
    token(
        "netlify_access_token",
        r"nf[pcoub]_[A-Za-z0-9_]{36}",
        40,
        ("nfp_", "nfc_", "nfo_", "nfu_", "nfb_"),
    ),
    token("openshift_user_token", r"sha256~[A-Za-z0-9_-]{43}", 50, ("sha256~",)),
    token("vault_token", r"hvs\.[A-Za-z0-9_-]{90,120}", 124, ("hvs.",)),
    # Recovery tokens (`hvr.`, a recovery-mode server's): the prefix is documented, the length
    # is not; taken to be a service token's.
    token("vault_token", r"hvr\.[A-Za-z0-9_-]{90,120}", 124, ("hvr.",)),
    token("vault_batch_token", r"hvb\.[A-Za-z0-9_-]{138,300}", 304, ("hvb.",)),
    # Vault's service tokens before 1.10: `s.` and 24 base62, with `.` and the namespace's id
    # in a namespace (vault/token_store.go). `s.` + 24 letters is also code (`s.someMethodName`),
    # so only where Vault takes a token: a `VAULT_TOKEN`/`X-Vault-Token` label, `vault login`.
    labelled(
        "vault_legacy_token",
        r"vault[_-]?token",
        11,
        _VAULT_LEGACY,
        _VAULT_LEGACY_WIDTH,
        ("vault",),
        validator=plausible_token,
    ),
    Rule(
        kind="vault_legacy_token",
        pattern=(
            r"vault[ \t]{1,4}(?:login|token[ \t]{1,4}(?:lookup|renew|revoke))"
            r"(?:[ \t]{1,4}-[^ \t\r\n]{1,64}){0,4}[ \t]{1,4}(?:token=)?"
            rf"(?P<secret>{_VAULT_LEGACY})(?:[^A-Za-z0-9_-]|$)"
        ),
        max_length=5 + 4 + 5 + 4 + 6 + 4 * (4 + 1 + 64) + 4 + 6 + _VAULT_LEGACY_WIDTH + 1,
        keywords=("vault",),
        validator=plausible_token,
    ),
    # `vault login` and `vault token lookup` print a table: `token   s.…`, `id   s.…`.
    Rule(
        kind="vault_legacy_token",
        pattern=(
            r"(?:^|[\r\n]|\\n)(?:token|id)[ \t]{2,40}"
            rf"(?P<secret>{_VAULT_LEGACY})(?:[^A-Za-z0-9_.-]|$)"
        ),
        max_length=2 + 5 + 40 + _VAULT_LEGACY_WIDTH + 1,
        keywords=("token", "id"),
        validator=plausible_token,
    ),
    token(
        "terraform_cloud_token",
        r"[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_-]{60,70}",
        14 + 9 + 70,
        (".atlasv1.",),
    ),
    token("pulumi_access_token", r"pul-" + hex_run(40), 44, ("pul-",)),
    token(
        "doppler_token",
        r"dp\.(?:pt|st|ct|sa|scim|audit)\.[A-Za-z0-9]{40,44}",
        3 + 6 + 44,
        ("dp.pt.", "dp.st.", "dp.ct.", "dp.sa.", "dp.scim.", "dp.audit."),
    ),
    labelled(
        "aws_session_token",
        r"aws_?session_?token",
        17,
        "[a-z0-9/+=]{100,1400}",
        1400,
        ("session",),
        validator=plausible_token,
    ),
    # Amazon Bedrock API keys (docs.aws.amazon.com/bedrock/latest/userguide/api-keys.html):
    # a long-term key is `ABSK` and base64 of `BedrockAPIKey-…`; a short-term one is
    # `bedrock-api-key-` and base64 of a presigned `bedrock.amazonaws.com/?Action=…` URL.
    token(
        "aws_bedrock_api_key",
        r"ABSKQmVkcm9ja0FQSUtleS[A-Za-z0-9+/]{20,400}={0,2}",
        22 + 402,
        ("absk",),
        alphabet="A-Za-z0-9+/=_-",
    ),
    token(
        "aws_bedrock_api_key",
        r"bedrock-api-key-YmVkcm9jay5hbWF6b25hd3MuY29t[A-Za-z0-9+/]{20,4000}={0,2}",
        44 + 4002,
        ("bedrock-api-key-",),
        alphabet="A-Za-z0-9+/=_-",
    ),
    token("amazon_mws_auth_token", r"amzn\.mws\." + UUID, 9 + UUID_WIDTH, ("amzn.mws.",)),
    Rule(
        kind="kubernetes_secret",
        pattern=_K8S_KIND + _K8S_BETWEEN + _K8S_DATA + _K8S_ENTRIES,
        max_length=_K8S_KIND_WIDTH + _K8S_BETWEEN_WIDTH + _K8S_DATA_WIDTH + _K8S_ENTRIES_WIDTH,
        keywords=("secret",),
    ),
    Rule(
        kind="kubernetes_secret",
        pattern=r"(?:^|\n)" + _K8S_DATA + _K8S_ENTRIES + r"\r?\n" + _K8S_BETWEEN + _K8S_KIND,
        max_length=1
        + _K8S_DATA_WIDTH
        + _K8S_ENTRIES_WIDTH
        + 2
        + _K8S_BETWEEN_WIDTH
        + _K8S_KIND_WIDTH,
        keywords=("secret",),
    ),
)
