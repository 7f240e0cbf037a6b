"""The name formats the API server enforces, as apimachinery's ``util/validation`` defines them.

A real cluster's objects always pass (the API server refused the others), so these checks only
ever fire on files written by hand, where a NUL, a newline, an upper-case letter or a 300-character
name would otherwise flow into reports, keys and logs. Each check returns the problem as a phrase
(``""`` when the value is valid), for :class:`~rulesched.model.fields.Where` to place. Which
format a kind's ``metadata.name`` follows is kube-apiserver's: most kinds a DNS-1123 subdomain,
Namespaces a DNS-1123 label, Services a DNS-1035 label.

Label keys and values, resource names and namespaces repeat across a cluster's objects, so each
check remembers its latest verdicts (an LRU cache: the checks are pure functions), and decoding
a node or a pod pays for few regular expressions.
"""

from __future__ import annotations

import re
from functools import lru_cache

_REMEMBERED = 8192  # verdicts kept per format: label keys, values and namespaces recur across objects
_LABEL = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_LABEL = re.compile(_LABEL)
_DNS1123_SUBDOMAIN = re.compile(rf"{_LABEL}(\.{_LABEL})*")
_DNS1035_LABEL = re.compile("[a-z]([-a-z0-9]*[a-z0-9])?")
_KEY_NAME = re.compile("([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_LABEL_VALUE = re.compile("(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")


def shown(value: str) -> str:
    """A string from the input as messages quote it: in quotes, escaped, cut short."""
    return repr(value if len(value) <= 40 else value[:37] + "...")


def _checked(value: str, longest: int, pattern: re.Pattern[str], what: str) -> str:
    """The problem with ``value`` as a name of at most ``longest`` characters that ``pattern``
    matches whole (``what`` says which, for the message); "" when there is none."""
    if len(value) > longest:
        return f"{shown(value)} is longer than {longest} characters"
    if pattern.fullmatch(value) is None:
        return f"{shown(value)} is not {what}"
    return ""


@lru_cache(maxsize=_REMEMBERED)
def dns1123_subdomain(value: str) -> str:
    """A DNS-1123 subdomain (``example.com``): at most 253 characters of lower-case letters,
    digits, '-' and '.', starting and ending with a letter or digit."""
    return _checked(
        value,
        253,
        _DNS1123_SUBDOMAIN,
        "a lower-case RFC 1123 subdomain (letters a-z, digits, '-' and '.', "
        "starting and ending with a letter or digit)",
    )


@lru_cache(maxsize=_REMEMBERED)
def dns1123_label(value: str) -> str:
    """A DNS-1123 label (``my-name``): at most 63 characters, a subdomain without dots."""
    return _checked(
        value,
        63,
        _DNS1123_LABEL,
        "a lower-case RFC 1123 label (letters a-z, digits and '-', starting and ending with a letter or digit)",
    )


@lru_cache(maxsize=_REMEMBERED)
def dns1035_label(value: str) -> str:
    """A DNS-1035 label (Service names): a DNS-1123 label that starts with a letter."""
    return _checked(
        value,
        63,
        _DNS1035_LABEL,
        "a lower-case RFC 1035 label (letters a-z, digits and '-', "
        "starting with a letter and ending with a letter or digit)",
    )


@lru_cache(maxsize=_REMEMBERED)
def qualified_name(value: str) -> str:
    """A label key, annotation key or resource name: ``[prefix/]name``, the name at most 63
    characters of letters, digits, '-', '_' and '.' starting and ending with a letter or digit,
    the prefix a DNS-1123 subdomain (lower case)."""
    prefix, slash, name = value.rpartition("/")
    if slash:
        if "/" in prefix:
            return f"{shown(value)} has more than one '/' (expected [prefix/]name)"
        if not prefix:
            return f"{shown(value)} has an empty prefix before '/'"
        problem = dns1123_subdomain(prefix)
        if problem:
            return f"the prefix of {shown(value)}: {problem}"
    if not name:
        return f"{shown(value)} has an empty name part"
    if len(name) > 63:
        return f"the name part of {shown(value)} is longer than 63 characters"
    if _KEY_NAME.fullmatch(name) is None:
        return (
            f"{shown(value)} is not a qualified name (letters, digits, '-', '_' and '.', starting and "
            "ending with a letter or digit, after an optional DNS subdomain and '/')"
        )
    return ""


@lru_cache(maxsize=_REMEMBERED)
def label_value(value: str) -> str:
    """A label value: empty, or at most 63 characters of letters, digits, '-', '_' and '.'
    starting and ending with a letter or digit."""
    return _checked(
        value,
        63,
        _LABEL_VALUE,
        "a label value (empty, or letters, digits, '-', '_' and '.' starting and ending with a letter or digit)",
    )
