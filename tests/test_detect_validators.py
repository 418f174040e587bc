"""The detector's validators: checksums, valid ranges and the shape of a real secret."""

from __future__ import annotations

import base64
import zlib

import pytest
from gateway_policies.detect import validators as v

from .support.secret_samples import atlassian_crc, gitlab_routable

pytestmark = pytest.mark.unit


def test_luhn_takes_valid_card_numbers_only() -> None:
    assert v.luhn("4111111111111111")
    assert v.luhn("4111 1111 1111 1111")
    assert not v.luhn("4111111111111112")
    assert not v.luhn("0000000000000000")  # one digit repeated
    assert not v.luhn("411111111111")  # too short


def test_payment_card_needs_a_network_prefix_and_its_length() -> None:
    assert v.payment_card("5555-5555-5555-4444")  # Mastercard
    assert v.payment_card("378282246310005")  # American Express, 15 digits
    assert not v.payment_card("3782822463100050")  # Amex prefix, wrong length
    assert not v.payment_card("9111111111111111")  # no network starts with 9


def test_iban_checks_country_length_and_mod_97() -> None:
    assert v.iban("DE89370400440532013000")
    assert v.iban("GB82 WEST 1234 5698 7654 32")
    assert not v.iban("DE89370400440532013001")  # mod-97 off
    assert not v.iban("DE8937040044053201300")  # German IBANs have 22 characters
    assert not v.iban("ZZ89370400440532013000")  # no such country


def test_us_ssn_rejects_areas_and_numbers_never_issued() -> None:
    assert v.us_ssn("123-45-6789")
    for never in ("000-12-3456", "666-12-3456", "912-12-3456", "123-00-4567", "123-45-0000"):
        assert not v.us_ssn(never), never
    assert not v.us_ssn("078-05-1120")


def test_phone_needs_an_assigned_country_code_and_e164_length() -> None:
    assert v.phone("+14155550123")
    assert v.phone("+44 20 7946 0958")
    assert not v.phone("+10155550123")  # NANP area codes never start with 0 or 1
    assert not v.phone("+8001234567")  # 80 is no country's code
    assert not v.phone("+441234")  # too short
    assert not v.phone("+49 1111 111111")  # a run, not a number


def test_crc32_suffix_is_githubs_and_npms_checksum() -> None:
    body = "abcDEF0123456789abcDEF01234567"
    checksum = v.base62(zlib.crc32(body.encode()), 6)
    assert v.npm_checksum(f"npm_{body}{checksum}")
    assert v.github_checksum(f"ghp_{body}{checksum}")
    assert not v.npm_checksum(f"npm_{body}{checksum[:-1]}X")
    assert not v.github_checksum(f"ghp_{body}000000")
    assert v.base62(61, 3) == "00z"


def test_shannon_entropy() -> None:
    assert v.shannon_entropy("") == 0
    assert v.shannon_entropy("aaaa") == 0
    assert v.shannon_entropy("abcd") == 2


@pytest.mark.parametrize("value", ["s3cr3t-Pa55w0rd!", "Zr8#kP2qLm9xT4vW", "9f8e7d6c5b4a3e2f1a0b"])
def test_plausible_value_keeps_secrets(value: str) -> None:
    assert v.plausible_value(value)


@pytest.mark.parametrize(
    "value",
    [
        "${DB_PASSWORD}",
        "{{ secrets.TOKEN }}",
        "<your-api-key>",
        "self.password",
        "get_secret_value",
        "/run/secrets/db",
        "https://vault/secret",
        "changeme123",
        "xxxxxxxx1",
        "short1",
        "aaaaaaaa",
        "EXAMPLE_KEY_123",
        "%(password)s",
    ],
)
def test_plausible_value_drops_references_names_and_placeholders(value: str) -> None:
    assert not v.plausible_value(value)


def test_plausible_token_drops_placeholders() -> None:
    assert v.plausible_token("xoxb-418273645091-abcXYZ987")
    assert not v.plausible_token("xoxb-xxxxxxxxxxxx")
    assert not v.plausible_token("sk_live_EXAMPLEKEY")
    assert not v.plausible_token("AKIA000000000000")


def test_a_token_counting_up_its_alphabet_is_still_a_token() -> None:
    assert v.plausible_token("xoxb-123456789012-abcdefghij")


def test_gitlab_routable_tokens_carry_their_length_and_crc() -> None:
    token = gitlab_routable("glpat-" + "k3Zq9TfW2mXa7LpB")
    assert v.gitlab_token(token)
    assert not v.gitlab_token(token[:-1] + ("0" if token[-1] != "0" else "1"))
    shorter = gitlab_routable("glpat-" + "k3Zq9TfW2mXa7Lp")
    assert not v.gitlab_token(shorter), "15 random bytes, not 16"
    assert v.gitlab_token("glpat-" + "Zr8kP2qLm9xT4wQ7nB3c")


def test_atlassian_tokens_end_with_their_crc() -> None:
    token = atlassian_crc("ATATT3xFfGF0" + "Zr8kP2qLm9xT4wQ7nB3c" * 8 + "Zr8kP2qLm9x=")
    assert len(token) == 192
    assert v.atlassian_token(token)
    assert not v.atlassian_token(token[:-1] + ("A" if token[-1] != "A" else "B"))


def test_basic_credentials_decode_to_user_and_password() -> None:
    good = base64.b64encode(b"svc:Zr8kP2qLm9").decode()
    assert v.basic_credentials(good)
    assert not v.basic_credentials(base64.b64encode(b"no-colon-here").decode())
    assert not v.basic_credentials(base64.b64encode(b"user:password").decode())
    assert not v.basic_credentials("authentication")


def test_azure_signature_is_a_32_byte_hmac() -> None:
    sig = base64.b64encode(bytes(range(32))).decode().replace("+", "%2B").replace("=", "%3D")
    assert v.azure_signature(sig)
    assert not v.azure_signature(base64.b64encode(bytes(16)).decode())
    assert not v.azure_signature("not*base64")


def test_jwt_header_names_an_algorithm() -> None:
    header = base64.urlsafe_b64encode(b'{"alg":"HS256"}').decode().rstrip("=")
    assert v.jwt_header(f"{header}.eyJzdWIiOiIxIn0.Zr8kP2qLm9xT4vWq")
    assert not v.jwt_header("eyJmb28iOiJiYXIifQ.eyJzdWIiOiIxIn0.Zr8kP2qLm9xT4vWq")


def test_command_password_needs_six_characters_and_more_than_a_word() -> None:
    assert v.command_password("S3cr3tPassw0rd")
    assert v.command_password("hunter2!")
    assert not v.command_password("2222")  # `ssh -p 2222`: a port
    assert not v.command_password("string")  # `--password string` in a help text
    assert not v.command_password("$DB_PASSWORD")
    assert not v.command_password("changeme1")
