"""Semantic versions (semver 2.0.0) as DRA's version attributes and CEL's ``semver()`` read them.

Kubernetes parses them with blang/semver's strict ``Parse``: ``MAJOR.MINOR.PATCH``, optional
``-pre.release`` and ``+build``, no leading zeros in numbers, no ``v`` prefix (CEL's
``semver(s, true)`` is the lenient form: a ``v`` prefix, missing minor or patch, leading zeros).
A :class:`Semver` orders as semver 2.0.0 says: build metadata is ignored, a pre-release is
lower than its release, numeric identifiers below alphanumeric ones.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_NUM = r"0|[1-9][0-9]*"
_IDENT = r"[0-9A-Za-z-]+"
_STRICT = re.compile(rf"({_NUM})\.({_NUM})\.({_NUM})(?:-({_IDENT}(?:\.{_IDENT})*))?(?:\+({_IDENT}(?:\.{_IDENT})*))?")
_LENIENT = re.compile(r"v?([0-9]+)(?:\.([0-9]+))?(?:\.([0-9]+))?(?:-([0-9A-Za-z.-]+))?(?:\+([0-9A-Za-z.-]+))?")


@dataclass(frozen=True, slots=True)
class Semver:
    major: int
    minor: int
    patch: int
    pre: tuple[str, ...] = ()
    build: tuple[str, ...] = ()

    def key(self) -> tuple[object, ...]:
        # A release sorts after its pre-releases; identifiers: numbers below strings.
        pre = tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in self.pre)
        return (self.major, self.minor, self.patch, 1 if not self.pre else 0, pre)

    def compare(self, other: Semver) -> int:
        a, b = self.key(), other.key()
        return (a > b) - (a < b)

    def __str__(self) -> str:
        text = f"{self.major}.{self.minor}.{self.patch}"
        if self.pre:
            text += "-" + ".".join(self.pre)
        if self.build:
            text += "+" + ".".join(self.build)
        return text


def parse_semver(text: str, lenient: bool = False) -> Semver | None:
    """The version ``text`` names, or None when it is not one."""
    if not lenient:
        m = _STRICT.fullmatch(text)
        if m is None:
            return None
        pre = tuple(m[4].split(".")) if m[4] else ()
        if any(p.isdigit() and len(p) > 1 and p[0] == "0" for p in pre):
            return None  # numeric pre-release identifiers have no leading zeros
        return Semver(int(m[1]), int(m[2]), int(m[3]), pre, tuple(m[5].split(".")) if m[5] else ())
    m = _LENIENT.fullmatch(text.strip())
    if m is None:
        return None
    return Semver(
        int(m[1]),
        int(m[2] or 0),
        int(m[3] or 0),
        tuple(m[4].split(".")) if m[4] else (),
        tuple(m[5].split(".")) if m[5] else (),
    )
