"""Personal data, opt-in (`default_on=False`), each validated rather than merely shaped: card
numbers by Luhn and network, IBANs by mod-97 and country length, SSNs by the SSA's areas, phone
numbers by E.164's country codes.

A number written in groups (`4111 1111 1111 1111`, `DE89 3704 …`) ends only where a separator is
not followed by another group, so a grouped number has one end, not one per group.
"""

from __future__ import annotations

from ..rule import Rule
from ..validators import iban, payment_card, phone, us_ssn


def _grouped_end(separators: str, group: str) -> str:
    """The end of a grouped number: neither a group character nor a separator before one."""
    return rf"(?:[^{group}{separators}]|[{separators}](?:[^{group}]|$)|$)"


RULES: tuple[Rule, ...] = (
    Rule(
        kind="payment_card",
        pattern=(
            r"(?:^|[^0-9A-Za-z_.+/:-])(?P<secret>[1-9][0-9]{3}[ -]?[0-9]{4,6}[ -]?[0-9]{4,5}"
            r"(?:[ -]?[0-9]{1,4})?)" + _grouped_end(" -", "0-9A-Za-z_/:")
        ),
        max_length=1 + 4 + 7 + 6 + 5 + 2 + 2,
        validator=payment_card,
        default_on=False,
    ),
    Rule(
        kind="iban",
        pattern=(
            r"(?:^|[^0-9A-Za-z_])(?P<secret>[A-Z]{2}[0-9]{2}(?: ?[A-Z0-9]{4}){2,7}"
            r"(?: ?[A-Z0-9]{1,3})?)" + _grouped_end(" ", "0-9A-Za-z_")
        ),
        max_length=1 + 4 + 35 + 4 + 2,
        validator=iban,
        default_on=False,
    ),
    Rule(
        kind="us_ssn",
        pattern=r"(?:^|[^0-9A-Za-z_-])(?P<secret>[0-9]{3}-[0-9]{2}-[0-9]{4})(?:[^0-9A-Za-z_-]|$)",
        max_length=1 + 11 + 1,
        keywords=("-",),
        validator=us_ssn,
        default_on=False,
    ),
    # E.164: "+", then up to 15 digits, single spaces or dashes allowed between them; a dot
    # and a digit after them make it a decimal (`Decimal('+35236450.6')`), not a number.
    Rule(
        kind="phone",
        pattern=(
            r"(?:^|[^0-9A-Za-z_+])(?P<secret>\+[1-9](?:[ -]?[0-9]){7,14})"
            + _grouped_end(" .-", "0-9A-Za-z_")
        ),
        max_length=1 + 2 + 28 + 2,
        keywords=("+",),
        validator=phone,
        default_on=False,
    ),
)
