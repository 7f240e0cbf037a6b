"""Kubernetes resource quantities (``500m``, ``2Gi``, ``1.5``, ``1e3``).

Every quantity is held as an ``int`` count of *milli-units*, the way kube-scheduler holds CPU
(``MilliValue``): exact integer arithmetic, no float drift when requests are summed, and one
representation for CPU, memory and extended resources alike. ``1`` is ``1000``; ``2Gi`` is
``2 * 2**30 * 1000``. Fractions below a milli-unit round up, as ``Quantity.MilliValue`` does.

The grammar is apimachinery's ``resource.ParseQuantity``: a sign, digits with an optional
decimal point (``1.``, ``.5`` and ``1.G`` included), then a binary suffix (Ki .. Ei), a decimal
one (n u m k M G T P E) or an exponent (``e3``, ``E-2``); no NaN, no infinity. A quantity is at
most 2^63-1 units: upstream caps binary-suffixed values there (``9Ei`` reads as 2^63-1) and keeps
larger decimal ones exactly, but every consumer of them (``Value``, ``MilliValue``, so the
scheduler's sums) overflows int64; such a value is refused here instead. Parsing costs at most a
few operations on the digits given, whatever their number: ``1e999999999`` and a 5000-digit
integer are refused (or a tiny value rounded up to 1m) from their order of magnitude alone.
"""

from __future__ import annotations

import math
import re
from decimal import MAX_EMAX, MIN_EMIN, ROUND_CEILING, Context, Decimal

MILLI = 1000
MAX_UNITS = 2**63 - 1  # the largest quantity upstream holds (int64; its binary cap)

_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}  # powers of two
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}  # of ten
_QUANTITY = re.compile(r"([+-]?)([0-9]*)(?:\.([0-9]*))?(?:[eE]([+-]?[0-9]+)|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]))?")
_EXAMPLES = "(expected e.g. 500m, 2Gi, 1.5)"


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity, or one too large to hold."""


def parse_quantity(text: str | int | float) -> int:
    """Parse a quantity into milli-units; raise :class:`QuantityError` when it is not one.
    YAML and JSON numbers are taken as what they print as (``0.5``, ``1e+20``)."""
    if isinstance(text, bool):
        raise QuantityError(f"{text!r} is not a quantity")
    if isinstance(text, int):
        if abs(text) > MAX_UNITS:
            raise QuantityError(f"{_shown(str(text))} is too large (at most 2^63-1)")
        return text * MILLI
    if isinstance(text, float):
        if not math.isfinite(text):  # YAML's .nan and .inf; JSON's 1e400 read as a float
            raise QuantityError(f"{text!r} is not a quantity (not a number, or too large)")
        text = repr(text)
    if not isinstance(text, str):  # (a list, a mapping: named by type, whatever their size)
        raise QuantityError(f"a {type(text).__name__} is not a quantity {_EXAMPLES}")
    match = _QUANTITY.fullmatch(text.strip())
    if match is None or not (match[2] or match[3]):
        raise QuantityError(f"{_shown(text)!r} is not a quantity {_EXAMPLES}")
    sign, whole, fraction, exponent, suffix = match.groups()
    fraction = fraction or ""
    digits = (whole + fraction).lstrip("0")
    if not digits:
        return 0
    power10 = -len(fraction)  # the value is int(digits) * 10**power10 * 2**power2
    power2 = 0
    if exponent is not None:
        bare = exponent.lstrip("+-").lstrip("0")
        if len(bare) > 18:  # upstream parses the exponent as an int64
            raise QuantityError(f"{_shown(text)!r} has an exponent out of range")
        power10 += int(exponent)
    elif suffix in _BINARY:
        power2 = _BINARY[suffix]
    else:
        power10 += _DECIMAL[suffix or ""]
    milli = _milli(digits, power10 + 3, power2)
    if milli is None:
        if power2:  # upstream caps binary-suffixed amounts at the int64 maximum
            milli = MAX_UNITS * MILLI
        else:
            raise QuantityError(f"{_shown(text)!r} is too large (at most 2^63-1)")
    return -milli if sign == "-" else milli


def _milli(digits: str, power10: int, power2: int) -> int | None:
    """``ceil(int(digits) * 10**power10 * 2**power2)``, or None when above ``MAX_UNITS`` units.
    ``digits`` has no leading zero."""
    # The order of magnitude first, so that no big number is ever built: the value lies in
    # [10**(magnitude-1), 10**(magnitude+1)).
    magnitude = len(digits) + power10 + (power2 * 30103) // 100000
    if magnitude > 24:  # certainly above 2^63 units (19 digits) in milli-units (22)
        return None
    if magnitude < -2:  # certainly below one milli-unit, and not zero: rounds up to 1m
        return 1
    # Exact decimal arithmetic, however many digits (no int(str) of a long string: quadratic,
    # and limited to 4300 digits); the result has at most 25 digits.
    exact = Context(prec=len(digits) + 25, Emax=MAX_EMAX, Emin=MIN_EMIN)
    value = Decimal(digits)
    if power2:
        value = exact.multiply(value, 2**power2)
    milli = int(value.scaleb(power10, exact).to_integral_value(ROUND_CEILING, exact))
    return milli if milli <= MAX_UNITS * MILLI else None


def _shown(text: str) -> str:
    """A long input cut short for messages."""
    return text if len(text) <= 40 else text[:37] + "..."


def format_quantity(milli: int) -> str:
    """Render milli-units the short way a person reads them: ``500m``, ``2Gi``, ``3``."""
    if milli % MILLI:
        return f"{milli}m"
    units = milli // MILLI
    if units and units % 2**10 == 0:
        for suffix in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"):
            if units % 2 ** _BINARY[suffix] == 0:
                return f"{units // 2 ** _BINARY[suffix]}{suffix}"
    return str(units)
