"""Chat, e-mail and SMS services: Slack, Microsoft Teams, Discord, Telegram, Twilio, SendGrid,
Mailgun, Mailchimp, Brevo."""

from __future__ import annotations

from ..rule import Rule
from ..shapes import UUID, UUID_WIDTH, hex_run, labelled, token
from ..validators import plausible_token

_SLACK_PARTS = r"[0-9]{8,14}-[0-9]{8,14}-[A-Za-z0-9]{24,34}"
_SLACK_PARTS_WIDTH = 14 + 1 + 14 + 1 + 34


def _url(kind: str, url: str, width: int, keyword: str, secret_tail: str) -> Rule:
    """A URL whose path is the credential: `secret_tail` is redacted, the host stays."""
    return Rule(
        kind=kind,
        pattern=f"{url}(?P<secret>{secret_tail})(?:[^A-Za-z0-9_/-]|$)",
        max_length=width + 1,
        keywords=(keyword,),
        validator=plausible_token,
    )


RULES: tuple[Rule, ...] = (
    token("slack_bot_token", "xoxb-" + _SLACK_PARTS, 5 + _SLACK_PARTS_WIDTH, ("xoxb-",)),
    token(
        "slack_user_token",
        r"xoxp-[0-9]{8,14}-[0-9]{8,14}-[0-9]{8,14}-[a-f0-9]{32}",
        5 + 3 * 15 + 32,
        ("xoxp-",),
    ),
    token(
        "slack_app_token",
        r"xapp-[0-9]-[A-Z0-9]{9,12}-[0-9]{10,14}-[a-f0-9]{64}",
        5 + 2 + 13 + 15 + 64,
        ("xapp-",),
    ),
    token(
        "slack_config_token",
        r"xoxe\.xox[bp]-[0-9]-[A-Za-z0-9]{160,170}",
        13 + 170,
        ("xoxe.xox",),
    ),
    token("slack_refresh_token", r"xoxe-[0-9]-[A-Za-z0-9]{140,150}", 7 + 150, ("xoxe-",)),
    token(
        "slack_legacy_token",
        r"xox[aors]-(?:[0-9]-)?[0-9]{8,14}-[0-9A-Za-z-]{20,80}",
        7 + 15 + 80,
        ("xoxa-", "xoxo-", "xoxr-", "xoxs-"),
    ),
    token(
        "slack_session_token",
        r"xoxc-[0-9]{8,14}-[0-9]{8,14}-[0-9]{8,14}-[a-f0-9]{64}",
        5 + 3 * 15 + 64,
        ("xoxc-",),
    ),
    # An incoming webhook is `services/T…/B…/secret`; a Workflow Builder one
    # `workflows/T…/A…/<trigger id>/secret` or `triggers/T…/<trigger id>/secret`.
    _url(
        "slack_webhook_url",
        r"https://hooks\.slack\.com/(?:services|workflows|triggers)/",
        34 + 13 + 21 + 20 + 33,
        "hooks.slack.com/",
        r"T[A-Z0-9]{8,12}/[A-Z0-9]{8,20}/(?:[0-9]{8,19}/)?[A-Za-z0-9]{24,32}",
    ),
    _url(
        "microsoft_teams_webhook_url",
        r"https://[a-z0-9-]{1,64}\.webhook\.office\.com/webhookb2/",
        8 + 64 + 30 + 2 * UUID_WIDTH + 18 + 32 + 1 + 38 + 20,
        ".webhook.office.com/webhookb2/",
        UUID
        + "@"
        + UUID
        + r"/IncomingWebhook/"
        + hex_run(32)
        + "/"
        + UUID
        + r"(?:/[A-Za-z0-9_-]{1,20})?",
    ),
    _url(
        "discord_webhook_url",
        r"https://(?:ptb\.|canary\.)?discord(?:app)?\.com/api/webhooks/",
        44 + 20 + 1 + 68,
        "/api/webhooks/",
        r"[0-9]{17,20}/[A-Za-z0-9_-]{60,68}",
    ),
    token(
        "discord_bot_token",
        r"[MNO][A-Za-z0-9_-]{23,25}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,38}",
        26 + 7 + 39,
        (),
        alphabet="A-Za-z0-9_.-",
    ),
    token(
        "telegram_bot_token",
        r"[0-9]{8,10}:AA[A-Za-z0-9_-]{33}",
        46,
        (":aa",),
        alphabet="A-Za-z0-9_:-",
    ),
    token("twilio_api_key", r"SK" + hex_run(32), 34, ("sk",)),
    labelled("twilio_auth_token", r"twilio_?auth_?token", 17, hex_run(32), 32, ("twilio",)),
    token(
        "sendgrid_api_key",
        r"SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}",
        69,
        ("sg.",),
        alphabet="A-Za-z0-9_.-",
    ),
    token("mailgun_api_key", r"key-" + hex_run(32), 36, ("key-",)),
    token("mailchimp_api_key", hex_run(32) + r"-us[0-9]{1,2}", 37, ("-us",)),
    token("brevo_api_key", r"xkeysib-" + hex_run(64) + r"-[A-Za-z0-9]{16}", 89, ("xkeysib-",)),
    # Brevo's SMTP keys have the API keys' layout under their own prefix.
    token("brevo_smtp_key", r"xsmtpsib-" + hex_run(64) + r"-[A-Za-z0-9]{16}", 90, ("xsmtpsib-",)),
)
