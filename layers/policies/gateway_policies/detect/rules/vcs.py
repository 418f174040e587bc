"""Source hosting: GitLab's token family and Atlassian's (GitHub's tokens are the core kind
`github_token`)."""

from __future__ import annotations

from ..rule import Rule
from ..shapes import hex_run, token

# GitLab's documented token prefixes; the random part is 20 characters for the older tokens and
# longer, with a `.`-separated routing part, for newer ones.
_GITLAB_BODY = r"[A-Za-z0-9_.-]{20,80}"
_GITLAB = "A-Za-z0-9_.-"


def _gitlab(kind: str, prefix: str, body: str = _GITLAB_BODY, width: int = 80) -> Rule:
    return token(kind, prefix + body, len(prefix) + width, (prefix.lower(),), alphabet=_GITLAB)


RULES: tuple[Rule, ...] = (
    _gitlab("gitlab_personal_access_token", "glpat-"),
    _gitlab("gitlab_deploy_token", "gldt-"),
    _gitlab("gitlab_pipeline_trigger_token", "glptt-", hex_run(40), 40),
    _gitlab("gitlab_runner_token", "glrt-"),
    _gitlab("gitlab_runner_registration_token", "GR1348941", r"[A-Za-z0-9_-]{20}", 20),
    _gitlab("gitlab_oauth_app_secret", "gloas-", hex_run(64), 64),
    _gitlab("gitlab_ci_job_token", "glcbt-"),
    _gitlab("gitlab_incoming_email_token", "glimt-", r"[A-Za-z0-9_-]{25}", 25),
    _gitlab("gitlab_feed_token", "glft-"),
    _gitlab("gitlab_scim_token", "glsoat-"),
    _gitlab("gitlab_feature_flags_token", "glffct-"),
    _gitlab("gitlab_agent_token", "glagent-", r"[A-Za-z0-9_-]{50}", 50),
    # Atlassian's API tokens (Jira, Confluence, Bitbucket): "ATATT3" and 186 characters.
    token(
        "atlassian_api_token",
        r"ATATT3[A-Za-z0-9_=-]{186}",
        192,
        ("atatt3",),
        alphabet="A-Za-z0-9_=-",
    ),
    token("bitbucket_app_password", r"ATBB[A-Za-z0-9]{32}", 36, ("atbb",)),
)
