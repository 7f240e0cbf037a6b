"""Kubernetes resource quantities (``500m``, ``2Gi``, ``1.5``, ``1e3``).

Every quantity is held as an ``int`` count of *milli-units*, the way kube-scheduler holds CPU
(``MilliValue``): exact integer arithmetic, no float drift when requests are summed, and one
representation for CPU, memory and extended resources alike. ``1`` is ``1000``; ``2Gi`` is
``2 * 2**30 * 1000``. Fractions below a milli-unit round up, as ``Quantity.MilliValue`` does.
"""

from __future__ import annotations

import re
from decimal import ROUND_CEILING, Decimal

MILLI = 1000

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
}
_QUANTITY = re.compile(
    r"^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(?:([eE][+-]?[0-9]+)|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?)$"
)


# Quantities beyond this many units are refused: no resource comes near (an exabyte is 10^18
# bytes), and ``1e999999999`` would otherwise make an integer of a billion digits.
MAX_UNITS = 10**30


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity."""


def parse_quantity(text: str | int | float) -> int:
    """Parse a quantity into milli-units; raise :class:`QuantityError` when it is not one."""
    if isinstance(text, bool):
        raise QuantityError(f"{text!r} is not a quantity")
    if isinstance(text, int):
        return text * MILLI
    if isinstance(text, float):
        return _to_milli(Decimal(repr(text)))
    match = _QUANTITY.match(text.strip()) if isinstance(text, str) else None
    if match is None:
        raise QuantityError(f"{text!r} is not a quantity (expected e.g. 500m, 2Gi, 1.5)")
    number, exponent, suffix = match.groups()
    try:
        value = Decimal(number)
        if exponent:
            value = value.scaleb(int(exponent[1:]))
        elif suffix in _BINARY:
            value = value * _BINARY[suffix]
        else:
            value = value * _DECIMAL[suffix or ""]
    except ArithmeticError as err:  # an exponent beyond what Decimal holds (1e99999999999)
        raise QuantityError(f"{text!r} is too large a quantity") from err
    if abs(value) > MAX_UNITS:
        raise QuantityError(f"{text!r} is too large a quantity (at most 1e30)")
    return _to_milli(value)


def _to_milli(value: Decimal) -> int:
    return int((value * MILLI).to_integral_value(rounding=ROUND_CEILING))


def format_quantity(milli: int) -> str:
    """Render milli-units the short way a person reads them: ``500m``, ``2Gi``, ``3``."""
    if milli % MILLI:
        return f"{milli}m"
    units = milli // MILLI
    if units and units % 2**10 == 0:
        for suffix in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"):
            if units % _BINARY[suffix] == 0:
                return f"{units // _BINARY[suffix]}{suffix}"
    return str(units)
