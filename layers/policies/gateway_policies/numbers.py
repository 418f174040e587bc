"""Numbers as a lax reader reads them, for policies that act on a number in a request.

JSON has one number type, and an upstream may be lax about it: `64000.0` and
`"64000"` can both mean 64000 to a validator in lax mode. A policy that only
looks at Python ints lets those forms through unchecked, so it reads every
form here and writes back a plain integer.
"""

from __future__ import annotations

import math
from typing import Any


def json_number(value: Any) -> float | None:
    """What `value` means as a number: ints, floats and numeric strings; None otherwise.

    Booleans are not numbers here (in Python, `True` is an int). Infinity and
    NaN are not numbers either: no JSON reader that honours a cap should see one.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return float(value)
    if isinstance(value, float):
        number = value
    elif isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            return None
    else:
        return None
    return number if math.isfinite(number) else None
