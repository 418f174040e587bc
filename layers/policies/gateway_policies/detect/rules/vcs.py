"""Source hosting: GitLab's token family and Atlassian's (GitHub's tokens are the core kind
`github_token`)."""

from __future__ import annotations

from ..rule import Rule
from ..shapes import hex_run, token
from ..validators import atlassian_token, gitlab_token

# GitLab's prefixes are documented (docs.gitlab.com/ee/security/tokens/#token-prefixes); the
# lengths are not, so they come from GitLab's source. A token is either 20 random characters
# (Devise's friendly token; a CI job token puts its partition and `_` before them) or, since
# 17.x, routable (lib/authn/token_field/generator/routable_token.rb): base64url of 16 random
# bytes, a routing payload of up to 159 bytes and its length (27 to 235 characters), then
# `.01.`, that length in two base-36 digits and the CRC32 of everything before it (the prefix
# too) in seven; `validators.gitlab_token` checks both.
_GITLAB_BODY = r"[A-Za-z0-9_-]{20,235}(?:\.01\.[0-9a-z]{9})?"
_GITLAB_WIDTH = 235 + 13
_GITLAB = "A-Za-z0-9_.-"


def _gitlab(kind: str, prefix: str, body: str = _GITLAB_BODY, width: int = _GITLAB_WIDTH) -> Rule:
    return token(
        kind,
        prefix + body,
        len(prefix) + width,
        (prefix.lower(),),
        alphabet=_GITLAB,
        validator=gitlab_token,
    )


RULES: tuple[Rule, ...] = (
    _gitlab("gitlab_personal_access_token", "glpat-"),
    _gitlab("gitlab_deploy_token", "gldt-"),
    _gitlab("gitlab_pipeline_trigger_token", "glptt-", hex_run(40), 40),
    # `glrtr-` for a runner created with a registration token.
    token(
        "gitlab_runner_token",
        "glrtr?-" + _GITLAB_BODY,
        6 + _GITLAB_WIDTH,
        ("glrt-", "glrtr-"),
        alphabet=_GITLAB,
        validator=gitlab_token,
    ),
    _gitlab("gitlab_runner_registration_token", "GR1348941", r"[A-Za-z0-9_-]{20}", 20),
    _gitlab("gitlab_oauth_app_secret", "gloas-", r"[A-Za-z0-9_-]{64}", 64),
    _gitlab("gitlab_ci_job_token", "glcbt-"),
    _gitlab("gitlab_incoming_email_token", "glimt-", r"[A-Za-z0-9_-]{25}", 25),
    _gitlab("gitlab_feed_token", "glft-"),
    _gitlab("gitlab_scim_token", "glsoat-"),
    _gitlab("gitlab_feature_flags_token", "glffct-"),
    _gitlab("gitlab_agent_token", "glagent-", r"[A-Za-z0-9_-]{50}", 50),
    _gitlab("gitlab_workspace_token", "glwt-"),
    # Atlassian's API tokens (Jira, Confluence, Bitbucket) are not documented; every issued one
    # seen is 192 characters: "ATATT3", 177 base64url, "=" and the CRC32 of all before it in
    # upper-case hex (validators.atlassian_token).
    token(
        "atlassian_api_token",
        r"ATATT3[A-Za-z0-9_-]{177}=[A-F0-9]{8}",
        192,
        ("atatt3",),
        alphabet="A-Za-z0-9_=-",
        validator=atlassian_token,
    ),
    token("bitbucket_app_password", r"ATBB[A-Za-z0-9]{32}", 36, ("atbb",)),
)
